// The argv rule every command shares: node:util parseArgs, strict, with
// `--help`/`-h` accepted by every command, and its errors turned into the
// catalogue's UsageError (exit status 2).
import { parseArgs, type ParseArgsConfig } from 'node:util'
import { errors } from '../errors.js'

export type OptionsConfig = NonNullable<ParseArgsConfig['options']>

export const HELP_OPTION = { help: { type: 'boolean', short: 'h' } } as const

type WithHelp<O extends OptionsConfig> = O & typeof HELP_OPTION

type Strict<O extends OptionsConfig> = { args: string[]; options: WithHelp<O>; strict: true; allowPositionals: true }

export type ParsedArgs<O extends OptionsConfig> = ReturnType<typeof parseArgs<Strict<O>>>

/** Wrong positionals or options: UsageError. */
export function parseCommandArgs<const O extends OptionsConfig>(
  argv: readonly string[],
  options: O,
  positionals: readonly string[] = [],
): ParsedArgs<O> {
  let parsed: ParsedArgs<O>
  try {
    parsed = parseArgs<Strict<O>>({
      args: [...argv],
      options: { ...options, ...HELP_OPTION },
      strict: true,
      allowPositionals: true,
    })
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    if (typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS_') && err instanceof Error)
      throw errors.usage(err.message, { cause: err })
    throw err
  }
  if (asksForHelp(parsed)) return parsed
  const got = parsed.positionals
  // A name ending in ? is optional (`HOST?`); optional ones come last.
  const missing = positionals.filter((p) => !p.endsWith('?')).slice(got.length)
  if (missing.length > 0) throw errors.usage(`missing ${missing.join(' ')}`)
  const extra = got.slice(positionals.length)
  if (extra.length > 0) throw errors.usage(`unexpected argument ${JSON.stringify(extra[0])}`)
  return parsed
}

export function asksForHelp(parsed: { values: object }): boolean {
  return (parsed.values as { help?: unknown }).help === true
}

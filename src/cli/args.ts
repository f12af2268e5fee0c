// The argv helper every command shares: node:util parseArgs, strict, with
// its errors turned into a UsageError the CLI answers with exit status 2.
import { parseArgs, type ParseArgsConfig } from 'node:util'

/** The command line was wrong: exit 2 with the message (and the usage). */
export class UsageError extends Error {
  override name = 'UsageError'
}

export type OptionsConfig = NonNullable<ParseArgsConfig['options']>

type Strict<O extends OptionsConfig> = { args: string[]; options: O; strict: true; allowPositionals: true }

export type ParsedArgs<O extends OptionsConfig> = ReturnType<typeof parseArgs<Strict<O>>>

/**
 * Parses argv against options. `positionals` names the positional
 * arguments the command takes, in order; fewer or more is a UsageError,
 * as is an unknown option or an option given the wrong kind of value.
 */
export function parseCommandArgs<const O extends OptionsConfig>(
  argv: readonly string[],
  options: O,
  positionals: readonly string[] = [],
): ParsedArgs<O> {
  let parsed: ParsedArgs<O>
  try {
    parsed = parseArgs<Strict<O>>({ args: [...argv], options, strict: true, allowPositionals: true })
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    if (typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS_')) throw new UsageError((err as Error).message, { cause: err })
    throw err
  }
  const got = parsed.positionals
  const missing = positionals.slice(got.length)
  if (missing.length > 0) throw new UsageError(`missing ${missing.join(' ')}`)
  const extra = got.slice(positionals.length)
  if (extra.length > 0) throw new UsageError(`unexpected argument ${JSON.stringify(extra[0])}`)
  return parsed
}

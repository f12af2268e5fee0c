// What a CLI command is (usage, options, run), and the one path from its
// argv to its exit status (design §8): 0 done or `--help`, 1 refused or
// failed (the reason on stderr), 2 usage (the message, then the usage).
import { loadConfig, type Config } from '../config.js'
import type { DeployStore } from '../domain/ports.js'
import { printableLines } from '../domain/printable.js'
import { ConfigError, errorMessage, errors, exitStatusOf } from '../errors.js'
import { asksForHelp, parseCommandArgs, type OptionsConfig, type ParsedArgs } from './args.js'

export interface Output {
  stdout: NodeJS.WritableStream
  stderr: NodeJS.WritableStream
}

export interface Cli extends Output {
  environ: NodeJS.ProcessEnv
  /** A command that goes on for ever ends when stdout's reader goes. */
  readerGone?: AbortSignal
}

/** 128 + SIGPIPE, as `seq 1000000 | head -1` exits. */
export const READER_GONE_STATUS = 141

/** EPIPE (`| head -1`) drops the rest and aborts the signal; other errors throw. */
export function endQuietlyWhenReaderGoes(streams: readonly NodeJS.WritableStream[]): AbortSignal {
  const gone = new AbortController()
  for (const stream of streams)
    stream.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EPIPE' && err.code !== 'ERR_STREAM_DESTROYED') throw err
      gone.abort()
    })
  return gone.signal
}

export interface CommandContext extends Output {
  config: Config
}

export interface Signature {
  /** Before a failure's reason: `layoutd`, `layoutd routes add`. */
  failures: string
  /** Before a usage error's message: `layoutd`, `layoutd routes`. */
  usageErrors: string
}

/** A refused environment is no one command's failure. */
export const PROGRAM: Signature = { failures: 'layoutd', usageErrors: 'layoutd' }

export interface Command<O extends OptionsConfig = OptionsConfig, C = CommandContext> {
  usage: string
  options: O
  /** In order, named in usage errors. */
  positionals?: readonly string[]
  signature: Signature
  run(args: ParsedArgs<O>, context: C): Promise<number>
}

export interface CommandGroup<C> {
  usage: string
  signature: Signature
  /** A missing or unknown one is a usage error in the group's words. */
  subcommand(name: string | undefined): Command<OptionsConfig, C>
}

export function subcommandIn<C>(table: Record<string, Command<OptionsConfig, C>>): CommandGroup<C>['subcommand'] {
  return (name) => {
    if (name === undefined) throw errors.usage('a subcommand is required')
    const command = Object.hasOwn(table, name) ? table[name] : undefined
    if (command === undefined) throw errors.usage(`unknown subcommand ${JSON.stringify(name)}`)
    return command
  }
}

/** Opens what a command runs with and closes it after, whatever happened. */
export type Scope<C> = (use: (context: C) => Promise<number>) => Promise<number>

/** The configuration loaded now: help never loads it. */
export function withConfig(cli: Cli): Scope<CommandContext> {
  return (use) => use({ config: loadConfig(cli.environ), stdout: cli.stdout, stderr: cli.stderr })
}

export function withDeployStore(cli: Cli): Scope<CommandContext & { store: DeployStore }> {
  return async (use) => {
    const config = loadConfig(cli.environ)
    const { openDeployStore } = await import('../infra/deploy-store.js')
    const store = await openDeployStore(config)
    try {
      return await use({ config, stdout: cli.stdout, stderr: cli.stderr, store })
    } finally {
      await store.close()
    }
  }
}

/** A bug (TypeError…) is printed with its stack, anything else as its message. */
export function failed(err: unknown, out: Output, signature: Signature, usage: string): number {
  const status = exitStatusOf(err)
  if (status === 2) {
    out.stderr.write(`${signature.usageErrors}: ${printableLines(errorMessage(err))}\n${usage}`)
    return status
  }
  const who = err instanceof ConfigError ? PROGRAM : signature
  const bug =
    err instanceof TypeError || err instanceof ReferenceError || err instanceof RangeError || err instanceof SyntaxError
  // A message may carry outside text: shown printable.
  out.stderr.write(`${who.failures}: ${printableLines(bug ? (err.stack ?? err.message) : errorMessage(err))}\n`)
  return status
}

export async function runCommand<O extends OptionsConfig, C>(
  command: Command<O, C>,
  argv: readonly string[],
  out: Output,
  scope: Scope<C>,
): Promise<number> {
  try {
    const args = parseCommandArgs(argv, command.options, command.positionals)
    if (asksForHelp(args)) {
      out.stdout.write(command.usage)
      return 0
    }
    return await scope((context) => command.run(args, context))
  } catch (err) {
    return failed(err, out, command.signature, command.usage)
  }
}

export async function runGroup<C>(
  group: CommandGroup<C>,
  argv: readonly string[],
  out: Output,
  scope: Scope<C>,
): Promise<number> {
  const [name, ...rest] = argv
  if (name === '--help' || name === '-h') {
    out.stdout.write(group.usage)
    return 0
  }
  let command: Command<OptionsConfig, C>
  try {
    command = group.subcommand(name)
  } catch (err) {
    return failed(err, out, group.signature, group.usage)
  }
  return runCommand(command, rest, out, scope)
}

// `layoutd serve` (design §8): loads the config and hands it to
// src/server.ts, which runs the agent. The composition (adapters, the
// agent, the HTTP app, the listener, shutdown) is src/server.ts; this module
// is its command line, and loads it only when the agent is to run.
import { errors } from '../../errors.js'
import { failed, PROGRAM, runCommand, withConfig, type Cli, type CommandContext } from '../command.js'

export const usage = `usage:
  layoutd serve                                   the agent (also \`npm start\`)

  Reads the environment (CARLOS_*); listens on CARLOS_AGENT_LISTEN.
`

export const options = {} as const

export const signature = PROGRAM

export async function run(_args: unknown, { config }: CommandContext): Promise<number> {
  const { serve } = await import('../../server.js')
  return serve(config)
}

export function main(argv: readonly string[], cli: Cli): Promise<number> {
  // Anything but --help is refused in the words serve has always used.
  if (argv.some((arg) => arg !== '--help' && arg !== '-h'))
    return Promise.resolve(failed(errors.usage('serve takes no arguments'), cli, signature, usage))
  return runCommand({ usage, options, signature, run }, argv, cli, withConfig(cli))
}

// `layoutd serve` (design §8): loads the config and hands it to
// src/server.ts, loaded only when the agent is to run.
import { unknownVariables } from '../../config.js'
import { errors } from '../../errors.js'
import { failed, PROGRAM, runCommand, withConfig, type Cli, type CommandContext, type Scope } from '../command.js'

export const usage = `usage:
  layoutd serve                                   the agent (also \`npm start\`)

  Reads the environment (CARLOS_*); listens on CARLOS_AGENT_LISTEN.
`

export const options = {} as const

export const signature = PROGRAM

/** The CARLOS_* variables it does not read are named at start. */
type ServeContext = CommandContext & { unknown: string[] }

export async function run(_args: unknown, { config, unknown }: ServeContext): Promise<number> {
  const { serve } = await import('../../server.js')
  return serve(config, { unknownVariables: unknown })
}

export function main(argv: readonly string[], cli: Cli): Promise<number> {
  // Anything but --help is refused in the words serve has always used.
  if (argv.some((arg) => arg !== '--help' && arg !== '-h'))
    return Promise.resolve(failed(errors.usage('serve takes no arguments'), cli, signature, usage))
  const scope: Scope<ServeContext> = (use) =>
    withConfig(cli)((ctx) => use({ ...ctx, unknown: unknownVariables(cli.environ) }))
  return runCommand({ usage, options, signature, run }, argv, cli, scope)
}

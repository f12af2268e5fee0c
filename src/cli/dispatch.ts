// The command line's dispatcher (design §8): imports a command's module only
// when it runs, so each loads only what it uses, and answers --help and
// --version itself, so help works whatever the environment holds.
import { errorMessage, errors } from '../errors.js'
import { failed, PROGRAM, type Cli } from './command.js'

export const USAGE = `usage:
  layoutd serve                                   the agent
  layoutd status [HOST] [--url URL] [--json]      the report (or one host), as a summary and a table, or JSON
  layoutd status --problems                       the same, only the rows that are not clean
  layoutd status --watch | --wait-ready [--timeout S]   redrawn as it changes; or wait until the agent is ready
  layoutd converge [--url URL] [--wait]           kick the leg; --wait follows the run
  layoutd routes add HOST [--kind instance|sidecar|static|service] [--hibernate]
                          [--socket PATH] [--dir PATH] [--db PATH]
  layoutd routes import FILE|- [--skip-existing]  many rows from JSON Lines (minted as add mints them)
  layoutd routes list [--json] | routes rm HOST
  layoutd intent migrate|revert (--box LABEL | --fleet) [--force] [--dry-run] [--new-box]
  layoutd intent prune --keep N [--dry-run] | intent status [--json] | intent forget-applied
  layoutd fleet status [--json] [--wait [--timeout S] | --watch] | fleet forget BOX [-m WHY]
  layoutd fleet rollout migrate|revert --waves W [--max-parallel N] [--progress-deadline D]
                        [--on-failure pause|revert|freeze] [--max-failed-rows N] [--force] [-m MSG]
  layoutd fleet rollout revert --now [-m MSG] | fleet rollout status [--json] [--wait [--timeout S]]
  layoutd fleet rollout history [ID] [--json] | pause|resume|abort|promote [-m MSG]
  layoutd fleet rollout retry BOX [-m MSG] | fleet rollout skip BOX -m WHY
  layoutd journal list [--json] | journal show FILE|HOST [--json]   the journals in D/layout, read only
  layoutd journal release FILE|HOST [--dry-run]   remove a kept journal once its moves are settled
  layoutd registry backup FILE | registry restore FILE   copy D/registry.db out; put a copy back (agent stopped)
  layoutd journal settle FILE|HOST|--all [--dry-run]   agent stopped: release each host whose files are whole
  layoutd --version | <command> --help
`

interface CommandModule {
  main(argv: readonly string[], cli: Cli): Promise<number>
}

const COMMANDS: Record<string, () => Promise<CommandModule>> = {
  serve: () => import('./commands/serve.js'),
  status: () => import('./commands/status.js'),
  converge: () => import('./commands/converge.js'),
  routes: () => import('./commands/routes/index.js'),
  intent: () => import('./commands/intent.js'),
  fleet: () => import('./commands/fleet.js'),
  journal: () => import('./commands/journal.js'),
  registry: () => import('./commands/registry.js'),
}

/** Resolves to the exit status. */
export async function dispatch(argv: readonly string[], cli: Cli): Promise<number> {
  const [name, ...rest] = argv
  switch (name) {
    case undefined:
      cli.stdout.write(USAGE)
      return 2
    case 'help':
    case '--help':
    case '-h':
      cli.stdout.write(USAGE)
      return 0
    case '--version': {
      const { packageVersion } = await import('../infra/package-version.js')
      cli.stdout.write(`${await packageVersion()}\n`)
      return 0
    }
  }
  const load = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined
  if (load === undefined) return failed(errors.usage(`unknown command ${JSON.stringify(name)}`), cli, PROGRAM, USAGE)
  let command: CommandModule
  try {
    command = await load()
  } catch (err) {
    // A dependency the command loads is not installed: say what to run, not a stack.
    if ((err as NodeJS.ErrnoException).code !== 'ERR_MODULE_NOT_FOUND') throw err
    cli.stderr.write(`layoutd: ${errorMessage(err).split('\n')[0]}\nlayoutd: a dependency is missing: run \`npm ci\`\n`)
    return 1
  }
  return command.main(rest, cli)
}

// `layoutd routes add|import|list|rm` (design §8): the registry, edited directly;
// the agent need not run. This module is the group: its usage, which
// subcommand runs, and what they run with (the registry, and the mint rule
// for `add`), opened for the command and closed after it.
import { loadConfig } from '../../../config.js'
import type { Mode } from '../../../domain/modes.js'
import type { DeployStore, RouteStore } from '../../../domain/ports.js'
import { printable } from '../../../domain/printable.js'
import { AgentUnreachable, errorMessage, errors } from '../../../errors.js'
import type { OptionsConfig } from '../../args.js'
import {
  runGroup,
  type Cli,
  type Command,
  type CommandContext,
  type CommandGroup,
  type Signature,
} from '../../command.js'
import * as add from './add.js'
import * as importRows from './import.js'
import * as list from './list.js'
import * as rm from './rm.js'

export const usage = `usage:
  layoutd routes add HOST [--kind instance|sidecar|static|service] [--hibernate]
                          [--socket PATH] [--dir PATH] [--db PATH]
  layoutd routes import FILE|- [--skip-existing]
  layoutd routes list [--json]
  layoutd routes rm HOST
`

export const signature: Signature = { failures: 'layoutd routes', usageErrors: 'layoutd routes' }

/** What a routes subcommand runs with. */
export interface RoutesIo extends CommandContext {
  /** Opened (and closed) by the caller. */
  registry: RouteStore
  /** The mint rule: the mode of a new row; rejects with `intent_unreadable` while the intent cannot be read. */
  mint: () => Promise<Mode>
  /** The command groups are looked up with (through NSS); `getent` unless a test says otherwise. */
  getent?: string
  /** What `routes import -` reads; the process's standard input unless a test says otherwise. */
  stdin?: NodeJS.ReadableStream
  /**
   * Asks the running agent for a run after rows were added, so it acts on them without a restart; says on
   * stderr when no agent took it. Unset in tests that have no agent.
   */
  kick?: () => Promise<void>
}

/** How long `routes add` waits for the running agent's mint before applying the rule itself. */
const MINT_ASK_MS = 5_000

const SUBCOMMANDS: Record<string, Command<OptionsConfig, RoutesIo>> = { add, import: importRows, list, rm }

export const group: CommandGroup<RoutesIo> = {
  usage,
  signature,
  subcommand(name) {
    if (name === undefined) throw errors.usage('routes needs a command: add, import, list or rm')
    const command = Object.hasOwn(SUBCOMMANDS, name) ? SUBCOMMANDS[name] : undefined
    if (command === undefined) throw errors.usage(`unknown routes command ${JSON.stringify(name)}`)
    return command
  },
}

/**
 * Runs `routes <argv>` (argv is what follows `routes`) with a registry and
 * mint the caller opened (tests, benchmarks). Resolves to the exit status.
 */
export function routesCommand(argv: readonly string[], io: RoutesIo): Promise<number> {
  return runGroup(group, argv, io, (use) => use(io))
}

/** `layoutd routes …` from the command line: opens the registry and the deploy store for the command. */
export function main(argv: readonly string[], cli: Cli): Promise<number> {
  return runGroup(group, argv, cli, async (use) => {
    const config = loadConfig(cli.environ)
    const [{ Registry }, { AgentLock }] = await Promise.all([
      import('../../../infra/registry.js'),
      import('../../../infra/agent-lock.js'),
    ])
    // Beside a running agent the registry must be the one it opened: one
    // that is gone is refused (registry_gone), never created afresh for
    // nobody to read. With no agent running, the first command creates it.
    const registry = Registry.open(config.dataDir, { create: !AgentLock.held(config.dataDir) })
    // The deploy store and the agent's client are opened only when a row is
    // minted: list, rm and import never need them, and a bulk import need
    // not load them.
    let store: DeployStore | undefined
    // The running agent mints with its isolation gate's real answer. Only
    // when no agent answers does the CLI apply the rule itself, without a
    // gate: with no intent, a nested default then mints nested only where
    // the box has evidently moved (nested rows present).
    const mint = async (): Promise<Mode> => {
      const [{ openDeployStore }, { mintLayoutIntentWith }, { agentClient }] = await Promise.all([
        import('../../../infra/deploy-store.js'),
        import('../../../domain/mint.js'),
        import('../../agent-client.js'),
      ])
      try {
        return await agentClient(config, undefined).mint(MINT_ASK_MS)
      } catch (err) {
        if (!(err instanceof AgentUnreachable)) throw err
      }
      store ??= await openDeployStore(config)
      return mintLayoutIntentWith({
        store,
        box: config.box,
        dirs: config,
        routes: () => registry.list(),
        layoutDefault: config.layoutDefault,
        build: config.build,
        gate: null,
      })
    }
    const kick = async (): Promise<void> => {
      const { agentClient } = await import('../../agent-client.js')
      try {
        await agentClient(config, undefined).kick()
        cli.stdout.write('asked the agent for a run: it acts on the new rows now\n')
      } catch (err) {
        // The rows are in the registry either way: an agent started later reads them.
        const why = err instanceof AgentUnreachable ? 'no agent answered' : errorMessage(err)
        cli.stderr.write(`layoutd routes: ${printable(why)}; the agent acts on the new rows when it next runs\n`)
      }
    }
    try {
      return await use({ config, stdout: cli.stdout, stderr: cli.stderr, registry, mint, kick })
    } finally {
      await store?.close()
      registry.close()
    }
  })
}

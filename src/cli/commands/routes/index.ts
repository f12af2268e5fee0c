// `layoutd routes add|import|list|rm` (design §8): the registry edited
// directly, no agent needed.
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

export interface RoutesIo extends CommandContext {
  /** Opened and closed by the caller. */
  registry: RouteStore
  /** The mint rule; rejects with `intent_unreadable` while the intent is unreadable. */
  mint: () => Promise<Mode>
  /** Group lookup through NSS; `getent` unless a test says otherwise. */
  getent?: string
  /** What `routes import -` reads. */
  stdin?: NodeJS.ReadableStream
  kick?: () => Promise<void>
}

/** How long `routes add` waits for the agent's mint before applying the rule itself. */
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

/** With a registry and mint the caller opened (tests). */
export function routesCommand(argv: readonly string[], io: RoutesIo): Promise<number> {
  return runGroup(group, argv, io, (use) => use(io))
}

export function main(argv: readonly string[], cli: Cli): Promise<number> {
  return runGroup(group, argv, cli, async (use) => {
    const config = loadConfig(cli.environ)
    const [{ Registry }, { AgentLock }] = await Promise.all([
      import('../../../infra/registry.js'),
      import('../../../infra/agent-lock.js'),
    ])
    // Beside a running agent a gone registry is refused (registry_gone), never created for nobody to read.
    const registry = Registry.open(config.dataDir, { create: !AgentLock.held(config.dataDir) })
    let store: DeployStore | undefined
    // The running agent mints with its gate's real answer; without one the CLI applies the rule gateless
    // (a nested default mints nested only where nested rows are present).
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

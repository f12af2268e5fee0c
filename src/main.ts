// The command line (DESIGN §8): parses argv and dispatches. Every command
// reads the same environment as the agent. Exit status: 0 done, 1 refused
// or failed (the reason on stderr), 2 usage.
import { AgentUnreachable } from './cli/agent-client.js'
import { UsageError } from './cli/args.js'
import type { CliIo } from './cli/status.js'
import { loadConfig, type Config } from './config.js'
import { ConfigError } from './errors.js'
import { AppError } from './errors.js'
import type { Registry } from './infra/registry.js'

// Each command loads what it needs when it runs: `routes list` should not
// pay for Fastify, and `serve` is the only one that needs the agent.
const USAGE = `usage:
  layoutd serve                                   the agent
  layoutd status [--url URL] [--json]             the report, as a table or JSON
  layoutd converge [--url URL] [--wait]           kick the leg; --wait follows the run
  layoutd routes add HOST [--kind instance|sidecar|static|service] [--hibernate]
                          [--socket PATH] [--dir PATH] [--db PATH]
  layoutd routes list [--json] | routes rm HOST
  layoutd intent migrate|revert [--box LABEL] [--force]
  layoutd intent status [--json]
`

/** How long `routes add` waits for the running agent's mint before applying the rule itself. */
const MINT_ASK_MS = 5_000

async function withRegistry<T>(config: Config, fn: (r: Registry) => Promise<T>): Promise<T> {
  const { Registry } = await import('./infra/registry.js')
  const registry = Registry.open(config.dataDir)
  try {
    return await fn(registry)
  } finally {
    registry.close()
  }
}

async function dispatch(argv: string[], config: Config): Promise<number> {
  const [cmd, ...rest] = argv
  const io: CliIo = { config, stdout: process.stdout, stderr: process.stderr }
  switch (cmd) {
    case 'serve':
      if (rest.length > 0) throw new UsageError(`serve takes no arguments`)
      return (await import('./server.js')).serve(config)
    case 'status':
      return (await import('./cli/status.js')).statusCommand(rest, io)
    case 'converge':
      return (await import('./cli/converge.js')).convergeCommand(rest, io)
    case 'routes': {
      const [{ routesCommand }, { mintLayoutIntentWith }, { openDeployStore }, { AgentClient, agentUrl }] = await Promise.all([
        import('./cli/routes.js'),
        import('./domain/mint.js'),
        import('./infra/deploy-store.js'),
        import('./cli/agent-client.js'),
      ])
      return withRegistry(config, (registry) => {
        const store = openDeployStore(config)
        // The running agent mints with its isolation gate's real answer.
        // Only when no agent answers does the CLI apply the rule itself,
        // without a gate: with no intent, a nested default then mints nested
        // only where the box has evidently moved (nested rows present).
        const mint = async () => {
          try {
            return await new AgentClient(agentUrl(config, undefined), config.token).mint(MINT_ASK_MS)
          } catch (err) {
            if (!(err instanceof AgentUnreachable)) throw err
          }
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
        return routesCommand(rest, { ...io, registry, mint }).finally(() => store.close())
      })
    }
    case 'intent': {
      const [{ intentCommand }, { openDeployStore }] = await Promise.all([import('./cli/intent.js'), import('./infra/deploy-store.js')])
      const store = openDeployStore(config)
      try {
        return await intentCommand(rest, { ...io, store })
      } finally {
        await store.close()
      }
    }
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(USAGE)
      return cmd === undefined ? 2 : 0
    default:
      throw new UsageError(`unknown command ${JSON.stringify(cmd)}`)
  }
}

async function main(): Promise<void> {
  let config: Config
  try {
    config = loadConfig(process.env)
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`layoutd: ${err.message}\n`)
      process.exitCode = 1
      return
    }
    throw err
  }
  try {
    process.exitCode = await dispatch(process.argv.slice(2), config)
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`layoutd: ${err.message}\n${USAGE}`)
      process.exitCode = 2
    } else if (err instanceof AppError || err instanceof AgentUnreachable) {
      process.stderr.write(`layoutd: ${err.message}\n`)
      process.exitCode = 1
    } else {
      process.stderr.write(`layoutd: ${(err as Error).stack ?? String(err)}\n`)
      process.exitCode = 1
    }
  }
}

await main()

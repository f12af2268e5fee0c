// The composition root of `layoutd serve`: opens the adapters (registry,
// deploy store, edge, metrics, logger), composes the agent from them
// (src/agent/compose.ts, as the tests do), hands it to the HTTP app,
// listens, and shuts everything down in order on a signal.
import type { Config } from './config.js'

const LOOPBACK = /^(127\.[0-9.]+|::1|localhost)$/

/** How long shutdown waits for the leg to finish its current host before the process exits anyway. */
const SHUTDOWN_GRACE_MS = 90_000

export async function serve(config: Config): Promise<number> {
  const [{ default: closeWithGrace }, { edgeReloader }, { composeAgent }, { buildApp }, { openDeployStore }, { Registry }, { createLogger }, { Metrics }] =
    await Promise.all([
      import('close-with-grace'),
      import('./infra/edge.js'),
      import('./agent/compose.js'),
      import('./app.js'),
      import('./infra/deploy-store.js'),
      import('./infra/registry.js'),
      import('./logger.js'),
      import('./metrics.js'),
    ])
  const logger = createLogger(config.logLevel)
  if (config.token === '' && !LOOPBACK.test(config.listen.host)) {
    logger.error({ listen: config.listen.host }, 'layoutd: refusing to listen beyond loopback without CARLOS_AGENT_TOKEN')
    process.stderr.write(`layoutd: CARLOS_AGENT_LISTEN=${config.listen.host}:${config.listen.port} is beyond loopback; set CARLOS_AGENT_TOKEN to listen there\n`)
    return 1
  }
  const metrics = new Metrics()
  const registry = Registry.open(config.dataDir)
  const store = openDeployStore(config, logger)
  const agent = composeAgent({ config, logger, metrics, registry, store, reload: edgeReloader(config.edgeReloadUrl, logger) })
  const app = await buildApp({ api: agent, metrics, logger, token: config.token })
  app.addHook('onClose', async () => {
    await agent.stop()
    await store.close()
    registry.close()
  })
  // Listen first: /livez answers and /ready says 503 with the phase while
  // start-up recovery runs.
  await app.listen({ host: config.listen.host, port: config.listen.port })
  closeWithGrace({ delay: SHUTDOWN_GRACE_MS }, async ({ signal, err }) => {
    if (err !== undefined) logger.error({ err }, 'layoutd: shutting down after an error')
    else logger.info({ signal }, 'layoutd: shutting down; the leg finishes its current host')
    await app.close()
  })
  agent.start().catch((err: unknown) => {
    logger.fatal({ err }, 'layoutd: start-up failed')
    process.exitCode = 1
    void app.close()
  })
  return 0
}


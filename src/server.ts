// The composition root of `layoutd serve`: takes the data root's lock (one
// agent per data root), opens the adapters (registry,
// deploy store, edge, metrics, logger), composes the agent from them
// (src/agent/compose.ts, as the tests do), hands it to the HTTP app,
// listens, and shuts everything down in order on a signal.
import type { AddressInfo } from 'node:net'
import type { App } from './app.js'
import type { Config } from './config.js'
import { AppError, errorMessage, errors } from './errors.js'
import type { AgentLock } from './infra/agent-lock.js'
import type { openAgentDeployStore } from './infra/deploy-store.js'
import type { Registry } from './infra/registry.js'
import type { AppLogger } from './logger.js'

const LOOPBACK = /^(127\.[0-9.]+|::1|localhost)$/

/** `host:port` as a client would dial it, IPv6 in brackets; the configured host where the server cannot say. */
function listenAddress(address: string | AddressInfo | null, configured: string): string {
  if (address === null || typeof address === 'string') return address ?? configured
  return address.family === 'IPv6' ? `[${address.address}]:${address.port}` : `${address.address}:${address.port}`
}

/** How long shutdown waits for the leg to finish its current host before the process exits anyway. */
const SHUTDOWN_GRACE_MS = 90_000

/**
 * A warning when libuv's pool is smaller than the fsyncs a converge runs at once: the converge would be
 * slower, not wrong.
 */
function warnOfSmallThreadPool(logger: AppLogger, pool: number, wanted: number): void {
  if (pool >= wanted) return
  logger.warn(
    { threadPool: pool, wanted },
    `layoutd: libuv's thread pool has ${pool} threads, so a converge runs its fsyncs ${pool} at a time ` +
      `and takes longer; start node with UV_THREADPOOL_SIZE=${wanted} ` +
      `(contrib/layoutd.service, the image and npm start do)`,
  )
}

/** True, said on the log and on stderr, when the address is beyond loopback and no token guards the mutations. */
function refusesToListen(config: Config, logger: AppLogger): boolean {
  if (config.token !== '' || LOOPBACK.test(config.listen.host)) return false
  logger.error({ listen: config.listen.host }, 'layoutd: refusing to listen beyond loopback without CARLOS_AGENT_TOKEN')
  process.stderr.write(
    `layoutd: CARLOS_AGENT_LISTEN=${config.listen.host}:${config.listen.port} is beyond loopback; ` +
      `set CARLOS_AGENT_TOKEN to listen there\n`,
  )
  return true
}

interface Openers {
  Registry: typeof Registry
  openAgentDeployStore: typeof openAgentDeployStore
}

/**
 * The registry, then the deploy store, under the lock: when the registry
 * cannot open, the lock is released before the error goes up. A deploy
 * store that cannot open does not stop the start: it reads unreadable and
 * is opened again (design §5.3).
 */
async function openAdapters(config: Config, logger: AppLogger, lock: Pick<AgentLock, 'release'>, open: Openers) {
  try {
    const registry = open.Registry.open(config.dataDir)
    try {
      return { registry, store: await open.openAgentDeployStore(config, logger) }
    } catch (err) {
      registry.close()
      throw err
    }
  } catch (err) {
    lock.release()
    throw err
  }
}

/**
 * Listens on the configured address; one in use is a coded error with the address, and who holds it when
 * /proc says.
 */
async function listen(app: App, config: Config): Promise<void> {
  try {
    await app.listen({ host: config.listen.host, port: config.listen.port })
  } catch (err) {
    await app.close()
    if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err
    // A reason, not a stack: the address, and who holds it when /proc says.
    const { describePortHolder } = await import('./infra/port-holder.js')
    const host = config.listen.host.includes(':') ? `[${config.listen.host}]` : config.listen.host
    throw errors.addressInUse(`${host}:${config.listen.port}`, await describePortHolder(config.listen.port))
  }
}

/**
 * A start that failed: one log line naming the cause, and exit status 1. A
 * coded error is a cause layoutd names on purpose, logged by its code
 * without a stack; anything else is a bug, logged with its stack.
 */
function startFailed(err: unknown, logger: AppLogger): void {
  const line = `layoutd: start-up failed: ${errorMessage(err)}`
  if (err instanceof AppError) logger.fatal({ code: err.code }, line)
  else logger.fatal({ err }, line)
  process.exitCode = 1
}

export async function serve(config: Config): Promise<number> {
  const [
    { default: closeWithGrace },
    { edgeReloader },
    { composeAgent },
    { buildApp },
    { openAgentDeployStore },
    { Registry },
    { AgentLock },
    { createLogger },
    { Metrics },
    { armSkippedFsyncs },
    { packageVersion },
    { SYNC_CONCURRENCY, threadPoolSize },
  ] = await Promise.all([
    import('close-with-grace'),
    import('./infra/edge.js'),
    import('./agent/compose.js'),
    import('./app.js'),
    import('./infra/deploy-store.js'),
    import('./infra/registry.js'),
    import('./infra/agent-lock.js'),
    import('./logger.js'),
    import('./metrics.js'),
    import('./infra/failpoint.js'),
    import('./package-version.js'),
    import('./infra/fsutil.js'),
  ])
  const logger = createLogger(config.logLevel)
  warnOfSmallThreadPool(logger, threadPoolSize(), SYNC_CONCURRENCY)
  if (refusesToListen(config, logger)) return 1
  // Tests only: the fsyncs CARLOS_FAILPOINT takes out (design §3.4); a
  // name that is none of them stops the start before anything is touched.
  armSkippedFsyncs(config.failpoint)
  // One agent per data root (design §4.4), before anything under it is
  // read: a second agent throws here naming the holder, and touches nothing.
  const lock = AgentLock.acquire(config.dataDir)
  const metrics = new Metrics()
  metrics.ops.setBuildInfo(await packageVersion(), config.build)
  const { registry, store } = await openAdapters(config, logger, lock, { Registry, openAgentDeployStore })
  const agent = composeAgent({
    config,
    logger,
    metrics,
    registry,
    store,
    reload: edgeReloader(config.edgeReloadUrl, logger),
  })
  // The agent says which data root it holds (GET /agent), as D/agent.json does, so a CLI refuses another root's agent.
  const app = await buildApp({ api: agent, metrics, logger, token: config.token, identity: lock.identity })
  app.addHook('onClose', async () => {
    await agent.stop()
    await store.close()
    registry.close()
    lock.release()
  })
  // Listen first: /livez answers and /ready says 503 with the phase while
  // start-up recovery runs.
  await listen(app, config)
  lock.listening(listenAddress(app.server.address(), config.listen.host))
  const grace = closeWithGrace({ delay: SHUTDOWN_GRACE_MS }, async ({ signal, err }) => {
    if (err !== undefined) logger.error({ err }, 'layoutd: shutting down after an error')
    else logger.info({ signal }, 'layoutd: shutting down; the leg finishes its current host')
    await app.close()
  })
  agent.start().then(
    // Ready: what the activator asks next is compiled now, before it asks.
    () => (agent.phase === 'ready' ? app.warmHotRoutes() : undefined),
    (err: unknown) => {
      // close-with-grace would end the process 0 once the loop drains: a
      // failed start exits 1, so systemd restarts it and marks it failed.
      grace.uninstall()
      startFailed(err, logger)
      void app.close()
    },
  )
  return 0
}

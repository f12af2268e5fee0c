// The composition root of `layoutd serve`: takes the lock, opens the adapters,
// composes the agent and the app, listens, and shuts down in order.
import type { FastifyListenOptions } from 'fastify'
import { Server as NetServer, type AddressInfo, type Socket as NetSocket } from 'node:net'
import { hostname } from 'node:os'
import type { App } from './app.js'
import { configWarnings, type Config } from './config.js'
import type { DeployStore } from './domain/ports.js'
import { AppError, errorMessage, errors } from './errors.js'
import type { AgentLock } from './infra/agent-lock.js'
import { agentToken, type AgentToken } from './infra/agent-token.js'
import type { openAgentDeployStore } from './infra/deploy-store.js'
import type { Registry } from './infra/registry.js'
import { sayLoopScheduling } from './infra/loop-scheduling.js'
import { inheritedSocket, listenBacklog, type InheritedSocket } from './infra/socket-activation.js'
import type { AppLogger } from './logger.js'
import type { Metrics } from './metrics/metrics.js'

/** The listening socket's own close, without HTTP's. */
// eslint-disable-next-line @typescript-eslint/unbound-method -- called with the server as `this`
const netServerClose: (this: NetServer) => void = NetServer.prototype.close

const LOOPBACK = /^(127\.[0-9.]+|::1|localhost)$/

/** `host:port` as a client dials it. */
function listenAddress(address: string | AddressInfo | null, configured: string): string {
  if (address === null || typeof address === 'string') return address ?? configured
  return address.family === 'IPv6' ? `[${address.address}]:${address.port}` : `${address.address}:${address.port}`
}

/** How long shutdown waits for the leg's current host. */
const SHUTDOWN_GRACE_MS = 90_000

/** Shutdown answers for DRAIN_MS, up to DRAIN_MAX_MS while an accepted connection is silent (design §4.6). */
export const DRAIN_MS = 250
export const DRAIN_MAX_MS = 2000

/** Closes the listening socket alone: HTTP's close would drop connections not yet read. */
function drainOnClose(app: App): void {
  // Connections that have sent no request yet.
  const silent = new Set<NetSocket>()
  app.server.on('connection', (socket: NetSocket) => {
    silent.add(socket)
    socket.once('close', () => silent.delete(socket))
  })
  app.server.prependListener('request', (request) => silent.delete(request.socket))
  app.addHook('preClose', async () => {
    app.server.prependListener('request', (_request, response) => {
      response.shouldKeepAlive = false
    })
    netServerClose.call(app.server)
    const started = performance.now()
    await new Promise((resolve) => setTimeout(resolve, DRAIN_MS))
    while (silent.size > 0 && performance.now() - started < DRAIN_MAX_MS)
      await new Promise((resolve) => setTimeout(resolve, 10))
  })
}

/** A small pool, or no C walk (design §3.3): slower, not wrong. */
function warnOfSlowerConverge(
  logger: AppLogger,
  { pool, wanted, cWalkMissing }: { pool: number; wanted: number; cWalkMissing: string | undefined },
): void {
  if (cWalkMissing !== undefined)
    logger.warn(
      { cWalk: cWalkMissing },
      'layoutd: the C walk (native/walk.c) was not built, so preflight walks sources in JavaScript and a ' +
        'converge takes longer; build it with npm run build (node-gyp: python3, make, a C compiler)',
    )
  if (pool >= wanted) return
  logger.warn(
    { threadPool: pool, wanted },
    `layoutd: libuv's thread pool has ${pool} threads, so a converge runs its fsyncs ${pool} at a time ` +
      `and takes longer; start node with UV_THREADPOOL_SIZE=${wanted} ` +
      `(contrib/layoutd.service, the image and npm start do)`,
  )
}

/** Beyond loopback, clients need a token (design §6). */
function refusesToListen(config: Config, logger: AppLogger, socket: InheritedSocket | null): boolean {
  if (config.token !== '' || config.tokenFile !== '') return false
  if (socket !== null) {
    if (socket.loopback) return false
    logger.error(
      { listen: socket.address },
      'layoutd: refusing to serve beyond loopback without CARLOS_AGENT_TOKEN or CARLOS_AGENT_TOKEN_FILE',
    )
    process.stderr.write(
      `layoutd: the socket systemd passed listens on ${socket.address}, beyond loopback; ` +
        `set CARLOS_AGENT_TOKEN or CARLOS_AGENT_TOKEN_FILE to serve there\n`,
    )
    return true
  }
  if (LOOPBACK.test(config.listen.host)) return false
  logger.error(
    { listen: config.listen.host },
    'layoutd: refusing to listen beyond loopback without CARLOS_AGENT_TOKEN or CARLOS_AGENT_TOKEN_FILE',
  )
  process.stderr.write(
    `layoutd: CARLOS_AGENT_LISTEN=${config.listen.host}:${config.listen.port} is beyond loopback; ` +
      `set CARLOS_AGENT_TOKEN or CARLOS_AGENT_TOKEN_FILE to listen there\n`,
  )
  return true
}

/** A refused token file releases the lock. */
function tokenUnderLock(config: Config, lock: Pick<AgentLock, 'release'>): AgentToken {
  try {
    return agentToken(config)
  } catch (err) {
    lock.release()
    throw err
  }
}

/** Never the token itself. */
function sayToken(logger: AppLogger, token: AgentToken): void {
  logger.info(
    { tokenSource: token.source, made: token.made },
    token.made
      ? `layoutd: made the bearer token in ${token.source}; every change (POST, PUT, DELETE) needs it`
      : `layoutd: every change (POST, PUT, DELETE) needs the bearer token of ${token.source}`,
  )
}

function sayHowItStarts(
  logger: AppLogger,
  socket: InheritedSocket | null,
  { unknownVariables = [] }: ServeOptions,
  config: Config,
  converge: Parameters<typeof warnOfSlowerConverge>[1],
): void {
  if (socket !== null)
    logger.info({ socket: socket.address, name: socket.name }, 'layoutd: serving on the socket systemd passed')
  for (const name of unknownVariables)
    logger.warn({ variable: name }, `layoutd: ${name} is set but is no layoutd variable; it is ignored`)
  for (const warning of configWarnings(config)) logger.warn({ build: config.build }, `layoutd: ${warning}`)
  warnOfSlowerConverge(logger, converge)
  sayLoopScheduling(logger)
}

interface Openers {
  Registry: typeof Registry
  openAgentDeployStore: typeof openAgentDeployStore
}

/** Under the lock; a store that cannot open reads unreadable (design §5.3). */
async function openAdapters(config: Config, logger: AppLogger, lock: Pick<AgentLock, 'release'>, open: Openers) {
  try {
    // Commits are made durable off the loop (design §3.6).
    const registry = open.Registry.open(config.dataDir, { durableAt: 'sync' })
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

/** One agent per box label (design §7.5); etcd away is no refusal. */
async function claimLabel(
  config: Config,
  logger: AppLogger,
  store: DeployStore,
  lock: Pick<AgentLock, 'identity'>,
): Promise<void> {
  if (store.claimLabel === undefined) return
  const { pid, dataDir, startedAt } = lock.identity
  const holder = { box: config.box, dataRoot: dataDir, pid, host: hostname(), since: startedAt }
  try {
    await store.claimLabel(holder, AbortSignal.timeout(30_000))
  } catch (err) {
    if (err instanceof AppError && err.code === 'label_taken') throw err
    logger.warn({ err }, `layoutd: the box label could not be taken yet: ${errorMessage(err)}`)
  }
}

/** An address in use names who holds it, when /proc says. */
async function listen(app: App, config: Config, socket: InheritedSocket | null): Promise<void> {
  if (socket !== null) {
    // The host keeps Fastify from binding a second address (design §4.6).
    const options: FastifyListenOptions & { fd: number } = { fd: socket.fd, host: '127.0.0.1' }
    // listen({ fd }) ignores options.backlog, and the kernel keeps what it sets.
    const server = app.server
    const backlog = listenBacklog()
    const listenOnFd = server.listen.bind(server) as (opts: object, backlog: number) => typeof server
    server.listen = ((opts: object) => listenOnFd(opts, backlog)) as typeof server.listen
    try {
      await app.listen(options)
    } finally {
      Reflect.deleteProperty(server, 'listen')
    }
    return
  }
  try {
    await app.listen({ host: config.listen.host, port: config.listen.port })
  } catch (err) {
    await app.close()
    if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err
    const { describePortHolder } = await import('./infra/port-holder.js')
    const host = config.listen.host.includes(':') ? `[${config.listen.host}]` : config.listen.host
    throw errors.addressInUse(`${host}:${config.listen.port}`, await describePortHolder(config.listen.port))
  }
}

/** GET /openapi.json's document, made on its first request: a start loads no swagger for a route seldom asked. */
function openApiOnFirstAsk(metrics: Metrics): () => Promise<unknown> {
  return () => import('./openapi.js').then(({ openApiDocument }) => openApiDocument(metrics))
}

/** A coded error without a stack, a bug with it. */
function startFailed(err: unknown, logger: AppLogger): void {
  const line = `layoutd: start-up failed: ${errorMessage(err)}`
  if (err instanceof AppError) logger.fatal({ code: err.code }, line)
  else logger.fatal({ err }, line)
  process.exitCode = 1
}

export interface ServeOptions {
  /** Unknown CARLOS_* variables, named at start. */
  unknownVariables?: readonly string[]
}

export async function serve(config: Config, opts: ServeOptions = {}): Promise<number> {
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
    { cWalkMissing },
  ] = await Promise.all([
    import('close-with-grace'),
    import('./infra/edge.js'),
    import('./agent/compose.js'),
    import('./app.js'),
    import('./infra/deploy-store.js'),
    import('./infra/registry.js'),
    import('./infra/agent-lock.js'),
    import('./logger.js'),
    import('./metrics/metrics.js'),
    import('./infra/failpoint.js'),
    import('./infra/package-version.js'),
    import('./infra/fsutil.js'),
    import('./infra/pass/c-walk.js'),
  ])
  const logger = createLogger(config.logLevel)
  // First: systemd's socket, checked, and LISTEN_* unset.
  const socket = inheritedSocket()
  sayHowItStarts(logger, socket, opts, config, { pool: threadPoolSize(), wanted: SYNC_CONCURRENCY, cWalkMissing })
  if (refusesToListen(config, logger, socket)) return 1
  // Tests only (design §3.4): a bad name stops the start here.
  armSkippedFsyncs(config.failpoint)
  // One agent per data root (design §4.4).
  const lock = AgentLock.acquire(config.dataDir)
  const token = tokenUnderLock(config, lock)
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
  // The identity lets a CLI refuse another root's agent.
  const appDeps = { api: agent, metrics, logger, token: token.token, identity: lock.identity, store }
  const app = await buildApp({ ...appDeps, document: openApiOnFirstAsk(metrics) })
  app.addHook('onClose', async () => {
    await agent.stop()
    await store.close()
    registry.close()
    lock.release()
  })
  drainOnClose(app)
  sayToken(logger, token)
  // Listen first: /livez and a 503 /ready answer while recovery runs.
  await listen(app, config, socket)
  lock.listening(socket?.address ?? listenAddress(app.server.address(), config.listen.host))
  const grace = closeWithGrace({ delay: SHUTDOWN_GRACE_MS }, async ({ signal, err }) => {
    if (err !== undefined) logger.error({ err }, 'layoutd: shutting down after an error')
    else logger.info({ signal }, 'layoutd: shutting down; the leg finishes its current host')
    await app.close()
  })
  // After listening: a hung etcd must not keep /livez from answering (design §4.4).
  const label = claimLabel(config, logger, store, lock)
  // The start awaits it; until then a refusal is no unhandled rejection.
  label.catch(() => undefined)
  agent.start({ readyAfter: label }).then(
    // Compile what the activator asks next, before it asks.
    () => (agent.phase === 'ready' ? app.warmHotRoutes() : undefined),
    (err: unknown) => {
      // Exit 1, not close-with-grace's 0, so systemd marks the start failed.
      grace.uninstall()
      startFailed(err, logger)
      void app.close()
    },
  )
  return 0
}

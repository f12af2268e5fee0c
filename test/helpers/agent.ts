// The one builder of a real agent on a temp box: the real registry, the
// directory deploy store, the real pass and the HTTP app around it, composed
// as `layoutd serve` composes them. Everything it builds is stopped when
// the test ends, before the temp dir is removed.
import fs from 'node:fs/promises'
import path from 'node:path'
import type { Agent } from '../../src/agent/agent.js'
import { composeAgent } from '../../src/agent/compose.js'
import { buildApp, type App } from '../../src/app.js'
import { loadConfig, type Config } from '../../src/config.js'
import { flatPaths, nestedPaths } from '../../src/domain/paths.js'
import type { Clock, DeployStore, Logger } from '../../src/domain/ports.js'
import { FenceTable } from '../../src/domain/fence.js'
import type { IntentRecord } from '../../src/domain/schemas.js'
import { DirDeployStore } from '../../src/infra/deploy-dir.js'
import type { SelfCheckFs } from '../../src/infra/isolation.js'
import { Registry } from '../../src/infra/registry.js'
import { createLogger } from '../../src/logger.js'
import { Metrics } from '../../src/metrics/metrics.js'
import { authorise, TEST_TOKEN, type Inject } from './authorised.js'
import { tmpDir, type Scope } from './tmp.js'

export interface AgentBox {
  /** The temp dir the box lives in: data/, deploy/ and the probe file. */
  dir: string
  config: Config
  registry: Registry
  store: DeployStore
  agent: Agent
  /** The app; its inject sends the bearer token unless a request names its own Authorization header. */
  app: App
  /** An inject that sends no token: a mutation through it is refused. */
  anonymous: Inject
  metrics: Metrics
  /** The isolation probe's verdict file. */
  probe: string
  /** The agent's fence table, to fence a host by hand as a move does. */
  fence: FenceTable
  /** Closes the app, stops the agent and closes the registry, once; the test's end does it too. */
  close: () => Promise<void>
}

export interface AgentBoxOptions {
  /** More environment, over the box's own (a 50 ms poll, no nested mount required, a ready probe). */
  env?: Record<string, string>
  /** Builds the box in this dir (another box's, to restart it); a fresh temp dir by default. */
  dir?: string
  /** What the probe file says; `ready: true` by default. */
  probe?: string
  stopTimeoutMs?: number
  /** Wraps the deploy store the agent is given (a store that counts or holds its reads). */
  wrapStore?: (store: DeployStore) => DeployStore
  /** Starts the agent before returning (its leg's first run may be under way then); false by default. */
  start?: boolean
  /** The agent's logger (one that counts its lines); silent by default. */
  logger?: Logger
  /** The agent's clock (a fake one, to fire the retry timer on command); the system's by default. */
  clock?: Clock
  /** How long a read of the intent may take (a store that never answers); 30 s by default. */
  intentTimeoutMs?: number
  /** The isolation self-check's filesystem calls (one that holds the first check); node's own by default. */
  selfCheckFs?: SelfCheckFs
}

const closers = new WeakMap<Scope, Array<() => Promise<void>>>()

/** Runs close when the test ends: every box's, last built first, all before the temp dir's removal. */
function closeAtEnd(t: Scope, close: () => Promise<void>): void {
  closers.get(t)?.push(close)
}

export async function agentBox(t: Scope, opts: AgentBoxOptions = {}): Promise<AgentBox> {
  if (!closers.has(t)) {
    // Registered before the temp dir's removal, so it runs first (after hooks run in order).
    const list: Array<() => Promise<void>> = []
    closers.set(t, list)
    t.after(async () => {
      for (const close of list.reverse()) await close()
    })
  }
  const dir = opts.dir ?? (await tmpDir(t, 'layoutd-agent-'))
  const probe = path.join(dir, 'probe.out')
  await fs.writeFile(probe, opts.probe ?? 'ready: true\n')
  const config = loadConfig({
    CARLOS_BOX: 'kass-1',
    CARLOS_DATA_DIR: path.join(dir, 'data'),
    CARLOS_DEPLOYMENT_DIR: path.join(dir, 'deploy'),
    CARLOS_NESTED_MOUNTS: 'none',
    CARLOS_PROBE_FILE: probe,
    CARLOS_LAYOUT_POLL: '50ms',
    CARLOS_LOG_LEVEL: 'silent',
    ...opts.env,
  })
  const registry = Registry.open(config.dataDir)
  const dirStore = new DirDeployStore(config.deploymentDir)
  const store = opts.wrapStore ? opts.wrapStore(dirStore) : dirStore
  const metrics = new Metrics()
  const logger = createLogger('silent')
  const fence = new FenceTable()
  const agent = composeAgent({
    fence,
    config,
    logger: opts.logger ?? logger,
    clock: opts.clock,
    metrics,
    registry,
    store,
    stopTimeoutMs: opts.stopTimeoutMs,
    intentTimeoutMs: opts.intentTimeoutMs,
    selfCheckFs: opts.selfCheckFs,
  })
  const app = await buildApp({ api: agent, metrics, logger, token: TEST_TOKEN })
  const anonymous = authorise(app)
  let closed: Promise<void> | undefined
  // In order: the agent writes under dir until it has stopped.
  const close = (): Promise<void> =>
    (closed ??= (async () => {
      await app.close()
      await agent.stop()
      registry.close()
    })())
  closeAtEnd(t, close)
  const box: AgentBox = { dir, config, registry, store, agent, app, anonymous, metrics, probe, fence, close }
  if (opts.start === true) await agent.start()
  return box
}

/**
 * The store with its reads replaced by list (which may call the store's own:
 * to count them, fail one, or never answer); the rest is the store's.
 */
export function withReads(store: DeployStore, list: DeployStore['list']): DeployStore {
  return {
    list,
    record: (intent, signal) => store.record(intent, signal),
    describe: () => store.describe(),
    close: () => store.close(),
  }
}

/** A flat tenant: its row, and its directory holding `host.txt` (the host's name). */
export async function addFlat(b: Pick<AgentBox, 'config' | 'registry'>, host: string): Promise<void> {
  const p = flatPaths(b.config, host)
  await fs.mkdir(p.dir, { recursive: true })
  await fs.writeFile(path.join(p.dir, 'host.txt'), host)
  b.registry.add({ host, kind: 'instance', hibernate: true, ...p })
}

/** A nested tenant: its row, its run/ directory, and its directory holding `host.txt`. */
export async function addNested(b: Pick<AgentBox, 'config' | 'registry'>, host: string): Promise<void> {
  const p = nestedPaths(b.config, host)
  await fs.mkdir(p.dir, { recursive: true })
  await fs.mkdir(path.dirname(p.socket), { recursive: true })
  await fs.writeFile(path.join(p.dir, 'host.txt'), host)
  b.registry.add({ host, kind: 'instance', hibernate: true, ...p })
}

/** Records an intent in the box's deploy store, with a fresh id unless one is given. */
export async function recordIntent(
  b: AgentBox,
  mode: 'flat' | 'nested',
  extra: Partial<IntentRecord> = {},
): Promise<void> {
  const id = `${new Date().toISOString().replace(/[-:]/g, '')}-${Math.random().toString(16).slice(2, 8)}`
  const record: IntentRecord = { id, mode, force: false, recordedAt: new Date().toISOString(), by: 'test', ...extra }
  await b.store.record(record, AbortSignal.timeout(5000))
}

// Composes an agent from the adapters its caller opened: the wake claims,
// fence table, isolation gate, <data>/layout and the pass factory.
// `layoutd serve` and the tests both build through it, so both run the same thing.
import type { Config } from '../config.js'
import { FenceTable } from '../domain/fence.js'
import type { RecoveryAction } from '../domain/pass-plan.js'
import type { Clock, DeployStore, Logger } from '../domain/ports.js'
import { systemClock } from '../domain/ports.js'
import { KeptIntentStore } from '../infra/applied-intent.js'
import { failpointFrom } from '../infra/failpoint.js'
import { groupId, SOCKETS_GROUP } from '../infra/groups.js'
import { Isolation, type SelfCheckFs } from '../infra/isolation.js'
import { layoutDirectory } from '../infra/layout-dir.js'
import { Pass } from '../infra/pass/pass.js'
import { AGENT_BUSY_TIMEOUT_MS, type Registry } from '../infra/registry.js'
import { WakeClaims } from '../infra/wake-claims.js'
import type { Metrics, RecoveryAction as RecoveryLabel } from '../metrics/metrics.js'
import { Agent } from './agent.js'
import type { PassFactory } from './parts.js'
import { RolloutMetrics } from '../metrics/rollout-metrics.js'
import { RolloutAwareStore } from './rollout-store.js'

export interface AgentAdapters {
  config: Config
  logger: Logger
  metrics: Metrics
  /** Opened and closed by the caller; the agent's claims commit on its claims connection. */
  registry: Registry
  store: DeployStore
  clock?: Clock
  reload?: () => Promise<void>
  /** A move's wait for an awake host's release after asking it to stop. */
  stopTimeoutMs?: number
  intentTimeoutMs?: number
  /** For a test to fence a host by hand. */
  fence?: FenceTable
  /** For a test to fail or hold a self-check call. */
  selfCheckFs?: SelfCheckFs
}

/** The recovered_journals_total label of each recovery action (design §4). */
const RECOVERY_LABEL: Record<RecoveryAction['kind'], RecoveryLabel> = {
  'redo-move': 'redone',
  rollback: 'rolled_back',
  'redo-row': 'committed',
  'redo-finish': 'finished',
  keep: 'kept_fenced',
}

export function composeAgent(adapters: AgentAdapters): Agent {
  const { config, logger, metrics, registry, reload, stopTimeoutMs } = adapters
  const clock = adapters.clock ?? systemClock
  // A database that is not whole stops the start before a row is trusted (design §2.2).
  registry.logFaultsTo(logger)
  // Its writes run on the thread that answers the activator: none waits out a foreign lock.
  registry.waitOnLocksAtMost(AGENT_BUSY_TIMEOUT_MS)
  registry.verify()
  // Every read held to the intent this box last applied (design §7.7).
  const kept = new KeptIntentStore(adapters.store, {
    dirs: config,
    box: config.box,
    keep: true,
    logger,
    now: () => new Date(clock.now()),
  })
  // A store that keeps staged rollouts is read with them (design §7.6).
  const rolloutMetrics = kept.rollouts === undefined ? undefined : new RolloutMetrics(metrics.registry)
  const store = RolloutAwareStore.around(kept, {
    box: config.box,
    clock,
    logger,
    onState: (r) => rolloutMetrics?.set(r),
    onProgress: (id, report) => rolloutMetrics?.progress(id, report),
    kickLeg: () => agent.runAgain(),
  })
  const claims = new WakeClaims({
    store: registry.claimStore(),
    activatorUrl: config.activatorUrl,
    logger,
    now: () => new Date(clock.now()),
  })
  const fence = adapters.fence ?? new FenceTable()
  // No activator, no gate: nothing could wake nested. The callback runs after start, when `agent` is set.
  const gate =
    config.activator === 'none'
      ? null
      : new Isolation({ ...config, selfCheckFs: adapters.selfCheckFs }, logger, () => agent.gateChanged())
  // Looked up once, when the pass first needs it: getent is a process, and the start waits on none (design §4.4).
  let socketsGid: Promise<number> | undefined
  const makePass: PassFactory = (onResult, onWait) => {
    if (gate === null) return Promise.reject(new Error('a pass needs an armed activator and its gate'))
    const pass = new Pass({
      dirs: config,
      registry,
      fence,
      claims,
      gate,
      logger,
      clock,
      graceMs: config.graceMs,
      socketsGid: () => (socketsGid ??= groupId(SOCKETS_GROUP, { logger })),
      failpoint: failpointFrom(config.failpoint),
      onMove: (to, outcome, seconds) => metrics.observeMove(to, outcome, seconds),
      onRecover: (action) => metrics.recoveredJournal(RECOVERY_LABEL[action]),
      onResult,
      onWait,
      reload,
      stopTimeoutMs,
    })
    return Promise.resolve(pass)
  }
  // Read at each scrape: the gauge never lags the gate.
  if (gate !== null) metrics.ops.watchGate(() => gate.report())
  const agent = new Agent({
    config,
    logger,
    metrics,
    clock,
    registry,
    store,
    claims,
    fence,
    gate,
    layoutDir: layoutDirectory(config.dataDir),
    makePass,
    intentTimeoutMs: adapters.intentTimeoutMs,
  })
  return agent
}

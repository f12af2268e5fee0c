// Composes an agent from the adapters its caller opened (the registry, the
// deploy store, the metrics, the logger): the wake claims on the registry's
// claims connection, the fence table, the isolation gate, <data>/layout,
// and the factory of the pass. `layoutd serve` and the tests build an agent
// through this one function, so both run the same thing.
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
  /** The deploy store, opened once and kept for the poller, the leg and the mint. */
  store: DeployStore
  clock?: Clock
  /** Asks the edge to reload its routes; optional (CARLOS_EDGE_RELOAD_URL). */
  reload?: () => Promise<void>
  /** How long a move waits for an awake host's release after asking for its stop; 60 s unless a test shortens it. */
  stopTimeoutMs?: number
  /** How long a read of the intent may take; 30 s (design §5.1) unless a test shortens it. */
  intentTimeoutMs?: number
  /** The fence table; a fresh one unless a test hands its own (to fence a host by hand). */
  fence?: FenceTable
  /** The isolation self-check's filesystem calls; node's own unless a test fails or holds one. */
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
  // The registry's faults are said on the agent's log; a database that is
  // not whole stops the start before a row of it is trusted (design §2.2).
  registry.logFaultsTo(logger)
  // This connection's writes run on the thread that answers the activator: none waits out a foreign lock.
  registry.waitOnLocksAtMost(AGENT_BUSY_TIMEOUT_MS)
  registry.verify()
  // Every read held to the intent this box last applied, kept in its data root (design §7.7).
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
    kickLeg: () => agent.runAgain(),
  })
  const claims = new WakeClaims({
    store: registry.claimStore(),
    activatorUrl: config.activatorUrl,
    logger,
    now: () => new Date(clock.now()),
  })
  const fence = adapters.fence ?? new FenceTable()
  // The gate exists only where an activator is armed: with none, nothing
  // could wake nested and the default does not apply. Its answer changes
  // only once the agent has started it, by which time `agent` is set.
  const gate =
    config.activator === 'none'
      ? null
      : new Isolation({ ...config, selfCheckFs: adapters.selfCheckFs }, logger, () => agent.gateChanged())
  // The pass is built once start-up has swept the claims and read the
  // start-up intent, as it always was; what it reports as it goes is the
  // agent's to hear, so the agent hands in that callback when it builds it.
  const makePass: PassFactory = async (onResult, onWait) => {
    if (gate === null) throw new Error('a pass needs an armed activator and its gate')
    return new Pass({
      dirs: config,
      registry,
      fence,
      claims,
      gate,
      logger,
      clock,
      graceMs: config.graceMs,
      socketsGid: await groupId(SOCKETS_GROUP, { logger }),
      failpoint: failpointFrom(config.failpoint),
      onMove: (to, outcome, seconds) => metrics.observeMove(to, outcome, seconds),
      onRecover: (action) => metrics.recoveredJournal(RECOVERY_LABEL[action]),
      onResult,
      onWait,
      reload,
      stopTimeoutMs,
    })
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

// What an agent is made of: the adapters, shared state and pass factory
// that composeAgent hands in.
import type { Config } from '../config.js'
import type { FenceTable } from '../domain/fence.js'
import type { Result } from '../domain/modes.js'
import type { Clock, DeployStore, LayoutDirectory, LayoutPass, Logger } from '../domain/ports.js'
import type { Isolation } from '../infra/isolation.js'
import type { Registry } from '../infra/registry.js'
import type { WakeClaims } from '../infra/wake-claims.js'
import type { Metrics } from '../metrics/metrics.js'

/** onResult hears each result, onWait what the run waits on (null: nothing). */
export type PassFactory = (
  onResult: (result: Result) => void,
  onWait?: (what: string | null) => void,
) => Promise<LayoutPass>

export interface AgentParts {
  config: Config
  logger: Logger
  metrics: Metrics
  clock: Clock
  registry: Pick<
    Registry,
    | 'get'
    | 'snapshot'
    | 'addedAfter'
    | 'ping'
    | 'file'
    | 'health'
    | 'coded'
    | 'fault'
    | 'releaseCheckpointThread'
    | 'releaseCaches'
  >
  store: DeployStore
  claims: WakeClaims
  fence: FenceTable
  /** null where no activator is armed (CARLOS_ACTIVATOR=none). */
  gate: Isolation | null
  layoutDir: LayoutDirectory
  makePass: PassFactory
  intentTimeoutMs?: number
}

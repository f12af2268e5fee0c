// What an agent is made of: the adapters and the shared state composeAgent
// builds and hands in, and the factory of the pass. The agent builds none of
// them itself.
import type { Config } from '../config.js'
import type { FenceTable } from '../domain/fence.js'
import type { Result } from '../domain/modes.js'
import type { Clock, DeployStore, LayoutDirectory, LayoutPass, Logger } from '../domain/ports.js'
import type { Isolation } from '../infra/isolation.js'
import type { Registry } from '../infra/registry.js'
import type { WakeClaims } from '../infra/wake-claims.js'
import type { Metrics } from '../metrics/metrics.js'

/**
 * Builds the pass once start-up has swept the claims and read its intent;
 * onResult hears each result as it is decided, onWait what the run under
 * way waits on (null when it waits no more).
 */
export type PassFactory = (
  onResult: (result: Result) => void,
  onWait?: (what: string | null) => void,
) => Promise<LayoutPass>

/** The adapters and shared state the agent works with, built by composeAgent. */
export interface AgentParts {
  config: Config
  logger: Logger
  metrics: Metrics
  clock: Clock
  registry: Pick<Registry, 'get' | 'snapshot' | 'addedAfter' | 'ping' | 'file' | 'health' | 'coded' | 'fault'>
  store: DeployStore
  claims: WakeClaims
  fence: FenceTable
  /** null where no activator is armed (CARLOS_ACTIVATOR=none). */
  gate: Isolation | null
  layoutDir: LayoutDirectory
  makePass: PassFactory
  /** How long a read of the intent may take; the domain's 30 s when unset. */
  intentTimeoutMs?: number
}

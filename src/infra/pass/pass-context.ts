// What every part of the pass is given (its dependencies, PassDeps), and
// the plumbing they share: a result told to the metrics and the progress
// callback, a failpoint reached, the edge asked to reload, time kept.
import { performance } from 'node:perf_hooks'
import type { Claims, FenceTable } from '../../domain/fence.js'
import type { Mode, Outcome, Result } from '../../domain/modes.js'
import { adaptiveBatchSize, type RecoveryAction } from '../../domain/pass-plan.js'
import type { Dirs } from '../../domain/paths.js'
import type { Clock, IsolationGate, Logger, RouteStore } from '../../domain/ports.js'
import { NO_REASON, type Why } from '../../domain/reason-codes.js'
import { errorMessage } from '../../errors.js'
import { passIo, type PassIo } from './pass-io.js'
import { Slicer } from './sliced-fs.js'

/** How long a stop may take before the move gives up on the host (design §3 step 3). */
export const STOP_TIMEOUT_MS = 60_000

/** Sleeping hosts per group commit when none is configured: adaptive, 128 to 512 (design §3.3). */
export const BATCH_SIZE = adaptiveBatchSize

export interface PassDeps {
  dirs: Dirs
  registry: RouteStore
  fence: FenceTable
  claims: Claims
  gate: IsolationGate
  logger: Logger
  clock: Clock
  /** CARLOS_LAYOUT_AWAKE_GRACE. */
  graceMs: number
  /** The carlos-sockets group's id for nested run/ directories; -1 leaves the group alone. */
  socketsGid: number
  /**
   * Called at each step of a move (FAILPOINT_STEPS, once per batch; and `after-rename:<host>` after each
   * rename); the crash suite kills the process there.
   */
  failpoint?: (step: string) => void
  /**
   * Called for every result that names a mode, except `unchanged`.
   * seconds is how long the host was fenced for the move (0 when nothing was fenced).
   */
  onMove?: (to: Mode, outcome: Outcome, seconds: number) => void
  /** Called with every result as it is decided, so a run's progress can be shown while it goes on. */
  onResult?: (r: Result) => void
  /**
   * Called with what the run waits on (`the activator to stop HOST (awake, force)`), and with null once it
   * waits no more.
   */
  onWait?: (what: string | null) => void
  /** Called once per journal recovery acts on, and once per change of a kept journal's reason. */
  onRecover?: (action: RecoveryAction['kind']) => void
  /** Asks the edge to reload its routes after rows were rewritten or released. */
  reload?: () => Promise<void>
  stopTimeoutMs?: number
  /** A fixed number of hosts per group commit (tests); unset, adaptive. */
  batchSize?: number
  /**
   * Wraps the pass's I/O port (pass-io.ts) in a test's hold: every call still reaches the port the agent
   * runs; a test only chooses when it is made or answered.
   */
  aroundIo?: (io: PassIo) => PassIo
}

export class PassContext {
  readonly deps: PassDeps
  readonly stopTimeoutMs: number
  /** Hosts per group commit: a number configured (tests), or a function of how many wait. */
  readonly batchSize: number | ((waiting: number) => number)
  /** Every part of the pass gives the event loop back through this one (sliced-fs.ts). */
  readonly slicer = new Slicer()
  /** The pass's I/O (walk, look, prepare, rename, fsync): the one port, as the agent runs it. */
  readonly io: PassIo
  /** Told after each commit of rows (step 8): the pass follows its path claims to them then (design §3.6). */
  afterCommit: () => void = () => undefined

  constructor(deps: PassDeps) {
    this.deps = deps
    const io = passIo(this.slicer, deps.failpoint)
    this.io = deps.aroundIo?.(io) ?? io
    this.stopTimeoutMs = deps.stopTimeoutMs ?? STOP_TIMEOUT_MS
    this.batchSize = deps.batchSize === undefined ? BATCH_SIZE : Math.max(1, deps.batchSize)
  }

  /** A result, told to the move metric (onMove) and to the run's progress (onResult) as it is made. */
  resultWithMetrics(host: string, outcome: Outcome, because: Why | undefined, to?: Mode, seconds = 0): Result {
    if (to !== undefined && outcome !== 'unchanged') this.deps.onMove?.(to, outcome, seconds)
    const { code, reason } = because ?? NO_REASON
    const result: Result = to === undefined ? { host, outcome, code, reason } : { host, outcome, code, reason, to }
    this.deps.onResult?.(result)
    return result
  }

  /** Seconds since a performance.now() reading. */
  secondsSince(start: number): number {
    return (performance.now() - start) / 1000
  }

  /** The clock's now, as RFC 3339 (journals' startedAt, holds' heldAt). */
  nowIso(): string {
    return new Date(this.deps.clock.now()).toISOString()
  }

  failpoint(step: string): void {
    this.deps.failpoint?.(step)
  }

  /** Asks the edge to reload; a failure is logged, since the edge's own poll picks the rows up. */
  async reloadEdge(): Promise<void> {
    if (this.deps.reload === undefined) return
    try {
      await this.deps.reload()
    } catch (err) {
      this.deps.logger.warn(
        { err },
        `layout: edge reload failed: ${errorMessage(err)}; the edge's own poll picks the rows up`,
      )
    }
  }
}

// What every part of the pass is given (PassDeps), and the plumbing they
// share: results told to metrics and progress, failpoints, edge reloads, time.
import { performance } from 'node:perf_hooks'
import type { Claims, FenceTable } from '../../domain/fence.js'
import type { Mode, Outcome, Result } from '../../domain/modes.js'
import { adaptiveBatchSize, type RecoveryAction } from '../../domain/pass-plan.js'
import type { Dirs } from '../../domain/paths.js'
import type { Clock, IsolationGate, Logger, RouteStore } from '../../domain/ports.js'
import { NO_REASON, type Why } from '../../domain/reason-codes.js'
import { errorMessage } from '../../errors.js'
import { passIo, type PassIo } from './pass-io.js'
import { Slicer } from '../../domain/loop-turns.js'

/** A stop's bound before the move gives up on the host (design §3 step 3). */
export const STOP_TIMEOUT_MS = 60_000

/** Adaptive, 128 to 512 sleeping hosts per group commit (design §3.3). */
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
  /**
   * The sockets group for nested run/ directories; -1 leaves the group alone. Asked when a move or the
   * edge's modes first need it: the lookup spawns getent, which a start does not wait on (design §4.4).
   */
  socketsGid: () => Promise<number>
  /** Each step of a move (FAILPOINT_STEPS, after-rename:<host>), where the crash suite kills. */
  failpoint?: (step: string) => void
  /** Each result naming a mode but unchanged, with the seconds fenced. */
  onMove?: (to: Mode, outcome: Outcome, seconds: number) => void
  onResult?: (r: Result) => void
  /** What the run waits on, then null once it waits no more. */
  onWait?: (what: string | null) => void
  /** Once per recovery action, and per change of a kept journal's reason. */
  onRecover?: (action: RecoveryAction['kind']) => void
  reload?: () => Promise<void>
  stopTimeoutMs?: number
  batchSize?: number
  /** Wraps the I/O port for a test's hold; the agent's port still makes every call. */
  aroundIo?: (io: PassIo) => PassIo
}

export class PassContext {
  readonly deps: PassDeps
  readonly stopTimeoutMs: number
  readonly batchSize: number | ((waiting: number) => number)
  /** The one slicer every part yields through. */
  readonly slicer = new Slicer()
  readonly io: PassIo
  /** Told after each commit of rows (step 8), for the claims' catch-up (design §3.6). */
  afterCommit: () => void = () => undefined

  constructor(deps: PassDeps) {
    this.deps = deps
    const io = passIo(this.slicer, deps.failpoint)
    this.io = deps.aroundIo?.(io) ?? io
    this.stopTimeoutMs = deps.stopTimeoutMs ?? STOP_TIMEOUT_MS
    this.batchSize = deps.batchSize === undefined ? BATCH_SIZE : Math.max(1, deps.batchSize)
  }

  resultWithMetrics(host: string, outcome: Outcome, because: Why | undefined, to?: Mode, seconds = 0): Result {
    if (to !== undefined && outcome !== 'unchanged') this.deps.onMove?.(to, outcome, seconds)
    const { code, reason } = because ?? NO_REASON
    const result: Result = to === undefined ? { host, outcome, code, reason } : { host, outcome, code, reason, to }
    this.deps.onResult?.(result)
    return result
  }

  secondsSince(start: number): number {
    return (performance.now() - start) / 1000
  }

  nowIso(): string {
    return new Date(this.deps.clock.now()).toISOString()
  }

  failpoint(step: string): void {
    this.deps.failpoint?.(step)
  }

  /** A failure is only logged: the edge's own poll picks the rows up. */
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

// A box of a fleet in-process, for the rollout tests and bench:fleet: the
// agent's real etcd store client (its watch, its lease and summary), the
// rollout follower and the store it reads through (RolloutAwareStore), and
// the real intent poller; only the pass is a stand-in that takes passMs to
// move the box's rows and then publishes its summary as the agent would.
// Each move is told to onMove, so a test can check that no box moved twice
// and that no wave's box moved before the wave before it was over. The
// faults of a real fleet: rows whose tenant is awake (deferred, as in their
// grace, until the tenant sleeps, which runs the leg again as a released
// claim does), rows held (until an operator clears the hold and converges
// the box), and a kill (nothing more written, the lease left to expire; a
// box started again with the same label is where the kill left it).
import type { BoxSummary } from '../../src/domain/box-summary.js'
import { loadLayoutIntent } from '../../src/domain/intent.js'
import { systemClock, type DeployStore, type Logger } from '../../src/domain/ports.js'
import { IntentPoller } from '../../src/agent/intent-poller.js'
import { RolloutAwareStore } from '../../src/agent/rollout-store.js'
import type { Metrics } from '../../src/metrics/metrics.js'
import type { RolloutRecord } from '../../src/domain/rollout.js'
import { EtcdDeployStore, type EtcdStoreOptions } from '../../src/infra/deploy-etcd/store.js'
import { errorMessage } from '../../src/errors.js'
import { setTimeout as sleep } from 'node:timers/promises'

type SimMode = 'flat' | 'nested'

/** Where a box is: its mode and intent, its tenants awake and rows held, what its last run left behind. */
export interface SimBoxState {
  mode: SimMode
  intent: string | null
  awake: number
  holds: number
  behind: { deferred: number; held: number }
}

export interface SimMove {
  box: string
  intent: string
  mode: string
  startedAt: number
  endedAt: number
}

export interface SimBoxOptions {
  endpoints: readonly string[]
  prefix: string
  box: string
  rows: number
  /** How long the stand-in pass takes to move the box's rows. */
  passMs: number
  /** Rows the stand-in pass leaves fenced when it moves toward nested (a failed wave). */
  failRows?: number
  /** Rows whose tenant is awake: each move defers them (awake_grace) until sleep(). */
  awakeRows?: number
  /** Rows held (a hold code, fenced) that no move takes until clearHolds(). */
  heldRows?: number
  /** Where the box's rows are at start (a box started again after a kill): flat unless said. */
  startMode?: SimMode
  /** The intent the box had read before (a box started again): its summary names it until it reads one. */
  startIntent?: string | null
  /** Rows the box's last run left deferred and held (a box started again). */
  startBehind?: { deferred: number; held: number }
  logger?: Logger
  store?: EtcdStoreOptions
  pollMs?: number
  onMove?: (m: SimMove) => void
  onMoveStart?: () => void
  onMoveEnd?: () => void
  /** Told of the rollout in play after each look of the follower (what the agent's gauges are set from). */
  onRolloutState?: (r: RolloutRecord | undefined) => void
  /** Told when the box's intents' watch saw a key change (the id of the record). */
  onWatchEvent?: (box: string, id: string, at: number) => void
  /** Told when the box's poller read a new intent. */
  onIntentSeen?: (box: string, id: string, at: number) => void
  /** Told when a run ended with every row where the intent wants it (deferred and held ones too). */
  onConverged?: (box: string, intent: string, at: number) => void
}

const quiet: Logger = {
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
}

const noMetrics = { intentRead: () => undefined } as unknown as Metrics

/** A run that could not read the intent: the agent's leg reports it unreadable and moves nothing. */
class IntentUnreadable extends Error {
  constructor(cause: unknown) {
    super(`the intent could not be read: ${errorMessage(cause)}`, { cause })
  }
}

export class SimBox {
  readonly store: EtcdDeployStore
  readonly reads: DeployStore
  readonly #o: SimBoxOptions
  readonly #life = new AbortController()
  #mode: SimMode
  #intent: string | null
  #awake: number
  #holds: number
  /** Rows the last run left behind its mode: deferred (awake) and held. */
  #deferred = 0
  #held = 0
  #running = false
  #pending = false
  #poller: IntentPoller | undefined
  /** Runs that failed in a row: the next retry's backoff. */
  #failures = 0
  /** Reads of the intent by the poller: the first at start, the next once the watch is up (it reads then). */
  intentReads = 0
  /** Runs of the stand-in leg that ended (whatever they did). */
  runs = 0
  /** When the last run ended: the summary's `leg.lastRunAt`, which tells a retry's run from the one before. */
  #lastRunAt: string | null = null
  /** The errors the stand-in pass met (a test expects none). */
  readonly errors: string[] = []
  /** Runs that could not read the intent, and so moved nothing. */
  readonly unreadable: string[] = []

  constructor(o: SimBoxOptions) {
    this.#o = o
    this.#mode = o.startMode ?? 'flat'
    this.#intent = o.startIntent ?? null
    this.#awake = Math.min(o.awakeRows ?? 0, o.rows)
    this.#holds = Math.min(o.heldRows ?? 0, o.rows - this.#awake)
    this.#deferred = o.startBehind?.deferred ?? 0
    this.#held = o.startBehind?.held ?? 0
    const logger = o.logger ?? quiet
    this.store = new EtcdDeployStore(o.endpoints, {
      prefix: o.prefix,
      logger,
      ...o.store,
      onWatchEvents: (events) => {
        const at = Date.now()
        for (const e of events) o.onWatchEvent?.(o.box, e.key.slice(o.prefix.length), at)
      },
    })
    this.reads = RolloutAwareStore.around(this.store, {
      box: o.box,
      clock: systemClock,
      logger,
      onState: o.onRolloutState,
      // As the agent's: an operator's retry runs the box's leg again.
      kickLeg: () => this.#kick(),
    })
  }

  get box(): string {
    return this.#o.box
  }

  /** Where its leg is, for a bench that says why a box has not converged. */
  get progress(): Record<string, unknown> {
    return {
      mode: this.#mode,
      intent: this.#intent,
      running: this.#running,
      pending: this.#pending,
      runs: this.runs,
      failuresInARow: this.#failures,
      errors: this.errors,
      unreadable: this.unreadable,
    }
  }

  /** Where the box is now, for a box started again in its place. */
  get state(): SimBoxState {
    return {
      mode: this.#mode,
      intent: this.#intent,
      awake: this.#awake,
      holds: this.#holds,
      behind: { deferred: this.#deferred, held: this.#held },
    }
  }

  /** Rows whose tenant wakes now: the next move defers them until sleep(). */
  wake(rows: number): void {
    this.#awake = Math.min(rows, this.#o.rows)
  }

  /** Rows held from now: the next move leaves them fenced until clearHolds(). */
  hold(rows: number): void {
    this.#holds = Math.min(rows, this.#o.rows - this.#awake)
  }

  /** The awake tenants sleep: their claim released, the leg runs again (the deferred rows move). */
  sleep(): void {
    this.#awake = 0
    if (this.#deferred > 0) this.#kick()
  }

  /** An operator clears the holds and converges the box (the held rows move). */
  clearHolds(): void {
    this.#holds = 0
    if (this.#held > 0) this.#kick()
  }

  async start(): Promise<void> {
    await this.#publish()
    this.#poller = new IntentPoller({
      store: this.reads,
      box: this.#o.box,
      pollMs: this.#o.pollMs ?? 60_000,
      clock: systemClock,
      logger: this.#o.logger ?? quiet,
      metrics: noMetrics,
      signal: this.#life.signal,
      kickLeg: () => this.#kick(),
      onRead: (intent) => {
        this.intentReads++
        if (intent !== null && intent.id !== this.#intent) this.#o.onIntentSeen?.(this.#o.box, intent.id, Date.now())
      },
    })
    await this.#poller.start()
  }

  #summary(): BoxSummary {
    const fail = this.#failed()
    const behind = this.#deferred + this.#held + fail
    return {
      box: this.#o.box,
      version: 'sim',
      intent: this.#intent,
      mode: this.#mode,
      converged: !this.#running && !this.#pending && this.#intent !== null && behind === 0,
      counts: this.#counts(),
      held: this.#held,
      leg: {
        running: this.#running,
        pending: this.#pending,
        lastRunAt: this.#lastRunAt,
        withheld: {
          deferred: this.#deferred,
          refused: 0,
          failed: 0,
          kept: fail,
          heldBy: this.#held === 0 ? {} : { second_name: this.#held },
        },
      },
      at: new Date().toISOString(),
    }
  }

  /** Rows left fenced for a kept journal when the box is nested (failRows). */
  #failed(): number {
    return this.#mode === 'nested' ? Math.min(this.#o.failRows ?? 0, this.#o.rows - this.#deferred - this.#held) : 0
  }

  /** Rows by word: deferred ones still in the other mode, held and kept ones fenced. */
  #counts(): Record<string, number> {
    const fenced = this.#held + this.#failed()
    const counts: Record<string, number> = { [this.#mode]: this.#o.rows - this.#deferred - fenced }
    if (this.#deferred > 0) counts[this.#mode === 'nested' ? 'flat' : 'nested'] = this.#deferred
    if (fenced > 0) counts.fenced = fenced
    return counts
  }

  async #publish(): Promise<void> {
    await this.reads.publishBox?.(this.#summary(), AbortSignal.timeout(30_000))
  }

  /** Publishes the summary, again a second later while a write fails (the agent's publisher tries at its next read). */
  #publishSoon(): void {
    if (this.#life.signal.aborted) return
    void this.#publish().catch(() => setTimeout(() => this.#publishSoon(), 1_000).unref())
  }

  #kick(): void {
    if (this.#life.signal.aborted) return
    if (this.#running) {
      this.#pending = true
      return
    }
    this.#running = true
    void this.#run()
      .catch((err: unknown) => {
        if (this.#life.signal.aborted) return
        // An intent that cannot be read (etcd electing a leader, say) is a state the agent's leg meets and
        // waits out, moving nothing (design §1 "unreadable"); anything else the stand-in pass met is an error.
        if (err instanceof IntentUnreadable) this.unreadable.push(errorMessage(err.cause))
        else this.errors.push(errorMessage(err))
        // As the agent's leg does after a failed run: another one, backing off (1 s to 30 s, jittered).
        this.#failures++
        const cap = Math.min(30_000, 1_000 * 2 ** Math.min(this.#failures - 1, 5))
        setTimeout(() => this.#kick(), cap / 2 + (Math.random() * cap) / 2).unref()
      })
      .finally(() => {
        this.#running = false
        this.runs++
        this.#lastRunAt = new Date().toISOString()
        if (this.#pending) {
          this.#pending = false
          this.#kick()
        } else this.#publishSoon()
      })
  }

  /** One run of the stand-in leg: read the intent as the leg does, move when the mode differs. */
  async #run(): Promise<void> {
    const read = await loadLayoutIntent(this.reads, this.#o.box, this.#life.signal).catch((err: unknown) => {
      throw new IntentUnreadable(err)
    })
    this.#failures = 0
    if (!read.found) return
    const { id, mode } = read.intent
    if (mode !== 'flat' && mode !== 'nested') return
    const fresh = this.#intent !== id
    this.#intent = id
    if (mode === this.#mode) {
      // The rows a run left behind (deferred, held) move once their cause is gone; the box moved already.
      if (this.#deferred > this.#awake || this.#held > this.#holds) {
        await this.#publish()
        await sleep(this.#o.passMs, undefined, { signal: this.#life.signal })
        this.#leave()
        this.#converged(id)
      } else if (fresh) this.#converged(id)
      return
    }
    const startedAt = Date.now()
    this.#o.onMoveStart?.()
    try {
      await this.#publish()
      await sleep(this.#o.passMs, undefined, { signal: this.#life.signal })
      this.#mode = mode
      this.#leave()
    } finally {
      this.#o.onMoveEnd?.()
    }
    this.#o.onMove?.({ box: this.#o.box, intent: id, mode, startedAt, endedAt: Date.now() })
    this.#converged(id)
  }

  /** What the run leaves behind its mode: the rows whose tenant is awake, and the held ones. */
  #leave(): void {
    this.#deferred = this.#awake
    this.#held = this.#holds
  }

  #converged(id: string): void {
    if (this.#deferred + this.#held === 0) this.#o.onConverged?.(this.#o.box, id, Date.now())
  }

  /** Stops: nothing more is written, and its summary leaves with its lease. */
  async stop(): Promise<void> {
    if (this.#life.signal.aborted) return
    this.#life.abort()
    this.#poller?.stop()
    await this.reads.close()
  }

  /** Dies as a kill -9 leaves an agent: nothing more is written, its summary stays until its lease expires. */
  async kill(): Promise<void> {
    if (this.#life.signal.aborted) return
    this.#life.abort()
    this.#poller?.stop()
    // The follower ends with the store it reads through, and that store, killed, revokes nothing.
    this.store.close = () => this.store.abandon()
    await this.reads.close()
  }
}

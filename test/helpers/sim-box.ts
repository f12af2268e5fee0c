// A box of a fleet in-process, for the rollout tests and bench:fleet: the
// agent's real etcd store client (its watch, its lease and summary), the
// rollout follower and the store it reads through (RolloutAwareStore), and
// the real intent poller; only the pass is a stand-in that takes passMs to
// move the box's rows and then publishes its summary as the agent would.
// Each move is told to onMove, so a test can check that no box moved twice
// and that no wave's box moved before the wave before it was over.
import type { BoxSummary } from '../../src/domain/box-summary.js'
import { loadLayoutIntent } from '../../src/domain/intent.js'
import { systemClock, type DeployStore, type Logger } from '../../src/domain/ports.js'
import { IntentPoller } from '../../src/agent/intent-poller.js'
import { RolloutAwareStore } from '../../src/agent/rollout-store.js'
import type { Metrics } from '../../src/metrics/metrics.js'
import type { RolloutRecord } from '../../src/domain/rollout.js'
import { EtcdDeployStore, type EtcdStoreOptions } from '../../src/infra/deploy-etcd/store.js'
import { errorMessage } from '../../src/errors.js'

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
  #mode: 'flat' | 'nested' = 'flat'
  #intent: string | null = null
  #running = false
  #pending = false
  #poller: IntentPoller | undefined
  /** Runs that failed in a row: the next retry's backoff. */
  #failures = 0
  /** Reads of the intent by the poller: the first at start, the next once the watch is up (it reads then). */
  intentReads = 0
  /** The errors the stand-in pass met (a test expects none). */
  readonly errors: string[] = []
  /** Runs that could not read the intent, and so moved nothing. */
  readonly unreadable: string[] = []

  constructor(o: SimBoxOptions) {
    this.#o = o
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
    })
  }

  get box(): string {
    return this.#o.box
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
    return {
      box: this.#o.box,
      version: 'sim',
      intent: this.#intent,
      mode: this.#mode,
      converged: !this.#running && !this.#pending && this.#intent !== null,
      counts: this.#counts(),
      held: 0,
      leg: { running: this.#running, pending: this.#pending, lastRunAt: null },
      at: new Date().toISOString(),
    }
  }

  #counts(): Record<string, number> {
    const fail = this.#mode === 'nested' ? Math.min(this.#o.failRows ?? 0, this.#o.rows) : 0
    return fail === 0 ? { [this.#mode]: this.#o.rows } : { [this.#mode]: this.#o.rows - fail, fenced: fail }
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
    this.#intent = id
    if (mode === this.#mode) return
    const startedAt = Date.now()
    this.#o.onMoveStart?.()
    try {
      await this.#publish()
      await new Promise((r) => setTimeout(r, this.#o.passMs))
      this.#mode = mode
    } finally {
      this.#o.onMoveEnd?.()
    }
    this.#o.onMove?.({ box: this.#o.box, intent: id, mode, startedAt, endedAt: Date.now() })
  }

  /** Stops: nothing more is written, and its summary leaves with its lease. */
  async stop(): Promise<void> {
    if (this.#life.signal.aborted) return
    this.#life.abort()
    this.#poller?.stop()
    await this.reads.close()
  }
}

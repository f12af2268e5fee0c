// The intent poller: reads this box's intent every CARLOS_LAYOUT_POLL, one
// read at a time, and kicks the leg on a change (design §1). A store's watch
// makes the next read come at once.
import { errorMessage } from '../errors.js'
import { loadLayoutIntent } from '../domain/intent.js'
import { validMode } from '../domain/modes.js'
import type { Clock, DeployStore, Logger } from '../domain/ports.js'
import type { IntentRecord } from '../domain/schemas.js'
import type { Metrics } from '../metrics/metrics.js'
import { PeriodicRead } from './periodic-read.js'

export const POLL_FAILED = 'layout: intent poll failed'

export interface IntentPollerOptions {
  store: DeployStore
  box: string
  pollMs: number
  clock: Clock
  logger: Logger
  metrics: Metrics
  signal: AbortSignal
  kickLeg: () => void
  intentTimeoutMs?: number
  /** null: none, or unreadable. */
  onRead?: (intent: IntentRecord | null) => void
}

export class IntentPoller {
  readonly #opts: IntentPollerOptions
  readonly #reads: PeriodicRead
  /** The intent's id, mode and force, or why none; '' before the first read. */
  #lastSeen = ''

  constructor(opts: IntentPollerOptions) {
    this.#opts = opts
    this.#reads = new PeriodicRead({
      read: () => this.#read(),
      failure: POLL_FAILED,
      everyMs: opts.pollMs,
      clock: opts.clock,
      logger: opts.logger,
    })
  }

  /** The first read precedes the leg's first run: the other order could miss a new intent for good. */
  async start(): Promise<void> {
    this.#reads.readNow()
    await this.#reads.idle()
    this.#opts.kickLeg()
    const { store, signal } = this.#opts
    if (signal.aborted) return
    store.watch?.(() => this.#reads.readNow(), signal)
  }

  stop(): void {
    this.#reads.stop()
  }

  async #read(): Promise<void> {
    const { store, box, signal } = this.#opts
    let seen: string
    let found: IntentRecord | null = null
    try {
      const read = await loadLayoutIntent(store, box, signal, this.#opts.intentTimeoutMs)
      seen = read.found ? `${read.intent.id}/${read.intent.mode}/${String(read.intent.force)}` : 'none'
      if (read.found) found = read.intent
      this.#recordIntentReadMetric(!read.found ? 'none' : validMode(read.intent.mode) ? 'recorded' : 'unreadable')
    } catch (err) {
      seen = `unreadable: ${errorMessage(err)}`
      this.#recordIntentReadMetric('unreadable')
    }
    this.#opts.onRead?.(found)
    if (seen !== this.#lastSeen) {
      // The first read only learns what the leg's first run acts on.
      if (this.#lastSeen !== '') this.#opts.kickLeg()
      this.#lastSeen = seen
    }
  }

  #recordIntentReadMetric(result: 'recorded' | 'none' | 'unreadable'): void {
    this.#opts.metrics.intentRead(result)
  }
}

// Publishes this box's summary to the deploy store (design §7.3) when it
// says something new. One write at a time; a failed write never touches the layout.
import { sameSummary, type BoxSummary } from '../domain/box-summary.js'
import type { Config } from '../config.js'
import type { Clock, DeployStore, Logger } from '../domain/ports.js'
import type { ReportFigures, SummaryAsk } from '../report/figures.js'
import type { IntentRecord } from '../domain/schemas.js'
import { errorMessage } from '../errors.js'

export interface BoxPublisherOptions {
  /** activatorUrl: whether a forced intent can stop this box's awake instances. */
  config: Pick<Config, 'activatorUrl'>
  store: DeployStore
  logger: Logger
  clock: Clock
  figures: (ask: SummaryAsk) => Promise<ReportFigures>
  /** A tag's summary is counted once. */
  tag: () => string
  legBusy: () => { running: boolean; pending: boolean }
  /** As the leg noted it, without building the report. */
  mode?: () => string
  version: () => Promise<string>
  signal: AbortSignal
}

export class BoxPublisher {
  readonly #o: BoxPublisherOptions
  #intent: Pick<IntentRecord, 'id' | 'mode'> | null = null
  #published: BoxSummary | undefined
  #writing = false
  #again = false
  #failing = false
  #due = false
  /** Reused while the report's tag, intent and version are the same. */
  #built: { tag: string; intent: string; version: string; summary: BoxSummary } | undefined

  constructor(opts: BoxPublisherOptions) {
    this.#o = opts
  }

  /** null: none addresses the box, or it was unreadable. */
  noteIntent(intent: Pick<IntentRecord, 'id' | 'mode'> | null): void {
    this.#intent = intent === null ? null : { id: intent.id, mode: intent.mode }
    this.update()
  }

  /** Publishes a tick later, once a run that just ended has left the leg idle. */
  update(): void {
    if (this.#o.store.publishBox === undefined || this.#o.signal.aborted || this.#due) return
    this.#due = true
    this.#o.clock.setTimer(0, () => {
      this.#due = false
      this.#start()
    })
  }

  #start(): void {
    const { signal } = this.#o
    if (signal.aborted) return
    if (this.#writing) {
      this.#again = true
      return
    }
    this.#writing = true
    void this.#publish().finally(() => {
      this.#writing = false
      if (this.#again) {
        this.#again = false
        this.#start()
      }
    })
  }

  async #publish(): Promise<void> {
    const { store, logger, clock, version, signal } = this.#o
    try {
      const at = new Date(clock.now()).toISOString()
      const summary = this.#duringRun(at) ?? (await this.#summary(await version(), at))
      if (sameSummary(this.#published, summary)) return
      await store.publishBox?.(summary, AbortSignal.any([signal, AbortSignal.timeout(30_000)]))
      this.#published = summary
      if (this.#failing) logger.info({ store: store.describe() }, 'fleet: the box summary is published again')
      this.#failing = false
    } catch (err) {
      if (signal.aborted) return
      // Logged once per spell of failures; the next change or read tries again.
      if (!this.#failing)
        logger.warn(
          { store: store.describe(), err },
          `fleet: the box summary could not be published: ${errorMessage(err)}`,
        )
      this.#failing = true
    }
  }
  /** Counted only when the report's tag moved: each count walks every row. */
  async #summary(version: string, at: string): Promise<BoxSummary> {
    const intent = JSON.stringify(this.#intent)
    const built = this.#built
    if (built?.tag === this.#o.tag() && built.intent === intent && built.version === version)
      return { ...built.summary, at }
    const canStopAwake = this.#o.config.activatorUrl !== ''
    const { tag, summary } = await this.#o.figures({ intent: this.#intent, version, at, canStopAwake })
    if (summary === null) throw new Error('the report was counted without its summary')
    this.#built = { tag, intent, version, summary }
    return summary
  }

  /** During a run, the last summary marked busy: a rebuild per batch would take the loop from the activator. */
  #duringRun(at: string): BoxSummary | undefined {
    const busy = this.#o.legBusy()
    const last = this.#published
    if (!busy.running || last === undefined || last.intent !== (this.#intent?.id ?? null)) return undefined
    // The leg notes this run's mode after the summary that named the intent.
    const mode = this.#o.mode?.() ?? last.mode
    return { ...last, mode, converged: false, leg: { ...last.leg, running: busy.running, pending: busy.pending }, at }
  }
}

// Publishes this box's summary to the deploy store (design §7.3) when it
// says something new, after each read of the intent and run of the leg. One
// write at a time; a failed write never touches the layout.
import { sameSummary, type BoxSummary } from '../domain/box-summary.js'
import type { Config } from '../config.js'
import type { Clock, DeployStore, Logger } from '../domain/ports.js'
import type { ReportFigures, SummaryAsk } from '../report/figures.js'
import type { IntentRecord } from '../domain/schemas.js'
import { errorMessage } from '../errors.js'

export interface BoxPublisherOptions {
  /** CARLOS_ACTIVATOR_URL, for whether a forced intent can stop this box's awake instances. */
  config: Pick<Config, 'activatorUrl'>
  store: DeployStore
  logger: Logger
  clock: Clock
  /** The figures of the report of now with the summary ask asks for. */
  figures: (ask: SummaryAsk) => Promise<ReportFigures>
  /** The tag of the report of now: the summary of a tag is counted once. */
  tag: () => string
  /** Whether a run of the leg is under way or due, read without building the report. */
  legBusy: () => { running: boolean; pending: boolean }
  /** The mode the leg noted at its last read of the intent (the report's mode), read without building it. */
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
  /** The last summary built, and from what: the same report's tag, intent and version say it again. */
  #built: { tag: string; intent: string; version: string; summary: BoxSummary } | undefined

  constructor(opts: BoxPublisherOptions) {
    this.#o = opts
  }

  /** The intent the last read found (null: none addresses the box, or it was unreadable). */
  noteIntent(intent: Pick<IntentRecord, 'id' | 'mode'> | null): void {
    this.#intent = intent === null ? null : { id: intent.id, mode: intent.mode }
    this.update()
  }

  /** Publish if the summary changed; taken a tick later, so a run that just ended has left the leg idle. */
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
  /** The summary of the report of now, counted again only when the report's tag moved: each count walks every row. */
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

  /**
   * While a run is under way, the last summary with the leg marked busy: a
   * converge changes the report every batch, and rebuilding it per read
   * would take the loop from the activator. The run's end publishes the new
   * counts (design §7.3). Undefined: build the summary.
   */
  #duringRun(at: string): BoxSummary | undefined {
    const busy = this.#o.legBusy()
    const last = this.#published
    if (!busy.running || last === undefined || last.intent !== (this.#intent?.id ?? null)) return undefined
    // The mode is the one the leg noted for this run, which it notes after the summary that named the intent.
    const mode = this.#o.mode?.() ?? last.mode
    return { ...last, mode, converged: false, leg: { ...last.leg, running: busy.running, pending: busy.pending }, at }
  }
}

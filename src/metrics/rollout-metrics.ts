// The staged rollout's gauges (design §9, §7.6): the rollout in play as this
// agent last read it, its open wave, and this box's deferred rows in it; etcd
// stores only. Each box says only its own rows, so a fleet sum counts each once.
import type { Gauge, Registry } from 'prom-client'
import { ROLLOUT_STATES, type BoxReport, type RolloutRecord } from '../domain/rollout.js'
import { gauge, METRICS } from './definitions.js'

export class RolloutMetrics {
  readonly #state: Gauge<'state'>
  readonly #wave: Gauge
  readonly #deferred: Gauge
  #inPlay: string | undefined
  #report: { id: string; deferredRows: number } | undefined

  constructor(registry: Registry) {
    this.#state = gauge(registry, METRICS.rolloutState)
    this.#wave = gauge(registry, METRICS.rolloutWave)
    this.#deferred = gauge(registry, METRICS.rolloutDeferredRows)
    this.set(undefined)
  }

  set(r: RolloutRecord | undefined): void {
    for (const s of ROLLOUT_STATES) this.#state.set({ state: s }, r?.state === s ? 1 : 0)
    this.#wave.set(r === undefined ? 0 : r.wave + 1)
    this.#inPlay = r?.id
    this.#setDeferred()
  }

  /** The progress this box wrote in rollout id. */
  progress(id: string, report: Pick<BoxReport, 'deferredRows'>): void {
    this.#report = { id, deferredRows: report.deferredRows }
    this.#setDeferred()
  }

  /** A box's progress in another rollout than the one in play says nothing of this one. */
  #setDeferred(): void {
    const r = this.#report
    this.#deferred.set(r !== undefined && r.id === this.#inPlay ? r.deferredRows : 0)
  }
}

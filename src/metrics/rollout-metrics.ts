// The staged rollout's gauges (design §9, §7.6), defined in the one table
// (definitions.ts): the state of the rollout in play as this agent last
// read it, its open wave, and this box's deferred rows in it (what its
// progress last said), on the agent's registry. Only an agent whose store
// keeps rollouts (etcd) has them. A paused rollout (a failed wave, a
// passed deadline) is what to alert on; the deferred rows are counted
// apart because they neither fail nor hold a wave, and each box says only
// its own, so a sum over the fleet counts each row once.
import type { Gauge, Registry } from 'prom-client'
import { ROLLOUT_STATES, type BoxReport, type RolloutRecord } from '../domain/rollout.js'
import { gauge, METRICS } from './definitions.js'

export class RolloutMetrics {
  readonly #state: Gauge<'state'>
  readonly #wave: Gauge
  readonly #deferred: Gauge
  #inPlay: string | undefined
  /** The last progress this box wrote, and the rollout it was for. */
  #report: { id: string; deferredRows: number } | undefined

  constructor(registry: Registry) {
    this.#state = gauge(registry, METRICS.rolloutState)
    this.#wave = gauge(registry, METRICS.rolloutWave)
    this.#deferred = gauge(registry, METRICS.rolloutDeferredRows)
    this.set(undefined)
  }

  /** The rollout in play as the agent read it last. */
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

// The staged rollout's gauges (design §9, §7.6): the state of the rollout
// in play as this agent last read it, and its open wave, on the agent's
// registry. Only an agent whose store keeps rollouts (etcd) has them. A
// paused rollout (a failed wave, a passed deadline) is what to alert on.
import { Gauge, type Registry } from 'prom-client'
import { ROLLOUT_STATES, type RolloutRecord } from '../domain/rollout.js'

const PREFIX = 'carlos_layout_'

export class RolloutMetrics {
  readonly #state: Gauge<'state'>
  readonly #wave: Gauge

  constructor(registry: Registry) {
    this.#state = new Gauge({
      name: `${PREFIX}rollout_state`,
      help:
        '1 for the state of the rollout in play (running, paused, frozen, reverted, aborted, done); ' +
        '0 for the rest.',
      labelNames: ['state'] as const,
      registers: [registry],
    })
    this.#wave = new Gauge({
      name: `${PREFIX}rollout_wave`,
      help: 'The open wave of the rollout in play, from 1; 0 when no rollout was ever recorded.',
      registers: [registry],
    })
    this.set(undefined)
  }

  set(r: RolloutRecord | undefined): void {
    for (const s of ROLLOUT_STATES) this.#state.set({ state: s }, r?.state === s ? 1 : 0)
    this.#wave.set(r === undefined ? 0 : r.wave + 1)
  }
}

// The deploy store as this box's agent reads it while rollouts are kept
// (design §7.6): the records with each started rollout's intent for this box
// merged in, so the poller, the leg and start-up pick the intent as before.
import type { BoxSummary } from '../domain/box-summary.js'
import type { DeployStore } from '../domain/ports.js'
import { withRolloutIntents } from '../domain/rollout.js'
import type { IntentRecord } from '../domain/schemas.js'
import { RolloutFollower } from './rollout-follower.js'
import type { Clock, Logger } from '../domain/ports.js'
import type { BoxReport, RolloutPort, RolloutRecord } from '../domain/rollout.js'

export class RolloutAwareStore implements DeployStore {
  readonly #inner: DeployStore
  readonly #follower: RolloutFollower
  readonly #box: string
  readonly tracksBoxes: boolean | undefined

  constructor(inner: DeployStore, follower: RolloutFollower, box: string) {
    this.#inner = inner
    this.#follower = follower
    this.#box = box
    this.tracksBoxes = inner.tracksBoxes
    if (inner.listBoxes !== undefined) this.listBoxes = (signal) => inner.listBoxes?.(signal) ?? Promise.resolve([])
    if (inner.listKnownBoxes !== undefined)
      this.listKnownBoxes = (signal) => inner.listKnownBoxes?.(signal) ?? Promise.resolve([])
    if (inner.remove !== undefined) this.remove = (ids, signal) => inner.remove?.(ids, signal) ?? Promise.resolve()
    if (inner.rollouts !== undefined) this.rollouts = () => inner.rollouts!()
  }

  listBoxes?: DeployStore['listBoxes']
  listKnownBoxes?: DeployStore['listKnownBoxes']
  remove?: DeployStore['remove']
  rollouts?: DeployStore['rollouts']

  /** With each started rollout's intent for this box; newest last. */
  async list(signal: AbortSignal): Promise<IntentRecord[]> {
    const [records, { rollouts, started }] = await Promise.all([this.#inner.list(signal), this.#follower.read(signal)])
    return withRolloutIntents(records, rollouts, this.#box, (id) => started.has(id))
  }

  record(intent: IntentRecord, signal: AbortSignal): Promise<void> {
    return this.#inner.record(intent, signal)
  }

  watch(onChange: () => void, signal: AbortSignal): void {
    this.#inner.watch?.(onChange, signal)
    this.#follower.onIntentChange(onChange, signal)
  }

  describe(): string {
    return this.#inner.describe()
  }

  identity(): string {
    return this.#inner.identity?.() ?? this.#inner.describe()
  }

  async close(): Promise<void> {
    this.#life?.abort()
    await this.#inner.close()
  }

  #life: AbortController | undefined

  /** The inner store itself when it keeps no rollouts. */
  static around(
    inner: DeployStore,
    o: {
      box: string
      clock: Clock
      logger: Logger
      onState?: (r: RolloutRecord | undefined) => void
      kickLeg?: () => void | Promise<string | null>
      /** Progress this box wrote, once it landed (the rollout gauges). */
      onProgress?: (id: string, report: BoxReport) => void
    },
  ): DeployStore {
    const inners = inner.rollouts?.()
    if (inners === undefined) return inner
    const port = o.onProgress === undefined ? inners : tapProgress(inners, o.onProgress)
    const life = new AbortController()
    const follower = new RolloutFollower({ ...o, port, signal: AbortSignal.any([life.signal, port.closed]) })
    const store = new RolloutAwareStore(inner, follower, o.box)
    store.#life = life
    follower.start()
    return store
  }

  async publishBox(summary: BoxSummary, signal: AbortSignal): Promise<void> {
    await this.#inner.publishBox?.(summary, signal)
    // The follower learns from the summary that the pass ended.
    this.#follower.noteSummary(summary)
  }
}

function tapProgress(port: RolloutPort, onProgress: (id: string, report: BoxReport) => void): RolloutPort {
  const putProgress: RolloutPort['putProgress'] = async (id, box, wave, report, signal) => {
    await port.putProgress(id, box, wave, report, signal)
    onProgress(id, report)
  }
  return new Proxy(port, {
    get(target, name) {
      if (name === 'putProgress') return putProgress
      const v: unknown = Reflect.get(target, name, target)
      // The port's methods use its private fields: they are called on it, not on the proxy.
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v
    },
  })
}

// The gauges an operator alerts on beside the layout's own (design §9): the
// build, each gate check, the last clean run, and whether the intent is read.
import type { Gauge, Registry } from 'prom-client'
import { gauge, METRICS } from './definitions.js'

/** The isolation gate's checks, by name (design §5.4): a closed set. */
export const GATE_CHECKS = ['selfcheck', 'mounts', 'probe'] as const
export type GateCheckName = (typeof GATE_CHECKS)[number]

export class OpsMetrics {
  #gate: () => ReadonlyArray<{ name: GateCheckName; ok: boolean }> = () => []

  readonly #buildInfo: Gauge<'version' | 'build'>
  readonly #lastSuccess: Gauge
  readonly #intentReadable: Gauge

  constructor(registry: Registry) {
    this.#buildInfo = gauge(registry, METRICS.buildInfo)
    const checks = () => this.#gate()
    // Read at each scrape, so the gauge never lags the gate.
    gauge(registry, METRICS.gateCheck, function () {
      this.reset()
      for (const c of checks()) this.set({ check: c.name }, c.ok ? 1 : 0)
    })
    this.#lastSuccess = gauge(registry, METRICS.lastSuccess)
    this.#intentReadable = gauge(registry, METRICS.intentReadable)
    this.#lastSuccess.set(0)
    this.#intentReadable.set(1)
  }

  /** Once at start. */
  setBuildInfo(version: string, build: string): void {
    this.#buildInfo.reset()
    this.#buildInfo.set({ version, build: build === '' ? 'unset' : build }, 1)
  }

  /** Where the gate's checks are read at each scrape. */
  watchGate(checks: () => ReadonlyArray<{ name: GateCheckName; ok: boolean }>): void {
    this.#gate = checks
  }

  /** Clean: it read the intent (or the default) and no host failed. */
  setLastSuccess(atMs: number): void {
    this.#lastSuccess.set(atMs / 1000)
  }

  setIntentReadable(readable: boolean): void {
    this.#intentReadable.set(readable ? 1 : 0)
  }
}

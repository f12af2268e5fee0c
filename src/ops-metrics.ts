// The gauges an operator alerts on beside the layout's own (design §9):
// which build runs, each isolation gate check, when the leg last finished a
// run clean, and whether the intent can be read. They live on the agent's
// registry (src/metrics.ts hands it in) but apart from the layout metrics,
// so the two grow without touching each other. The gate's checks are read
// when Prometheus scrapes, so the gauge never lags the gate.
import { Gauge, type Registry } from 'prom-client'

const PREFIX = 'carlos_layout_'

/** The isolation gate's checks, by name (design §5.4): a closed set. */
export const GATE_CHECKS = ['selfcheck', 'mounts', 'probe'] as const
export type GateCheckName = (typeof GATE_CHECKS)[number]

export class OpsMetrics {
  #gate: () => ReadonlyArray<{ name: GateCheckName; ok: boolean }> = () => []

  private readonly buildInfo: Gauge<'version' | 'build'>
  private readonly gateCheck: Gauge<'check'>
  private readonly lastSuccess: Gauge
  private readonly intentReadable: Gauge

  constructor(registry: Registry) {
    this.buildInfo = new Gauge({
      name: `${PREFIX}build_info`,
      help:
        "Always 1: layoutd's version, " +
        "and the platform build it was told it runs beside (CARLOS_BUILD; 'unset' when not).",
      labelNames: ['version', 'build'] as const,
      registers: [registry],
    })
    const gate = () => this.#gate()
    this.gateCheck = new Gauge({
      name: `${PREFIX}gate_check`,
      help:
        'Each check of the isolation gate: 1 passing, 0 failing or not yet run. ' +
        'Absent on a box with no activator armed.',
      labelNames: ['check'] as const,
      registers: [registry],
      collect() {
        this.reset()
        for (const c of gate()) this.set({ check: c.name }, c.ok ? 1 : 0)
      },
    })
    this.lastSuccess = new Gauge({
      name: `${PREFIX}leg_last_success_timestamp_seconds`,
      help:
        'When the last run of the leg that read the intent and failed no host finished ' +
        '(seconds since the epoch); 0 before any.',
      registers: [registry],
    })
    this.intentReadable = new Gauge({
      name: `${PREFIX}intent_readable`,
      help: 'Whether the last read of the intent could be read (1), or failed closed as unreadable (0).',
      registers: [registry],
    })
    this.lastSuccess.set(0)
    this.intentReadable.set(1)
  }

  /** The running version (`layoutd --version`) and CARLOS_BUILD, once at start. */
  setBuildInfo(version: string, build: string): void {
    this.buildInfo.reset()
    this.buildInfo.set({ version, build: build === '' ? 'unset' : build }, 1)
  }

  /** Where the gate's checks are read at each scrape. */
  watchGate(checks: () => ReadonlyArray<{ name: GateCheckName; ok: boolean }>): void {
    this.#gate = checks
  }

  /** A run finished clean: it read the intent (or the default) and no host failed. */
  setLastSuccess(atMs: number): void {
    this.lastSuccess.set(atMs / 1000)
  }

  setIntentReadable(readable: boolean): void {
    this.intentReadable.set(readable ? 1 : 0)
  }
}

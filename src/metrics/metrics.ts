// The agent's Prometheus metrics (design §9), on a registry of its own so
// two agents in one process never share a series. Every label value is from
// a closed set, so the series count cannot explode.
import { Registry, collectDefaultMetrics } from './prom-client.js'
import { DEFAULT_BLOCKS, type DefaultBlock } from '../domain/layout-default.js'
import {
  MODES,
  OUTCOMES,
  REPORT_MODES,
  ROW_LAYOUTS,
  type Mode,
  type Outcome,
  type ReportMode,
  type RowLayout,
} from '../domain/modes.js'
import { WAKE_REFUSAL_KINDS, type WakeRefusalKind } from '../domain/wake-verdict.js'
import { counter, gauge, histogram, METRICS, nameOf } from './definitions.js'
import { HttpHistogram } from './http-histogram.js'
import { OpsMetrics } from './ops-metrics.js'

/** How a read of this box's intent ended. */
export type IntentReadResult = 'recorded' | 'none' | 'unreadable'
export const INTENT_READ_RESULTS: readonly IntentReadResult[] = ['recorded', 'none', 'unreadable']

/** How a wake claim was answered. */
export type WakeClaimResult = 'granted' | WakeRefusalKind | 'error'
export const WAKE_CLAIM_RESULTS: readonly WakeClaimResult[] = ['granted', ...WAKE_REFUSAL_KINDS, 'error']

/** What start-up recovery did with a journal (design §4). */
export type RecoveryAction = 'redone' | 'rolled_back' | 'committed' | 'finished' | 'kept_fenced'
export const RECOVERY_ACTIONS: readonly RecoveryAction[] = [
  'redone',
  'rolled_back',
  'committed',
  'finished',
  'kept_fenced',
]

/** The raw URL never becomes a label. */
export const UNMATCHED_ROUTE = 'unmatched'

export class Metrics {
  readonly registry = new Registry()
  readonly ops = new OpsMetrics(this.registry)

  readonly #rows = gauge(this.registry, METRICS.rows)
  readonly #intentMode = gauge(this.registry, METRICS.intentMode)
  readonly #defaultApplied = gauge(this.registry, METRICS.defaultApplied)
  readonly #defaultBlocked = gauge(this.registry, METRICS.defaultBlocked)
  readonly #legRuns = counter(this.registry, METRICS.legRuns)
  readonly #legRunSeconds = histogram(this.registry, METRICS.legRunSeconds)
  readonly #readyWaiters = gauge(this.registry, METRICS.readyWaiters)
  readonly #legRunning = gauge(this.registry, METRICS.legRunning)
  readonly #legNextRetry = gauge(this.registry, METRICS.legNextRetry)
  readonly #moves = counter(this.registry, METRICS.moves)
  readonly #moveSeconds = histogram(this.registry, METRICS.moveSeconds)
  readonly #deferredHosts = gauge(this.registry, METRICS.deferredHosts)
  readonly #heldHosts = gauge(this.registry, METRICS.heldHosts)
  readonly #needingOperator = gauge(this.registry, METRICS.needingOperator)
  /** Codes exported since start: each stays, at 0 once none is left. */
  readonly #operatorCodes = new Set<string>()
  readonly #intentReads = counter(this.registry, METRICS.intentReads)
  readonly #wakeClaims = counter(this.registry, METRICS.wakeClaims)
  readonly #recoveredJournals = counter(this.registry, METRICS.recoveredJournals)
  readonly #httpSeconds = new HttpHistogram({
    name: nameOf(METRICS.httpSeconds),
    help: METRICS.httpSeconds.help,
    labelNames: METRICS.httpSeconds.labelNames,
    buckets: METRICS.httpSeconds.buckets,
    registers: [this.registry],
  })

  constructor() {
    collectDefaultMetrics({ register: this.registry })
    // Gauges named like counters, which promtool refuses; nodejs_active_* keep the counts.
    for (const name of [
      'nodejs_active_handles_total',
      'nodejs_active_requests_total',
      'nodejs_active_resources_total',
    ]) {
      this.registry.removeSingleMetric(name)
    }
    // Zero series from the start: a rate() misses a counter's first increment.
    for (const layout of ROW_LAYOUTS) this.#rows.set({ layout }, 0)
    for (const mode of REPORT_MODES) this.#intentMode.set({ mode }, 0)
    for (const to of MODES) for (const outcome of OUTCOMES) this.#moves.inc({ to, outcome }, 0)
    for (const result of INTENT_READ_RESULTS) this.#intentReads.inc({ result }, 0)
    for (const result of WAKE_CLAIM_RESULTS) this.#wakeClaims.inc({ result }, 0)
    for (const action of RECOVERY_ACTIONS) this.#recoveredJournals.inc({ action }, 0)
    this.#defaultApplied.set(0)
    this.setDefaultBlocked('')
    this.#legRunning.set(0)
    this.#deferredHosts.set(0)
    this.#heldHosts.set(0)
  }

  /** A layout missing from `counts` is 0. */
  setRows(counts: Partial<Record<RowLayout, number>>): void {
    for (const layout of ROW_LAYOUTS) this.#rows.set({ layout }, counts[layout] ?? 0)
  }

  setIntentMode(current: ReportMode): void {
    for (const mode of REPORT_MODES) this.#intentMode.set({ mode }, mode === current ? 1 : 0)
  }

  setDefaultApplied(applied: boolean): void {
    this.#defaultApplied.set(applied ? 1 : 0)
  }

  /** '' when nothing blocks the nested default. */
  setDefaultBlocked(blockedBy: DefaultBlock | ''): void {
    for (const by of DEFAULT_BLOCKS) this.#defaultBlocked.set({ by }, by === blockedBy ? 1 : 0)
  }

  setLegRunning(running: boolean): void {
    this.#legRunning.set(running ? 1 : 0)
  }

  /** ms since the epoch, or null for none. */
  setNextRetry(atMs: number | null): void {
    this.#legNextRetry.set(atMs === null ? 0 : atMs / 1000)
  }

  legRun(seconds: number): void {
    this.#legRuns.inc()
    this.#legRunSeconds.observe(seconds)
  }

  /** One host's outcome toward `to`; `seconds` only when files were at stake. */
  observeMove(to: Mode, outcome: Outcome, seconds?: number): void {
    this.#moves.inc({ to, outcome })
    if (seconds !== undefined) this.#moveSeconds.observe(seconds)
  }

  setDeferredHosts(n: number): void {
    this.#deferredHosts.set(n)
  }

  setHeldHosts(n: number): void {
    this.#heldHosts.set(n)
  }

  /** Only codes seen get a series. */
  setRowsNeedingOperator(byCode: Readonly<Record<string, number>>): void {
    for (const code of Object.keys(byCode)) this.#operatorCodes.add(code)
    for (const reason of this.#operatorCodes) this.#needingOperator.set({ reason }, byCode[reason] ?? 0)
  }

  intentRead(result: IntentReadResult): void {
    this.#intentReads.inc({ result })
  }

  setReadyWaiters(n: number): void {
    this.#readyWaiters.set(n)
  }

  wakeClaim(result: WakeClaimResult): void {
    this.#wakeClaims.inc({ result })
  }

  recoveredJournal(action: RecoveryAction): void {
    this.#recoveredJournals.inc({ action })
  }

  /** `route` is the pattern or UNMATCHED_ROUTE, never the URL. */
  observeHttp(method: string, route: string, status: number, seconds: number): void {
    const key = `${method} ${status} ${route}`
    if (this.#httpSeconds.observe(key, seconds)) return
    this.#httpSeconds.open(key, { method, route, status: String(status) })
    this.#httpSeconds.observe(key, seconds)
  }

  get contentType(): string {
    return this.registry.contentType
  }

  #beforeScrape: (() => Promise<void>) | undefined

  /** fn runs before each scrape, so gauges read now (design §9); a failure keeps them. */
  beforeScrape(fn: () => Promise<void>): void {
    this.#beforeScrape = fn
  }

  async text(): Promise<string> {
    await this.#beforeScrape?.().catch(() => undefined)
    return this.registry.metrics()
  }
}

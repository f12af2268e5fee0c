// The agent's Prometheus metrics (design §9), on a registry of its own: two
// agents in one test process never share a series, and nothing reaches the
// global default registry. Every label value comes from a closed set, so no
// label can ever carry a hostname and a bad caller cannot explode the series
// count.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client'
import { HttpHistogram } from './http-histogram.js'
import { OpsMetrics } from './ops-metrics.js'
import { DEFAULT_BLOCKS, type DefaultBlock } from './domain/layout-default.js'
import { MODES, OUTCOMES, type Mode, type Outcome, type ReportMode, type RowLayout } from './domain/modes.js'

const PREFIX = 'carlos_layout_'

// Records keyed by the union make the compiler refuse a missing member, so
// a new layout or mode cannot silently lack its zero series.
const ROW_LAYOUTS = Object.keys({
  fenced: true,
  conflict: true,
  foreign: true,
  nested: true,
  flat: true,
  external: true,
} satisfies Record<RowLayout, true>) as RowLayout[]

const REPORT_MODES = Object.keys({
  flat: true,
  nested: true,
  none: true,
  unreadable: true,
  unmanaged: true,
} satisfies Record<ReportMode, true>) as ReportMode[]

/** How a read of the deploy store for this box's intent ended. */
export type IntentReadResult = 'recorded' | 'none' | 'unreadable'
export const INTENT_READ_RESULTS: readonly IntentReadResult[] = ['recorded', 'none', 'unreadable']

/** How a wake claim (`POST /wakes/:host`) was answered: granted, or the refusal's kind. */
export type WakeClaimResult =
  'granted' | 'fenced' | 'held' | 'conflict' | 'not_ready' | 'gate_shut' | 'unknown_host' | 'files' | 'error'
export const WAKE_CLAIM_RESULTS: readonly WakeClaimResult[] = [
  'granted',
  'fenced',
  'held',
  'conflict',
  'not_ready',
  'gate_shut',
  'unknown_host',
  'files',
  'error',
]

/** What start-up recovery did with a journal (design §4). */
export type RecoveryAction = 'redone' | 'rolled_back' | 'committed' | 'finished' | 'kept_fenced'
export const RECOVERY_ACTIONS: readonly RecoveryAction[] = [
  'redone',
  'rolled_back',
  'committed',
  'finished',
  'kept_fenced',
]

/** The route label of a request that matched no route: the raw URL never becomes a label. */
export const UNMATCHED_ROUTE = 'unmatched'

export class Metrics {
  readonly registry = new Registry()
  /** The operator's gauges (build, gate checks, last clean run, intent readable), on the same registry. */
  readonly ops = new OpsMetrics(this.registry)

  private readonly rows = new Gauge({
    name: `${PREFIX}rows`,
    help: 'Instance-kind rows of the registry, by how they are classified.',
    labelNames: ['layout'] as const,
    registers: [this.registry],
  })

  private readonly intentMode = new Gauge({
    name: `${PREFIX}intent_mode`,
    help: 'The mode the box works under: 1 for the current mode, 0 for the others.',
    labelNames: ['mode'] as const,
    registers: [this.registry],
  })

  private readonly defaultApplied = new Gauge({
    name: `${PREFIX}default_applied`,
    help: '1 when the box is nested by the default rather than by a recorded intent.',
    registers: [this.registry],
  })

  private readonly defaultBlocked = new Gauge({
    name: `${PREFIX}default_blocked`,
    help:
      '1 while no intent is recorded and nested by default is not in force for a reason of this box, ' +
      'by what blocks it (gate: the isolation gate, floor: the release floor, no_activator, ' +
      'default_invalid: a bad CARLOS_LAYOUT_DEFAULT, starting: not asked yet); 0 otherwise.',
    labelNames: ['by'] as const,
    registers: [this.registry],
  })

  private readonly legRuns = new Counter({
    name: `${PREFIX}leg_runs_total`,
    help: 'Runs of the layout pass the leg finished.',
    registers: [this.registry],
  })

  private readonly legRunSeconds = new Histogram({
    name: `${PREFIX}leg_run_seconds`,
    help: 'How long one run of the layout pass took.',
    // A run over a box of sleeping hosts is quick; one that stops awake
    // hosts waits up to a minute for each.
    buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600],
    registers: [this.registry],
  })

  private readonly readyWaiters = new Gauge({
    name: `${PREFIX}ready_waiters`,
    help: 'Requests of GET /ready/:host?wait= waiting now for their host to be ready.',
    registers: [this.registry],
  })

  private readonly legRunning = new Gauge({
    name: `${PREFIX}leg_running`,
    help: '1 while a run of the layout pass is under way.',
    registers: [this.registry],
  })

  private readonly legNextRetry = new Gauge({
    name: `${PREFIX}leg_next_retry_timestamp_seconds`,
    help: 'When the retry timer runs the layout pass again, in seconds since the epoch; 0 when no retry is scheduled.',
    registers: [this.registry],
  })

  private readonly moves = new Counter({
    name: `${PREFIX}moves_total`,
    help: 'Hosts the pass reached, by the mode it moved them toward and the outcome.',
    labelNames: ['to', 'outcome'] as const,
    registers: [this.registry],
  })

  private readonly moveSeconds = new Histogram({
    name: `${PREFIX}move_seconds`,
    help: 'How long one host took to move, from its fence to its outcome.',
    // The 60 s bucket edge is the wait for an awake host's claim to be released.
    buckets: [0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 120],
    registers: [this.registry],
  })

  private readonly deferredHosts = new Gauge({
    name: `${PREFIX}deferred_hosts`,
    help: 'Hosts deferred because they were awake, among the rows the registry holds now.',
    registers: [this.registry],
  })

  private readonly heldHosts = new Gauge({
    name: `${PREFIX}held_hosts`,
    help: 'Hosts held stopped and fenced by a hold marker.',
    registers: [this.registry],
  })

  private readonly needingOperator = new Gauge({
    name: `${PREFIX}rows_needing_operator`,
    help:
      'Rows a person must act on (held, refused, kept, missing, conflict, foreign; not a move under way, ' +
      'an awake tenant in its grace or a failed move the leg retries), by reason code, counted at the scrape. ' +
      'A code is exported from its first row on, at 0 once none is left.',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  })

  /** The codes rows_needing_operator has exported since start: each stays, at 0 once none is left. */
  readonly #operatorCodes = new Set<string>()

  private readonly intentReads = new Counter({
    name: `${PREFIX}intent_reads_total`,
    help: "Reads of the deploy store for this box's layout intent, by result.",
    labelNames: ['result'] as const,
    registers: [this.registry],
  })

  private readonly wakeClaims = new Counter({
    name: `${PREFIX}wake_claims_total`,
    help: 'Wake claims of the activator, by how they were answered.',
    labelNames: ['result'] as const,
    registers: [this.registry],
  })

  private readonly recoveredJournals = new Counter({
    name: `${PREFIX}recovered_journals_total`,
    help: 'Journals start-up recovery finished or kept, by what it did.',
    labelNames: ['action'] as const,
    registers: [this.registry],
  })

  private readonly httpSeconds = new HttpHistogram({
    name: `${PREFIX}http_request_duration_seconds`,
    help: 'HTTP requests served, by method, route pattern and status.',
    labelNames: ['method', 'route', 'status'] as const,
    // Up to the longest a `converge?wait=1` may hold a request.
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120, 600],
    registers: [this.registry],
  })

  constructor() {
    collectDefaultMetrics({ register: this.registry })
    // These three are gauges named like counters, which promtool's lint
    // refuses; the same counts stay exported by type as nodejs_active_*.
    for (const name of [
      'nodejs_active_handles_total',
      'nodejs_active_requests_total',
      'nodejs_active_resources_total',
    ]) {
      this.registry.removeSingleMetric(name)
    }
    // Zero series from the start: a rate() over a counter that appears only
    // at its first increment misses that increment.
    for (const layout of ROW_LAYOUTS) this.rows.set({ layout }, 0)
    for (const mode of REPORT_MODES) this.intentMode.set({ mode }, 0)
    for (const to of MODES) for (const outcome of OUTCOMES) this.moves.inc({ to, outcome }, 0)
    for (const result of INTENT_READ_RESULTS) this.intentReads.inc({ result }, 0)
    for (const result of WAKE_CLAIM_RESULTS) this.wakeClaims.inc({ result }, 0)
    for (const action of RECOVERY_ACTIONS) this.recoveredJournals.inc({ action }, 0)
    this.defaultApplied.set(0)
    this.setDefaultBlocked('')
    this.legRunning.set(0)
    this.deferredHosts.set(0)
    this.heldHosts.set(0)
  }

  /** The rows by layout; a layout missing from `counts` is 0. */
  setRows(counts: Partial<Record<RowLayout, number>>): void {
    for (const layout of ROW_LAYOUTS) this.rows.set({ layout }, counts[layout] ?? 0)
  }

  setIntentMode(current: ReportMode): void {
    for (const mode of REPORT_MODES) this.intentMode.set({ mode }, mode === current ? 1 : 0)
  }

  setDefaultApplied(applied: boolean): void {
    this.defaultApplied.set(applied ? 1 : 0)
  }

  /** What blocks the nested default, or '' when nothing does: 1 for that one, 0 for the rest. */
  setDefaultBlocked(blockedBy: DefaultBlock | ''): void {
    for (const by of DEFAULT_BLOCKS) this.defaultBlocked.set({ by }, by === blockedBy ? 1 : 0)
  }

  setLegRunning(running: boolean): void {
    this.legRunning.set(running ? 1 : 0)
  }

  /** When the retry timer runs the pass again (ms since the epoch), or null for none. */
  setNextRetry(atMs: number | null): void {
    this.legNextRetry.set(atMs === null ? 0 : atMs / 1000)
  }

  /** A run of the pass finished after `seconds`. */
  legRun(seconds: number): void {
    this.legRuns.inc()
    this.legRunSeconds.observe(seconds)
  }

  /**
   * One host's outcome toward `to`. `seconds` is given when files were
   * actually at stake (fenced and moved, failed or recovered); a host
   * skipped or deferred without a fence has no move to time.
   */
  observeMove(to: Mode, outcome: Outcome, seconds?: number): void {
    this.moves.inc({ to, outcome })
    if (seconds !== undefined) this.moveSeconds.observe(seconds)
  }

  setDeferredHosts(n: number): void {
    this.deferredHosts.set(n)
  }

  setHeldHosts(n: number): void {
    this.heldHosts.set(n)
  }

  /**
   * The rows a person must act on, by reason code. The codes are the closed
   * set of reason codes; only those seen get a series, so a box that never
   * had one exports none rather than one for every code.
   */
  setRowsNeedingOperator(byCode: Readonly<Record<string, number>>): void {
    for (const code of Object.keys(byCode)) this.#operatorCodes.add(code)
    for (const reason of this.#operatorCodes) this.needingOperator.set({ reason }, byCode[reason] ?? 0)
  }

  intentRead(result: IntentReadResult): void {
    this.intentReads.inc({ result })
  }

  /** How many `GET /ready/:host?wait=` requests wait now. */
  setReadyWaiters(n: number): void {
    this.readyWaiters.set(n)
  }

  wakeClaim(result: WakeClaimResult): void {
    this.wakeClaims.inc({ result })
  }

  recoveredJournal(action: RecoveryAction): void {
    this.recoveredJournals.inc({ action })
  }

  /**
   * One HTTP request. `route` is the route pattern (`/ready/:host`) or
   * UNMATCHED_ROUTE, never the URL: the series are a closed set, each found
   * by one key, its labels checked once when it is made.
   */
  observeHttp(method: string, route: string, status: number, seconds: number): void {
    const key = `${method} ${status} ${route}`
    if (this.httpSeconds.observe(key, seconds)) return
    this.httpSeconds.open(key, { method, route, status: String(status) })
    this.httpSeconds.observe(key, seconds)
  }

  get contentType(): string {
    return this.registry.contentType
  }

  /** The exposition text Prometheus scrapes. */
  /** What the agent brings up to date before each scrape (the row gauges), or nothing. */
  #beforeScrape: (() => Promise<void>) | undefined

  /**
   * fn runs before each scrape, so a gauge reads what the agent knows now
   * rather than what the last run left (design §9): a row the CLI added
   * shows at the next scrape. A failure leaves the gauges as they were.
   */
  beforeScrape(fn: () => Promise<void>): void {
    this.#beforeScrape = fn
  }

  async text(): Promise<string> {
    await this.#beforeScrape?.().catch(() => undefined)
    return this.registry.metrics()
  }
}

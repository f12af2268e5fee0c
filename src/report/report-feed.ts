// The report built on a thread of its own (design §6.2): what the loop's
// thread hands it, and the copy of the box that thread keeps. The loop's
// thread reads every input of one version in one tick (the registry's
// rows, the pass's facts, the intent, the leg, the withheld reasons, the
// gate) and sends only what changed since its last send: the rows a batch
// rewrote, the results a run gained. The other thread applies that to its
// copy and judges every row as the pass's own classify would, at that
// tick. No I/O: the two ends carry the messages.
import { summarize, type BoxSummary } from '../domain/box-summary.js'
import { classifyWith, PathClaims } from '../domain/classify.js'
import type { DefaultState } from '../domain/intent-state.js'
import type { HeldRun, LegFeed } from '../domain/leg.js'
import type { IntentMode, Result } from '../domain/modes.js'
import type { Dirs } from '../domain/paths.js'
import type { Classification, PassFacts } from '../domain/ports.js'
import type { Why } from '../domain/reason-codes.js'
import { managedReportSteps } from './build.js'
import { countByCode, operatorRows } from '../domain/short-of-intent.js'
import type { IntentRecord, LayoutReport, Route } from '../domain/schemas.js'
import { withheldReasons } from './withheld-reasons.js'

/** Every input of one version of the report, read on the loop's thread in one tick. */
export interface ReportInputs {
  /** The version's tag (report-view.ts). */
  tag: string
  box: string
  dirs: Dirs
  routes: readonly Route[]
  facts: PassFacts
  intent: { mode: IntentMode; default: DefaultState; unreadableWhy: string }
  /** The leg, with what the reader does not hold of its last run (Leg.stateSince). */
  leg: (held: HeldRun | undefined) => LegFeed
  withheld: ReadonlyMap<string, Result>
  /** The isolation gate's answer: null when open, the failed check otherwise. */
  gate: string | null
}

/** What a box summary is built with beside the report (box-summary.ts summarize). */
export interface SummaryAsk {
  intent: Pick<IntentRecord, 'id' | 'mode'> | null
  version: string
  at: string
  canStopAwake: boolean
}

/**
 * What the agent's row gauges (design §9) and its box summary (§7.3) take
 * from a report: counted on the report thread, so a run's end or a scrape
 * never walks 10,000 rows on the loop's thread.
 */
export interface ReportFigures {
  /** The tag of the version counted. */
  tag: string
  /** The rows by word (`rows{layout}`). */
  counts: Record<string, number>
  /** Rows a hold marker holds (`held_hosts`). */
  held: number
  /** Rows deferred awake inside their grace (`deferred_hosts` at a scrape). */
  deferred: number
  /** Rows a person must act on, by reason code (`rows_needing_operator{reason}`). */
  needingOperator: Record<string, number>
  /** The box summary, when one was asked for. */
  summary: BoxSummary | null
}

/** Counts a report's figures; held says whether a hold marker holds a host. */
export function reportFigures(
  tag: string,
  report: LayoutReport,
  held: (host: string) => boolean,
  ask: SummaryAsk | null,
): ReportFigures {
  const counts: Record<string, number> = {}
  let heldRows = 0
  let deferred = 0
  for (const [host, row] of Object.entries(report.rows)) {
    counts[row.layout] = (counts[row.layout] ?? 0) + 1
    if (held(host)) heldRows++
    if (row.code === 'awake_grace') deferred++
  }
  const summary = ask === null ? null : summarize(report, ask.intent, ask.version, ask.at, ask.canStopAwake)
  const needingOperator = Object.fromEntries(countByCode(operatorRows(report)))
  return { tag, counts, held: heldRows, deferred, needingOperator, summary }
}

/** Builds the figures of a version of the report off the loop's thread (the report thread, design §6.2). */
export interface ReportFigurer {
  figures(inputs: ReportInputs, ask: SummaryAsk | null): Promise<ReportFigures>
}

/** A list sent ahead of a build, in parts of at most PART_ITEMS (one a turn of the loop). */
export type FeedPart =
  | { list: 'rows'; items: Route[] }
  | { list: 'replaced'; items: Array<[number, Route]> }
  | { list: 'results'; items: Result[] }
  | { list: 'withheld'; items: Array<[string, Result]> }

/** Items of a list per part: each part is one structured clone, and a turn of the loop apiece. */
export const PART_ITEMS = 1000

/** What a build goes by, beside the lists sent ahead of it. */
export interface FeedHead {
  tag: string
  box: string
  dirs: Dirs
  /** `same`: the rows held; `all`: the rows sent (whole list); `replaced`: the rows held, those sent put in. */
  rows: 'same' | 'all' | 'replaced'
  facts: PassFacts
  intent: ReportInputs['intent']
  /** The leg, its last run's results (from its `from`) being those sent. */
  leg: Omit<LegFeed, 'run'> & { run: (Omit<NonNullable<LegFeed['run']>, 'results'> & { count: number }) | null }
  /** `same`: the reasons held; `all`: those sent. */
  withheld: 'same' | 'all'
  gate: string | null
}

function parts<T>(items: readonly T[], part: (items: T[]) => FeedPart): FeedPart[] {
  const out: FeedPart[] = []
  for (let i = 0; i < items.length; i += PART_ITEMS) out.push(part(items.slice(i, i + PART_ITEMS)))
  return out
}

/**
 * The loop's end: what the other thread holds, and what it must be sent
 * for the next build. A list is sent whole only when it is new (another
 * listing of the registry, the first send, a run that ended); the rows a
 * batch rewrote are found by identity (the registry carries every other
 * row over its commit as the same object), in one pass of pointer
 * comparisons.
 */
export class FeedWriter {
  #routes: readonly Route[] | undefined
  #withheld: ReadonlyMap<string, Result> | undefined
  #run: HeldRun | undefined

  /** The other thread holds nothing (it is new, or it died): the next send is whole. */
  reset(): void {
    this.#routes = undefined
    this.#withheld = undefined
    this.#run = undefined
  }

  next(inputs: ReportInputs): { parts: FeedPart[]; head: FeedHead } {
    const out: FeedPart[] = []
    const rows = this.#rows(inputs.routes, out)
    const { run, ...leg } = inputs.leg(this.#run)
    if (run !== null) out.push(...parts(run.results, (items) => ({ list: 'results', items })))
    const count = run === null ? 0 : run.from + run.results.length
    this.#run = run === null ? undefined : { startedAt: run.startedAt, finishedAt: run.finishedAt, count }
    const withheld = this.#withheld === inputs.withheld ? 'same' : 'all'
    if (withheld === 'all') out.push(...parts([...inputs.withheld], (items) => ({ list: 'withheld', items })))
    this.#withheld = inputs.withheld
    const head: FeedHead = {
      tag: inputs.tag,
      box: inputs.box,
      dirs: inputs.dirs,
      rows,
      facts: inputs.facts,
      intent: inputs.intent,
      leg: {
        ...leg,
        run: run === null ? null : { startedAt: run.startedAt, finishedAt: run.finishedAt, from: run.from, count },
      },
      withheld,
      gate: inputs.gate,
    }
    return { parts: out, head }
  }

  #rows(routes: readonly Route[], out: FeedPart[]): FeedHead['rows'] {
    const held = this.#routes
    this.#routes = routes
    if (held === routes) return 'same'
    const replaced = held === undefined ? undefined : rewritten(held, routes)
    if (replaced === undefined) {
      out.push(...parts(routes, (items) => ({ list: 'rows', items })))
      return 'all'
    }
    out.push(...parts(replaced, (items) => ({ list: 'replaced', items })))
    return 'replaced'
  }
}

/** The rows of now that are not those held, by place; undefined when the lists differ by more than rows rewritten. */
function rewritten(held: readonly Route[], now: readonly Route[]): Array<[number, Route]> | undefined {
  if (held.length !== now.length) return undefined
  const out: Array<[number, Route]> = []
  for (let i = 0; i < now.length; i++) {
    const row = now[i] as Route
    const was = held[i] as Route
    if (row === was) continue
    if (row.host !== was.host) return undefined
    out.push([i, row])
  }
  return out
}

/**
 * The other thread's end: the box as the loop's thread last sent it, and
 * the report of that send. The rows' path claims follow the rows rewritten,
 * as the pass's own do (claims-follower.ts), so a build after a batch does
 * not index 10,000 rows again.
 */
export class ReportMirror {
  #routes: Route[] = []
  #claims = new PathClaims()
  #results: Result[] = []
  #withheld = new Map<string, Result>()
  #staged: { rows: Route[]; replaced: Array<[number, Route]>; results: Result[]; withheld: Array<[string, Result]> } = {
    rows: [],
    replaced: [],
    results: [],
    withheld: [],
  }
  #built: { tag: string; report: LayoutReport } | undefined

  /** A list sent ahead of the next build. */
  take(part: FeedPart): void {
    const staged = this.#staged
    if (part.list === 'rows') staged.rows.push(...part.items)
    else if (part.list === 'replaced') staged.replaced.push(...part.items)
    else if (part.list === 'results') staged.results.push(...part.items)
    else staged.withheld.push(...part.items)
  }

  /** The report of head, with the lists taken since the last build; built once per tag. */
  build(head: FeedHead): LayoutReport {
    const staged = this.#staged
    this.#staged = { rows: [], replaced: [], results: [], withheld: [] }
    this.#applyRows(head.rows, staged)
    const run = head.leg.run
    this.#results = run === null ? [] : [...this.#results.slice(0, run.from), ...staged.results]
    if (head.withheld === 'all') this.#withheld = new Map(staged.withheld)
    if (this.#built?.tag === head.tag) return this.#built.report
    const report = this.#report(head)
    this.#built = { tag: head.tag, report }
    return report
  }

  /** The figures of head's report (reportFigures), held as head's facts say. */
  figures(head: FeedHead, ask: SummaryAsk | null): ReportFigures {
    const report = this.build(head)
    const held = new Set(head.facts.held.map(([host]) => host))
    return reportFigures(head.tag, report, (host) => held.has(host), ask)
  }

  #applyRows(how: FeedHead['rows'], staged: { rows: Route[]; replaced: Array<[number, Route]> }): void {
    if (how === 'all') {
      this.#routes = staged.rows
      this.#claims = new PathClaims(this.#routes)
      return
    }
    for (const [i, row] of staged.replaced) {
      const was = this.#routes[i]
      if (was === undefined) continue
      if (was.dir !== row.dir || was.socket !== row.socket) this.#claims.replace(was, row)
      this.#routes[i] = row
    }
  }

  #report(head: FeedHead): LayoutReport {
    const fenced = new Map<string, Why>(head.facts.fenced)
    const held = new Map<string, Why>(head.facts.held)
    const notes = new Map<string, string>(head.facts.notes)
    const claims = this.#claims
    const pass = {
      classify: (route: Route): Classification =>
        classifyWith(route, claims, { dirs: head.dirs, fenced: (host) => fenced.get(host) }),
      held: (host: string) => held.get(host),
      note: (host: string) => notes.get(host) ?? '',
    }
    const { intent } = head
    const state = {
      lastIntent: () => intent.mode,
      lastDefault: () => intent.default,
      unreadableWhy: () => intent.unreadableWhy,
    }
    const { run, ...leg } = head.leg
    const lastRun =
      run === null ? null : { startedAt: run.startedAt, finishedAt: run.finishedAt, results: this.#results }
    const steps = managedReportSteps({ box: head.box, routes: this.#routes, pass, state, leg: { ...leg, lastRun } })
    for (;;) {
      const step = steps.next()
      if (step.done === true) return withheldReasons(step.value, this.#withheld, head.gate)
    }
  }
}

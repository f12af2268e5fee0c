// The report as the agent serves it (design §6): the registry's rows at
// this tick, judged by the armed pass, with the reasons the last finished
// run withheld rows for; before the pass is published (recovery under way,
// or no activator armed), judged by what <data>/layout holds. It is a
// cached value with a version (design §6.2): built again only when one of
// its inputs has changed, each of which is read here in constant time.
import { performance } from 'node:perf_hooks'
import { setImmediate as nextTurn } from 'node:timers/promises'
import type { Phase } from '../agent-api.js'
import type { Config } from '../config.js'
import type { IntentState } from '../domain/intent-state.js'
import type { Leg } from '../domain/leg.js'
import type { Result } from '../domain/modes.js'
import type { IsolationGate, LayoutDirectory, LayoutPass } from '../domain/ports.js'
import { managedReportSteps, unmanagedLayoutReport } from '../domain/report.js'
import type { LayoutReport, LegRun, Route } from '../domain/schemas.js'
import { withheldBy, withheldReasons } from '../domain/withheld-reasons.js'
import type { Registry } from '../infra/registry.js'

/** The longest slice of the event loop a report built by reportSoon takes. */
const SLICE_MS = 4

function countsOf(report: LayoutReport): Record<string, number> {
  const counts: Record<string, number> = {}
  for (const row of Object.values(report.rows)) counts[row.layout] = (counts[row.layout] ?? 0) + 1
  return counts
}

export interface ReportViewDeps {
  config: Config
  registry: Pick<Registry, 'snapshot'>
  layoutDir: LayoutDirectory
  state: IntentState
  gate: IsolationGate | null
}

/** The report as last built, with what it was built from. */
interface Built {
  inputs: readonly unknown[]
  version: number
  /** `<epoch>.<version>`, made once per build. */
  tag: string
  report: LayoutReport
  counts: Readonly<Record<string, number>>
}

/**
 * What the report is built from, each read in constant time: the registry's
 * rows (a new snapshot only when PRAGMA data_version moved), the pass and
 * its journals, holds, fences and notes, the intent, the gate's answer, the
 * leg, the phase, the last run's withheld reasons and the listing of
 * <data>/layout. Equal inputs, equal report.
 */
function sameInputs(a: readonly unknown[], b: readonly unknown[]): boolean {
  if (a.length !== b.length) return false
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false
  return true
}

function sameSet(a: ReadonlySet<string>, b: ReadonlySet<string>): boolean {
  if (a.size !== b.size) return false
  for (const x of a) if (!b.has(x)) return false
  return true
}

export class ReportView {
  readonly #deps: ReportViewDeps
  /** When this view was made: a version of another process never matches one of this. */
  readonly #epoch = Date.now().toString(36)
  #built: Built | undefined
  #version = 0
  /**
   * The hosts <data>/layout names, as last listed: what the report goes by
   * with no pass armed. null until start-up has listed it: before, no row is
   * known not to be mid-move.
   */
  #onDisk: { journals: Set<string>; holds: Set<string> } | null = null
  /** The last finished run's results that withheld a host, by host: the report's row reasons. */
  #withheld = new Map<string, Result>()
  /** Counts the builds begun: one built in slices is kept only when none began after it. */
  #builds = 0

  constructor(deps: ReportViewDeps) {
    this.#deps = deps
  }

  /** Lists the journals and hold markers of <data>/layout again. */
  async listLayoutDir(): Promise<void> {
    const { layoutDir } = this.#deps
    const [journals, holds] = await Promise.all([layoutDir.journalHosts(), layoutDir.holdHosts()])
    const listed = { journals: new Set(journals), holds: new Set(holds) }
    // The same listing keeps its identity, so a poll that found nothing new
    // leaves the report's version where it was.
    const was = this.#onDisk
    if (was !== null && sameSet(was.journals, listed.journals) && sameSet(was.holds, listed.holds)) return
    this.#onDisk = listed
  }

  /** A run of the leg has finished: its withheld results are the rows' reasons until the next one finishes. */
  noteFinishedRun(run: LegRun): void {
    this.#withheld = withheldBy(run)
  }

  /**
   * The report's tag now, `<epoch>.<version>`: the version moves whenever
   * the report would read differently, and nothing is built to tell.
   */
  tag(phase: Phase, pass: LayoutPass | null, leg: Leg): string {
    return this.#current(phase, pass, leg).tag
  }

  report(phase: Phase, pass: LayoutPass | null, leg: Leg): LayoutReport {
    return this.#current(phase, pass, leg).report
  }

  /** The rows of the report by word, counted once per version (the row gauges). */
  counts(phase: Phase, pass: LayoutPass | null, leg: Leg): Readonly<Record<string, number>> {
    return this.#current(phase, pass, leg).counts
  }

  /**
   * The report of now, built in slices of the event loop when it must be
   * built at all: for readers that can wait a few turns (the row gauges and
   * the fleet summary after a run), so that a run's end does not hold the
   * activator's questions behind a whole report of 10,000 rows. The
   * status route asks report() and gets the report of its tick.
   */
  async reportSoon(phase: Phase, pass: LayoutPass | null, leg: Leg): Promise<{ report: LayoutReport; counts: Readonly<Record<string, number>> }> {
    const inputs = this.#inputs(phase, pass, leg)
    const built = this.#built
    if (built !== undefined && sameInputs(built.inputs, inputs)) return built
    if (pass === null) return this.#current(phase, pass, leg)
    const begun = ++this.#builds
    const { config, state, gate } = this.#deps
    const steps = managedReportSteps({ box: config.box, routes: (inputs[0] as { routes: readonly Route[] }).routes, pass, state, leg: leg.state() })
    let since = performance.now()
    for (;;) {
      const step = steps.next()
      if (step.done === true) {
        // The reasons and the counts each walk every row: a turn apiece.
        await nextTurn()
        const report = withheldReasons(step.value, this.#withheld, gate?.check() ?? null)
        await nextTurn()
        // A build begun since is newer: keep that one, answer this.
        return begun === this.#builds ? this.#keep(inputs, report) : { report, counts: countsOf(report) }
      }
      if (performance.now() - since >= SLICE_MS) {
        await nextTurn()
        since = performance.now()
      }
    }
  }

  #inputs(phase: Phase, pass: LayoutPass | null, leg: Leg): unknown[] {
    const { registry, state, gate } = this.#deps
    return [registry.snapshot(), pass, pass?.changes(), state.version, gate?.check(), leg.stateKey(), phase, this.#withheld, this.#onDisk]
  }

  #current(phase: Phase, pass: LayoutPass | null, leg: Leg): Built {
    const inputs = this.#inputs(phase, pass, leg)
    const built = this.#built
    if (built !== undefined && sameInputs(built.inputs, inputs)) return built
    this.#builds++
    return this.#keep(inputs, this.#build(phase, pass, leg, (inputs[0] as { routes: readonly Route[] }).routes))
  }

  #keep(inputs: readonly unknown[], report: LayoutReport): Built {
    const counts = countsOf(report)
    const version = ++this.#version
    this.#built = { inputs, version, tag: `${this.#epoch}.${version}`, report, counts }
    return this.#built
  }

  #build(phase: Phase, pass: LayoutPass | null, leg: Leg, routes: readonly Route[]): LayoutReport {
    const { config, state, gate } = this.#deps
    if (pass === null) {
      const onDisk = this.#onDisk
      const report = unmanagedLayoutReport({
        box: config.box,
        routes,
        dirs: config,
        journalHosts: onDisk?.journals ?? new Set(),
        holdHosts: onDisk?.holds ?? new Set(),
        leg: leg.state(),
      })
      if (onDisk === null) {
        // The HTTP server answers from the first moment, before start-up has
        // listed <data>/layout (design §4.4 step 1): a host a journal names
        // must never read nested or flat meanwhile, so every row we might
        // move reads fenced until the listing is in.
        for (const [host, r] of Object.entries(report.rows)) {
          if (r.layout === 'nested' || r.layout === 'flat') report.rows[host] = { ...r, layout: 'fenced', reason: `layoutd is ${phase}: <data>/layout not listed yet` }
        }
      }
      if (config.activator === 'none') return report
      // An armed box still recovering: rows judged as the unmanaged report
      // judges them (journals and holds first), under the intent seen so far.
      return {
        ...report,
        mode: state.lastIntent(),
        warnings: [`start-up recovery is running (${phase}): nothing may wake until it is done`, ...report.warnings],
      }
    }
    const steps = managedReportSteps({ box: config.box, routes, pass, state, leg: leg.state() })
    for (;;) {
      const step = steps.next()
      if (step.done === true) return withheldReasons(step.value, this.#withheld, gate?.check() ?? null)
    }
  }
}

// The report as the agent serves it (design §6): the registry's rows at
// this tick, judged by the armed pass, with the reasons the last finished
// run withheld rows for; before the pass is published (recovery under way,
// or no activator armed), judged by what <data>/layout holds. It is a
// cached value with a version (design §6.2): built again only when one of
// its inputs has changed, each of which is read here in constant time.
import type { Phase } from '../agent-api.js'
import type { Config } from '../config.js'
import type { IntentState } from '../domain/intent-state.js'
import type { Leg } from '../domain/leg.js'
import type { Result } from '../domain/modes.js'
import type { IsolationGate, LayoutDirectory, LayoutPass } from '../domain/ports.js'
import { layoutStatusReport, unmanagedLayoutReport } from '../domain/report.js'
import type { LayoutReport, LegRun, Route } from '../domain/schemas.js'
import { withheldBy, withheldReasons } from '../domain/withheld-reasons.js'
import type { Registry } from '../infra/registry.js'

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

  #current(phase: Phase, pass: LayoutPass | null, leg: Leg): Built {
    const { registry, state, gate } = this.#deps
    const rows = registry.snapshot()
    const inputs = [rows, pass, pass?.changes(), state.version, gate?.check(), leg.stateKey(), phase, this.#withheld, this.#onDisk]
    const built = this.#built
    if (built !== undefined && sameInputs(built.inputs, inputs)) return built
    const report = this.#build(phase, pass, leg, rows.routes)
    const counts: Record<string, number> = {}
    for (const row of Object.values(report.rows)) counts[row.layout] = (counts[row.layout] ?? 0) + 1
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
    const report = layoutStatusReport({ box: config.box, routes, pass, state, leg: leg.state() })
    return withheldReasons(report, this.#withheld, gate?.check() ?? null)
  }
}

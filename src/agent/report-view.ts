// The report as the agent serves it (design §6): the registry's rows at
// this tick, judged by the armed pass, with the reasons the last finished
// run withheld rows for; before the pass is published (recovery under way,
// or no activator armed), judged by what <data>/layout holds.
import type { Phase } from '../agent-api.js'
import type { Config } from '../config.js'
import type { IntentState } from '../domain/intent-state.js'
import type { Leg } from '../domain/leg.js'
import type { Result } from '../domain/modes.js'
import type { IsolationGate, LayoutDirectory, LayoutPass } from '../domain/ports.js'
import { layoutStatusReport, unmanagedLayoutReport } from '../domain/report.js'
import type { LayoutReport, LegRun } from '../domain/schemas.js'
import { withheldBy, withheldReasons } from '../domain/withheld-reasons.js'
import type { Registry } from '../infra/registry.js'

export interface ReportViewDeps {
  config: Config
  registry: Pick<Registry, 'snapshot'>
  layoutDir: LayoutDirectory
  state: IntentState
  gate: IsolationGate | null
}

export class ReportView {
  readonly #deps: ReportViewDeps
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
    this.#onDisk = { journals: new Set(journals), holds: new Set(holds) }
  }

  /** A run of the leg has finished: its withheld results are the rows' reasons until the next one finishes. */
  noteFinishedRun(run: LegRun): void {
    this.#withheld = withheldBy(run)
  }

  report(phase: Phase, pass: LayoutPass | null, leg: Leg): LayoutReport {
    const { config, registry, state, gate } = this.#deps
    const { routes } = registry.snapshot()
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

// The figures of a report (design §9, §7.3): rows by word, held, deferred,
// needing an operator, and the box summary when asked. No I/O.
import { summarize, type BoxSummary } from '../domain/box-summary.js'
import { countByCode, operatorRows } from '../domain/short-of-intent.js'
import type { IntentRecord, LayoutReport } from '../domain/schemas.js'

/** What a box summary is built with beside the report (box-summary.ts summarize). */
export interface SummaryAsk {
  intent: Pick<IntentRecord, 'id' | 'mode'> | null
  version: string
  at: string
  canStopAwake: boolean
}

/** What the row gauges (design §9) and the box summary (§7.3) take from a report. */
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

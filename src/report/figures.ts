// The figures of a report (design §9, §7.3): rows by word, held, deferred,
// needing an operator, and the box summary when asked. No I/O.
import { summarize, type BoxSummary } from '../domain/box-summary.js'
import { countByCode, operatorRows } from '../domain/short-of-intent.js'
import type { IntentRecord, LayoutReport } from '../domain/schemas.js'

/** What a box summary takes beside the report. */
export interface SummaryAsk {
  intent: Pick<IntentRecord, 'id' | 'mode'> | null
  version: string
  at: string
  canStopAwake: boolean
}

export interface ReportFigures {
  tag: string
  /** `rows{layout}` */
  counts: Record<string, number>
  /** `held_hosts` */
  held: number
  /** `deferred_hosts`: rows awake inside their grace. */
  deferred: number
  /** `rows_needing_operator{reason}` */
  needingOperator: Record<string, number>
  /** When one was asked for. */
  summary: BoxSummary | null
}

/** held says whether a hold marker holds a host. */
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

// The figures of a report (design §9, §7.3): rows by word, held, deferred,
// needing an operator, and the box summary when asked. No I/O.
import { summarize, type BoxSummary } from '../domain/box-summary.js'
import { countByCode } from '../domain/short-of-intent.js'
import type { IntentRecord, LayoutReport } from '../domain/schemas.js'
import type { RowTally } from './build.js'

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

/** From the tally the build gathered; only a summary walks the rows again. */
export function reportFigures(
  built: { tag: string; report: LayoutReport; tally: Readonly<RowTally> },
  ask: SummaryAsk | null,
): ReportFigures {
  const { tag, report, tally } = built
  const summary = ask === null ? null : summarize(report, ask.intent, ask.version, ask.at, ask.canStopAwake)
  const needingOperator = Object.fromEntries(countByCode(tally.operatorRows))
  return { tag, counts: { ...tally.counts }, held: tally.held, deferred: tally.deferred, needingOperator, summary }
}

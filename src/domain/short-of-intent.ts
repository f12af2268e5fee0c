// Rows a person must act on (design §6.2): rows the activator may not wake,
// or that are not where the intent wants them, for a reason nothing clears
// on its own. The report warns of them, `layoutd status --check` exits 1 on
// them, `rows_needing_operator` counts them; decided by code, never sentence.
import { FAILED_CODES } from './box-summary.js'
import { PASSING_CODES, type ReasonCode } from './reason-codes.js'
import type { LayoutReport, RowReport } from './schemas.js'

/**
 * The codes of a row that passes on its own, or is nobody's to act on: a
 * move under way, start-up not done, an awake tenant inside its grace, a
 * failed move the leg retries with backoff, a row no pass moves (no
 * activator, another supervisor's). Every other code needs a person: so a
 * new refusal counts until it is listed here as passing.
 */
const NOBODYS: readonly ReasonCode[] = ['recovery_pending', 'awake_grace', 'no_activator', 'not_managed', 'no_socket']
const ON_ITS_OWN: ReadonlySet<string> = new Set<string>([...PASSING_CODES, ...FAILED_CODES, ...NOBODYS])

/** A row of the report that needs a person, and why, by code. */
export interface OperatorRow {
  host: string
  code: ReasonCode
}

/** The row needs a person: it carries a reason that does not pass on its own. */
export function needsOperator(row: Pick<RowReport, 'code'>): row is { code: ReasonCode } {
  return row.code !== '' && !ON_ITS_OWN.has(row.code)
}

/** The rows of a report a person must act on, in the report's order. */
export function operatorRows(report: Pick<LayoutReport, 'rows'>): OperatorRow[] {
  const out: OperatorRow[] = []
  for (const [host, row] of Object.entries(report.rows)) if (needsOperator(row)) out.push({ host, code: row.code })
  return out
}

/** Those rows counted by code. */
export function countByCode(rows: readonly OperatorRow[]): Map<ReasonCode, number> {
  const counts = new Map<ReasonCode, number>()
  for (const r of rows) counts.set(r.code, (counts.get(r.code) ?? 0) + 1)
  return counts
}

/** The report's warning for rows a person must act on, or null when there are none. */
export function operatorWarning(rows: readonly OperatorRow[]): string | null {
  if (rows.length === 0) return null
  const byCode = [...countByCode(rows)].map(([code, n]) => `${n} ${code}`).join(', ')
  const rowWord = rows.length === 1 ? 'row needs' : 'rows need'
  return (
    `${rows.length} ${rowWord} an operator (${byCode}): nothing clears them on their own; ` +
    '`layoutd status --check` names them, docs/runbook.md#reason-codes says what to do'
  )
}

/** Adds the warning for rows a person must act on to a report, in place; returns the report. */
export function warnOfOperatorRows(report: LayoutReport): LayoutReport {
  const warning = operatorWarning(operatorRows(report))
  if (warning !== null) report.warnings.push(warning)
  return report
}

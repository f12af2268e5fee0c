// Rows a person must act on (design §6.2): rows whose reason nothing clears
// on its own. Decided by code, never by sentence.
import { FAILED_CODES } from './box-summary.js'
import { PASSING_CODES, type ReasonCode } from './reason-codes.js'
import type { LayoutReport, RowReport } from './schemas.js'

/** Pass on their own or are nobody's; any other code needs a person, a new one too. */
const NOBODYS: readonly ReasonCode[] = ['recovery_pending', 'awake_grace', 'no_activator', 'not_managed', 'no_socket']
const ON_ITS_OWN: ReadonlySet<string> = new Set<string>([...PASSING_CODES, ...FAILED_CODES, ...NOBODYS])

export interface OperatorRow {
  host: string
  code: ReasonCode
}

export function needsOperator(row: Pick<RowReport, 'code'>): row is { code: ReasonCode } {
  return row.code !== '' && !ON_ITS_OWN.has(row.code)
}

export function operatorRows(report: Pick<LayoutReport, 'rows'>): OperatorRow[] {
  const out: OperatorRow[] = []
  for (const [host, row] of Object.entries(report.rows)) if (needsOperator(row)) out.push({ host, code: row.code })
  return out
}

export function countByCode(rows: readonly OperatorRow[]): Map<ReasonCode, number> {
  const counts = new Map<ReasonCode, number>()
  for (const r of rows) counts.set(r.code, (counts.get(r.code) ?? 0) + 1)
  return counts
}

export function operatorWarning(rows: readonly OperatorRow[]): string | null {
  if (rows.length === 0) return null
  const byCode = [...countByCode(rows)].map(([code, n]) => `${n} ${code}`).join(', ')
  const rowWord = rows.length === 1 ? 'row needs' : 'rows need'
  return (
    `${rows.length} ${rowWord} an operator (${byCode}): nothing clears them on their own; ` +
    '`layoutd status --check` names them, docs/runbook.md#reason-codes says what to do'
  )
}

export function warnOfOperatorRows(report: LayoutReport): LayoutReport {
  const warning = operatorWarning(operatorRows(report))
  if (warning !== null) report.warnings.push(warning)
  return report
}

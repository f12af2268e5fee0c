// The report's withheld reasons (design §6): a row says why it did not
// move, not only what it is. Pure.
import type { Outcome, Result } from '../domain/modes.js'
import type { LayoutReport, LegRun } from '../domain/schemas.js'
import { warnOfOperatorRows } from '../domain/short-of-intent.js'

/** Outcomes that say why a row is not where the intent wants it. */
export const WITHHELD: ReadonlySet<Outcome> = new Set(['deferred', 'refused', 'failed', 'held'])

export function withheldBy(run: LegRun): Map<string, Result> {
  const out = new Map<string, Result>()
  for (const r of run.results) if (r.host !== '' && WITHHELD.has(r.outcome)) out.set(r.host, r)
  return out
}

/** Fills in empty reasons in place, from the last finished run: one under way has not reached every host. */
export function withheldReasons(
  report: LayoutReport,
  last: ReadonlyMap<string, Result>,
  gate: string | null,
): LayoutReport {
  for (const [host, row] of Object.entries(report.rows)) {
    if (row.reason !== '') continue
    if (row.layout === 'nested' && gate !== null) {
      row.code = 'gate_shut'
      row.reason = `isolation not ready: ${gate}`
      continue
    }
    const withheld = last.get(host)
    if (withheld !== undefined && (row.layout === 'flat' || row.layout === 'nested') && withheld.to !== row.layout) {
      row.code = withheld.code
      row.reason = withheld.reason
    }
  }
  return warnOfOperatorRows(report)
}

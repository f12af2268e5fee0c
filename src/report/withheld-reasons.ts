// The report's withheld reasons (design §6): a row says why it did not
// move, not only what it is. Pure.
import type { Outcome, Result } from '../domain/modes.js'
import type { LegRun, RowReport } from '../domain/schemas.js'

/** Outcomes that say why a row is not where the intent wants it. */
export const WITHHELD: ReadonlySet<Outcome> = new Set(['deferred', 'refused', 'failed', 'held'])

export function withheldBy(run: LegRun): Map<string, Result> {
  const out = new Map<string, Result>()
  for (const r of run.results) if (r.host !== '' && WITHHELD.has(r.outcome)) out.set(r.host, r)
  return out
}

/** The last finished run's withheld results, and why the isolation gate is shut (null while open). */
export interface RunReasons {
  last: ReadonlyMap<string, Result>
  gate: string | null
}

/** Fills in a row's empty reason in place, from the last finished run: one under way has not reached every host. */
export function withheldReason(host: string, row: RowReport, reasons: RunReasons): void {
  if (row.reason !== '') return
  if (row.layout === 'nested' && reasons.gate !== null) {
    row.code = 'gate_shut'
    row.reason = `isolation not ready: ${reasons.gate}`
    return
  }
  const withheld = reasons.last.get(host)
  if (withheld !== undefined && (row.layout === 'flat' || row.layout === 'nested') && withheld.to !== row.layout) {
    row.code = withheld.code
    row.reason = withheld.reason
  }
}

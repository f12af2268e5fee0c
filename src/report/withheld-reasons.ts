// The report's withheld reasons (design §6): a row says why it did not
// move, not only what it is. Pure: the agent hands in the last run's results.
import type { Outcome, Result } from '../domain/modes.js'
import type { LayoutReport, LegRun } from '../domain/schemas.js'
import { warnOfOperatorRows } from '../domain/short-of-intent.js'

/** Outcomes whose reason says why a row is not where the intent wants it. */
export const WITHHELD: ReadonlySet<Outcome> = new Set(['deferred', 'refused', 'failed', 'held'])

/** The results of a finished run that withheld a host, by host. */
export function withheldBy(run: LegRun): Map<string, Result> {
  const out = new Map<string, Result>()
  for (const r of run.results) if (r.host !== '' && WITHHELD.has(r.outcome)) out.set(r.host, r)
  return out
}

/**
 * Fills in the reason of every row with none: a nested row behind a shut
 * gate names the failed check; any other takes the reason the last
 * finished run withheld it for, while still short of where that run wanted
 * it (a run under way has not reached every host yet). Then warns of rows a
 * person must act on (short-of-intent.ts). Changes report in place.
 */
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

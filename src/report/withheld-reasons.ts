// The report's withheld reasons (design §6): a row says why it did not
// move, not only what it is. Pure: the agent keeps the last finished run's
// results and hands them in with the report and the isolation gate's answer.
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
 * Fills in the reason of every row that carries none of its own: a nested
 * row says it cannot wake while the isolation gate is shut, naming the
 * check that failed (gate is the gate's answer, null when open); any other
 * row takes the reason the last finished run withheld it for (`awake: 42m
 * of grace left`, a refusal, a failed stop), while it is still short of
 * where that run wanted it. The last finished run, not the one under way:
 * a run that has not reached a host yet has nothing to say about it.
 * Then, with every row's reason in, warns of the rows a person must act
 * on (short-of-intent.ts). Changes report in place and returns it.
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

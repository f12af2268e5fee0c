// A box's summary for the fleet, built from its own report, and what
// `layoutd fleet status` makes of them all: each box's verdict, the table's
// order and the summary line (design §7.3). The summary is what each agent
// publishes in the deploy store about itself (its label, version, the intent
// it has converged or is converging to, counts by word, held rows, its leg);
// the verdict is against the intent that addresses the box. Pure: the
// stores keep the summaries.
import { Type } from './typebox.js'
import type { Static } from 'typebox'
import type { IntentRecord, LayoutReport } from './schemas.js'
import { selectIntent } from './intent.js'
import { HOLD_CODES } from './reason-codes.js'

export const BoxSummary = Type.Object(
  {
    box: Type.String(),
    version: Type.String(),
    /** The id of the intent the box read last (converged or converging to); null when none addresses it. */
    intent: Type.Union([Type.String(), Type.Null()]),
    /** The report's mode: the intent the box last converged to. */
    mode: Type.String(),
    /** Every row is where the intent wants it, nothing held, no run under way or due. */
    converged: Type.Boolean(),
    counts: Type.Record(Type.String(), Type.Integer({ minimum: 0 })),
    held: Type.Integer({ minimum: 0 }),
    leg: Type.Object({
      running: Type.Boolean(),
      pending: Type.Boolean(),
      lastRunAt: Type.Union([Type.String(), Type.Null()]),
    }),
    /**
     * The box has an activator to ask to stop an awake instance (CARLOS_ACTIVATOR_URL set): a
     * forced intent can move its awake tenants. Absent in summaries of agents before this field.
     */
    canStopAwake: Type.Optional(Type.Boolean()),
    /** When the summary last changed (RFC 3339). */
    at: Type.String(),
    /** The directory store's stand-in for a lease: the summary is gone after this (RFC 3339). */
    expiresAt: Type.Optional(Type.String()),
  },
  { additionalProperties: false },
)
export type BoxSummary = Static<typeof BoxSummary>

/**
 * The report's rows counted by word, and the held ones: a held host reads `fenced`, its code the hold's
 * (design §1.1).
 */
function countRows(report: LayoutReport): { counts: Record<string, number>; held: number } {
  const counts: Record<string, number> = {}
  let held = 0
  for (const row of Object.values(report.rows)) {
    counts[row.layout] = (counts[row.layout] ?? 0) + 1
    if (row.layout === 'fenced' && row.code !== '' && HOLD_CODES.has(row.code)) held++
  }
  return { counts, held }
}

/** Every row is where the intent wants it, nothing held or fenced, no run under way or due. */
function isConverged(
  report: LayoutReport,
  wanted: string | undefined,
  counts: Record<string, number>,
  held: number,
): boolean {
  const { leg } = report
  const other = wanted === 'nested' ? 'flat' : wanted === 'flat' ? 'nested' : undefined
  const settled = !leg.running && !leg.pending && held === 0 && (counts.fenced ?? 0) === 0
  return report.mode === wanted && settled && (other === undefined || (counts[other] ?? 0) === 0)
}

/**
 * The box's summary from its report and the intent it read last (at: now, the caller's clock);
 * canStopAwake: whether the box has an activator to stop an awake instance with.
 */
export function summarize(
  report: LayoutReport,
  intent: Pick<IntentRecord, 'id' | 'mode'> | null,
  version: string,
  at: string,
  canStopAwake?: boolean,
): BoxSummary {
  const { counts, held } = countRows(report)
  const { leg } = report
  const converged = intent !== null && isConverged(report, intent.mode, counts, held)
  return {
    box: report.box,
    version,
    intent: intent?.id ?? null,
    mode: report.mode,
    converged,
    counts,
    held,
    leg: {
      running: leg.running,
      pending: leg.pending,
      lastRunAt: leg.lastRun?.finishedAt ?? leg.lastRun?.startedAt ?? null,
    },
    ...(canStopAwake === undefined ? {} : { canStopAwake }),
    at,
  }
}

/** Two summaries say the same thing (the time of the change aside): no need to publish again. */
export function sameSummary(a: BoxSummary | undefined, b: BoxSummary): boolean {
  if (a === undefined) return false
  const said = (s: BoxSummary) => JSON.stringify({ ...s, at: '', expiresAt: '' })
  return said(a) === said(b)
}

/** A box's line in `fleet status`: its summary, the intent addressing it, and the verdict. */
export interface FleetRow {
  summary: BoxSummary
  /** The id of the newest intent addressing the box; null when none does. */
  wants: string | null
  /** converged: to the intent that addresses it; converging: not yet; none: no intent addresses it. */
  state: 'converged' | 'converging' | 'none'
}

export interface FleetView {
  rows: FleetRow[]
  converged: number
  converging: number
  held: number
  /** Every live box has converged to the intent addressing it (and at least one box reported). */
  allConverged: boolean
  /** The newest fleet-wide intent, for the summary line. */
  fleetIntent: string | null
}

/** The fleet's table: boxes not yet converged first, then by label. records: sorted by id, newest last. */
export function fleetView(summaries: readonly BoxSummary[], records: readonly IntentRecord[]): FleetView {
  const rows = summaries.map((summary): FleetRow => {
    const read = selectIntent(records, summary.box)
    const wants = read.found ? read.intent.id : null
    const state = wants === null ? 'none' : summary.converged && summary.intent === wants ? 'converged' : 'converging'
    return { summary, wants, state }
  })
  const rank = { converging: 0, none: 1, converged: 2 } as const
  rows.sort(
    (a, b) =>
      rank[a.state] - rank[b.state] || (a.summary.box < b.summary.box ? -1 : a.summary.box > b.summary.box ? 1 : 0),
  )
  const fleetWide = [...records].reverse().find((r) => r.box === undefined)
  const converged = rows.filter((r) => r.state === 'converged').length
  return {
    rows,
    converged,
    converging: rows.filter((r) => r.state === 'converging').length,
    held: rows.reduce((n, r) => n + r.summary.held, 0),
    allConverged: rows.length > 0 && converged === rows.length,
    fleetIntent: fleetWide?.id ?? null,
  }
}

/** `96/100 converged to 2026…; 3 converging; 1 held rows`. */
export function summaryLine(v: FleetView): string {
  const target = v.fleetIntent === null ? 'the intents addressing them' : v.fleetIntent
  const none = v.rows.length - v.converged - v.converging
  return (
    `${v.converged}/${v.rows.length} converged to ${target}; ${v.converging} converging; ${v.held} held rows` +
    (none > 0 ? `; ${none} with no intent` : '')
  )
}

// A box's summary for the fleet, built from its own report, and what
// `layoutd fleet status` makes of them all: each box's verdict, the table's
// order and the summary line (design §7.3). Each agent publishes its own
// summary; the verdict is against the intent that addresses the box. Pure.
import { Type } from './typebox.js'
import type { Static } from 'typebox'
import type { IntentRecord, LayoutReport } from './schemas.js'
import { selectIntent } from './intent.js'
import type { UnreadableRecord } from './ports.js'
import { HOLD_CODES, PASSING_CODES, type ReasonCode } from './reason-codes.js'
import type { RolloutRecord } from './rollout.js'

/**
 * What the last run left short of the intent: deferred (awake, in grace), refused (nothing stopped),
 * failed (retried), held by code, kept (a journal an operator decides). Inside `leg`, which admits
 * unnamed fields, so an older `fleet status` still reads the summary (design §7.3).
 */
const Withheld = Type.Object({
  deferred: Type.Integer({ minimum: 0 }),
  refused: Type.Integer({ minimum: 0 }),
  failed: Type.Integer({ minimum: 0 }),
  kept: Type.Integer({ minimum: 0 }),
  heldBy: Type.Record(Type.String(), Type.Integer({ minimum: 0 })),
})
export type Withheld = Static<typeof Withheld>

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
      /** When the retry timer runs the leg again; null when none is due. Absent before this field. */
      retryAt: Type.Optional(Type.Union([Type.String(), Type.Null()])),
      /** Absent in summaries of agents before this field. */
      withheld: Type.Optional(Withheld),
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
 * A box whose agent is gone: since when, and how it went (`stopped`: its agent said so at a clean stop;
 * `expired`: its lease ran out, so it died or was cut off). Set by the store, never by the box.
 */
export const BoxGone = Type.Object(
  {
    since: Type.String(),
    how: Type.Union([Type.Literal('stopped'), Type.Literal('expired')]),
  },
  { additionalProperties: false },
)
export type BoxGone = Static<typeof BoxGone>

/**
 * What the store keeps of a box beyond its agent's life (design §7.3): its last summary, and, once its agent
 * is gone, since when. Kept until the box comes back or an operator forgets it (`fleet forget`).
 */
export const KeptBox = Type.Object(
  { summary: BoxSummary, gone: Type.Optional(BoxGone) },
  { additionalProperties: false },
)
export type KeptBox = Static<typeof KeptBox>

/** The codes of a move refused with nothing stopped (design §3 step 1). */
const REFUSED_CODES: ReadonlySet<string> = new Set<ReasonCode>(['gate_shut', 'socket_too_long', 'dest_taken'])

/** The codes of a failed move, which the leg retries. */
export const FAILED_CODES: ReadonlySet<string> = new Set<ReasonCode>([
  'stop_timeout',
  'stop_abandoned',
  'journal_not_written',
  'preflight_error',
  'dest_not_cleared',
  'dest_not_prepared',
  'rename_failed',
  'registry_not_updated',
  'move_interrupted',
  'finish_interrupted',
  'run_failed',
  'run_stopped',
])

/**
 * The report's rows counted by word, the held ones (a held host reads `fenced`, its code the hold's, design
 * §1.1), and what the last run withheld from where `wanted` puts a row.
 */
function countRows(
  report: LayoutReport,
  wanted: string | undefined,
): { counts: Record<string, number>; held: number; withheld: Withheld } {
  const counts: Record<string, number> = {}
  const withheld: Withheld = { deferred: 0, refused: 0, failed: 0, kept: 0, heldBy: {} }
  let held = 0
  const other = wanted === 'nested' ? 'flat' : wanted === 'flat' ? 'nested' : undefined
  for (const row of Object.values(report.rows)) {
    counts[row.layout] = (counts[row.layout] ?? 0) + 1
    const code = row.code
    if (row.layout === 'fenced' && code !== '') {
      if (HOLD_CODES.has(code)) {
        held++
        withheld.heldBy[code] = (withheld.heldBy[code] ?? 0) + 1
      } else if (!PASSING_CODES.has(code)) withheld.kept++
    } else if (row.layout === other) {
      if (code === 'awake_grace') withheld.deferred++
      else if (REFUSED_CODES.has(code)) withheld.refused++
      else if (FAILED_CODES.has(code)) withheld.failed++
    }
  }
  return { counts, held, withheld }
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
  const { counts, held, withheld } = countRows(report, intent?.mode)
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
      retryAt: leg.retryAt,
      withheld,
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
  /**
   * converged: to the intent that addresses it; converging: not yet; none: no intent addresses it;
   * unreadable: a record in the store cannot be read, so no box can read its intent; gone: its agent is
   * gone, the summary is its last.
   */
  state: 'converged' | 'converging' | 'none' | 'unreadable' | 'gone'
  /** Why what remains of the box needs a person (held, refused, kept, foreign rows), or null when not. */
  needs: string | null
  /** Since when and how the box's agent is gone; null while it is live. */
  gone: BoxGone | null
}

export interface FleetView {
  rows: FleetRow[]
  converged: number
  converging: number
  held: number
  /** Boxes whose agent is gone (their last summary shown). */
  gone: number
  /** Every live box has converged to the intent addressing it (and at least one box reported). */
  allConverged: boolean
  /** The newest fleet-wide intent. */
  fleetIntent: string | null
  /** The records that cannot be read (each makes every box's intent unreadable). */
  unreadable: UnreadableRecord[]
}

/**
 * Why a box short of its intent waits on a person, or null: it has read the intent, its leg is idle,
 * nothing is deferred or failing, and every row left short of the intent is held, refused or
 * fenced for a kept journal. Foreign and conflicting rows are named beside them. A summary of an agent
 * before `withheld` says nothing, so null.
 */
export function needsPerson(summary: BoxSummary, wants: string | null): string | null {
  const w = summary.leg.withheld
  if (w === undefined || summary.converged || wants === null || summary.intent !== wants) return null
  if (onItsWay(summary.leg, w)) return null
  const { counts } = summary
  const other = summary.mode === 'nested' ? 'flat' : summary.mode === 'flat' ? 'nested' : undefined
  const short = (other === undefined ? 0 : (counts[other] ?? 0)) + (counts.fenced ?? 0)
  const held = Object.values(w.heldBy).reduce((a, b) => a + b, 0)
  if (short === 0 || short !== held + w.refused + w.kept) return null
  const codes = Object.entries(w.heldBy)
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([code, n]) => `${n} ${code}`)
  const parts: Array<[number, string]> = [
    [held, `held (${codes.join(', ')})`],
    [w.refused, 'refused'],
    [w.kept, 'fenced by a kept journal'],
    [counts.foreign ?? 0, 'foreign'],
    [counts.conflict ?? 0, 'conflict'],
  ]
  return parts
    .filter(([n]) => n > 0)
    .map(([n, what]) => `${n} ${what}`)
    .join(', ')
}

/**
 * A run under way or due, or a row deferred or failing (which the retry timer comes back for): the box
 * still moves on its own. A retry due with neither is the leg looking at its holds again, which moves
 * nothing until a person clears them.
 */
function onItsWay(leg: BoxSummary['leg'], w: Withheld): boolean {
  return leg.running || leg.pending || w.deferred > 0 || w.failed > 0
}

/**
 * The fleet's table: boxes gone or not yet converged first, then by label. records: sorted by id, newest
 * last; unreadable: the records that cannot be read; gone: the boxes whose agent is gone, by label (their
 * summaries are their last).
 */
export function fleetView(
  summaries: readonly BoxSummary[],
  records: readonly IntentRecord[],
  unreadable: readonly UnreadableRecord[] = [],
  gone: ReadonlyMap<string, BoxGone> = new Map(),
): FleetView {
  const rows = summaries.map((summary): FleetRow => {
    const read = selectIntent(records, summary.box)
    const wants = read.found ? read.intent.id : null
    const left = gone.get(summary.box) ?? null
    const state =
      left !== null
        ? 'gone'
        : unreadable.length > 0
          ? 'unreadable'
          : wants === null
            ? 'none'
            : summary.converged && summary.intent === wants
              ? 'converged'
              : 'converging'
    const needs = state === 'converging' ? needsPerson(summary, wants) : null
    return { summary, wants, state, needs, gone: left }
  })
  const rank = { gone: 0, unreadable: 0, converging: 0, none: 1, converged: 2 } as const
  rows.sort(
    (a, b) =>
      rank[a.state] - rank[b.state] || (a.summary.box < b.summary.box ? -1 : a.summary.box > b.summary.box ? 1 : 0),
  )
  const fleetWide = [...records].reverse().find((r) => r.box === undefined)
  const converged = rows.filter((r) => r.state === 'converged').length
  return {
    rows,
    converged,
    converging: rows.filter((r) => r.state === 'converging' || r.state === 'unreadable').length,
    held: rows.reduce((n, r) => n + r.summary.held, 0),
    gone: rows.filter((r) => r.state === 'gone').length,
    allConverged: rows.length > 0 && converged === rows.length,
    fleetIntent: fleetWide?.id ?? null,
    unreadable: [...unreadable],
  }
}

/** What `fleet status` and the fleet page call a box: one word for one state, on both (design §7.3). */
export type BoxWord = 'converged' | 'converging' | 'running' | 'needs you' | 'no intent' | 'unreadable' | 'gone'

/**
 * The box's word: `running` a run under way toward its intent; `needs you` what remains waits on a person
 * (needsPerson); `converging` it is on its way on its own (a run due, a row deferred or retried).
 */
export function boxWord(r: FleetRow): BoxWord {
  if (r.state === 'gone') return 'gone'
  if (r.state === 'converged') return 'converged'
  if (r.state === 'none') return 'no intent'
  if (r.state === 'unreadable') return 'unreadable'
  return r.summary.leg.running ? 'running' : r.needs !== null ? 'needs you' : 'converging'
}

/** `its lease expired` or `its agent stopped`: how a gone box went. */
export function howGone(g: BoxGone): string {
  return g.how === 'stopped' ? 'its agent stopped' : 'its lease expired'
}

/**
 * Why the rollout in play holds the fleet short of where it is headed, or null: paused, frozen or aborted
 * (a person decides what comes next), unless a newer fleet-wide record has superseded it. records: sorted
 * by id, newest last. A running rollout is on its way; a done or reverted one has ended.
 */
export function rolloutStopped(r: RolloutRecord | undefined, records: readonly IntentRecord[]): string | null {
  if (r === undefined || (r.state !== 'paused' && r.state !== 'frozen' && r.state !== 'aborted')) return null
  if (records.some((x) => x.box === undefined && x.id > r.id)) return null
  return `rollout ${r.id} is ${r.state}${r.reason === '' ? '' : `: ${r.reason}`}`
}

/** When the open wave's progress deadline falls (RFC 3339): its opening plus the deadline; null when unknown. */
export function deadlineAt(r: Pick<RolloutRecord, 'waveOpenedAt' | 'progressDeadlineMs'>): string | null {
  const at = Date.parse(r.waveOpenedAt) + r.progressDeadlineMs
  return Number.isFinite(at) ? new Date(at).toISOString() : null
}

/** The rollout in play is under way (running, not superseded): the fleet is still headed for its intent. */
export function rolloutRunning(r: RolloutRecord | undefined, records: readonly IntentRecord[]): boolean {
  if (r === undefined || r.state !== 'running') return false
  return !records.some((x) => x.box === undefined && x.id > r.id)
}

/**
 * `96/100 converged to 2026…; 3 converging; 1 held rows`: the id each converged box is on, counted by
 * id when they differ (a box with an intent of its own).
 */
export function summaryLine(v: FleetView): string {
  const on = new Map<string, number>()
  for (const r of v.rows) if (r.state === 'converged' && r.wants !== null) on.set(r.wants, (on.get(r.wants) ?? 0) + 1)
  const ids = [...on].sort(([a], [b]) => (a < b ? -1 : 1))
  const [only] = ids
  const target =
    ids.length === 0
      ? (v.fleetIntent ?? 'the intents addressing them')
      : ids.length === 1 && only !== undefined
        ? only[0]
        : ids.map(([id, n]) => `${id} (${n})`).join(', ')
  const none = v.rows.filter((r) => r.state === 'none').length
  return (
    `${v.converged}/${v.rows.length} converged to ${target}; ${v.converging} converging; ${v.held} held rows` +
    (none > 0 ? `; ${none} with no intent` : '') +
    (v.gone > 0 ? `; ${v.gone} gone` : '')
  )
}

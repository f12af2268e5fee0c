// A box's summary for the fleet, and what `layoutd fleet status` makes of
// them all (design §7.3). Pure.
import { Type } from './typebox.js'
import type { Static } from 'typebox'
import type { IntentRecord, LayoutReport } from './schemas.js'
import { selectIntent } from './intent.js'
import type { UnreadableRecord } from './ports.js'
import { HOLD_CODES, PASSING_CODES, type ReasonCode } from './reason-codes.js'
import type { RolloutRecord } from './rollout.js'

/** In `leg`, which admits unnamed fields, so an older reader still reads the summary. */
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
    /** The intent read last; null when none addresses the box. */
    intent: Type.Union([Type.String(), Type.Null()]),
    mode: Type.String(),
    /** Every row where the intent wants it, none held or fenced, no run under way or due. */
    converged: Type.Boolean(),
    counts: Type.Record(Type.String(), Type.Integer({ minimum: 0 })),
    held: Type.Integer({ minimum: 0 }),
    leg: Type.Object({
      running: Type.Boolean(),
      pending: Type.Boolean(),
      lastRunAt: Type.Union([Type.String(), Type.Null()]),
      /** This, withheld and canStopAwake are absent from older agents. */
      retryAt: Type.Optional(Type.Union([Type.String(), Type.Null()])),
      withheld: Type.Optional(Withheld),
    }),
    /** An activator can stop awake instances, so a forced intent moves them. */
    canStopAwake: Type.Optional(Type.Boolean()),
    at: Type.String(),
    /** The directory store's stand-in for a lease. */
    expiresAt: Type.Optional(Type.String()),
  },
  { additionalProperties: false },
)
export type BoxSummary = Static<typeof BoxSummary>

/** `expired`: its lease ran out. Set by the store, never the box. */
export const BoxGone = Type.Object(
  {
    since: Type.String(),
    how: Type.Union([Type.Literal('stopped'), Type.Literal('expired')]),
  },
  { additionalProperties: false },
)
export type BoxGone = Static<typeof BoxGone>

/** Kept past its agent's life, until it returns or `fleet forget` (design §7.3). */
export const KeptBox = Type.Object(
  { summary: BoxSummary, gone: Type.Optional(BoxGone) },
  { additionalProperties: false },
)
export type KeptBox = Static<typeof KeptBox>

/** design §3 step 1 */
const REFUSED_CODES: ReadonlySet<string> = new Set<ReasonCode>(['gate_shut', 'socket_too_long', 'dest_taken'])

/** The leg retries these. */
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

/** A held row reads `fenced`, its code the hold's (design §1.1). */
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

/** Equal but for the time: nothing to publish. */
export function sameSummary(a: BoxSummary | undefined, b: BoxSummary): boolean {
  if (a === undefined) return false
  const said = (s: BoxSummary) => JSON.stringify({ ...s, at: '', expiresAt: '' })
  return said(a) === said(b)
}

export interface FleetRow {
  summary: BoxSummary
  wants: string | null
  /** unreadable: a record cannot be read, so no box can read its intent. */
  state: 'converged' | 'converging' | 'none' | 'unreadable' | 'gone'
  needs: string | null
  gone: BoxGone | null
}

export interface FleetView {
  rows: FleetRow[]
  converged: number
  converging: number
  held: number
  gone: number
  allConverged: boolean
  fleetIntent: string | null
  /** Each makes every box's intent unreadable. */
  unreadable: UnreadableRecord[]
}

/** Why a box waits on a person: idle, nothing deferred or failing, every row short held, refused or kept. */
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

/** A retry due alone only looks at holds again, which wait on a person. */
function onItsWay(leg: BoxSummary['leg'], w: Withheld): boolean {
  return leg.running || leg.pending || w.deferred > 0 || w.failed > 0
}

/** Gone and unconverged boxes first, then by label. records: by id, newest last. */
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

/** One word for one state, in the CLI and on the page (design §7.3). */
export type BoxWord = 'converged' | 'converging' | 'running' | 'needs you' | 'no intent' | 'unreadable' | 'gone'

export function boxWord(r: FleetRow): BoxWord {
  if (r.state === 'gone') return 'gone'
  if (r.state === 'converged') return 'converged'
  if (r.state === 'none') return 'no intent'
  if (r.state === 'unreadable') return 'unreadable'
  return r.summary.leg.running ? 'running' : r.needs !== null ? 'needs you' : 'converging'
}

export function howGone(g: BoxGone): string {
  return g.how === 'stopped' ? 'its agent stopped' : 'its lease expired'
}

/** Paused, frozen or aborted, and not superseded by a newer fleet-wide record. */
export function rolloutStopped(r: RolloutRecord | undefined, records: readonly IntentRecord[]): string | null {
  if (r === undefined || (r.state !== 'paused' && r.state !== 'frozen' && r.state !== 'aborted')) return null
  if (records.some((x) => x.box === undefined && x.id > r.id)) return null
  return `rollout ${r.id} is ${r.state}${r.reason === '' ? '' : `: ${r.reason}`}`
}

export function deadlineAt(r: Pick<RolloutRecord, 'waveOpenedAt' | 'progressDeadlineMs'>): string | null {
  const at = Date.parse(r.waveOpenedAt) + r.progressDeadlineMs
  return Number.isFinite(at) ? new Date(at).toISOString() : null
}

export function rolloutRunning(r: RolloutRecord | undefined, records: readonly IntentRecord[]): boolean {
  if (r === undefined || r.state !== 'running') return false
  return !records.some((x) => x.box === undefined && x.id > r.id)
}

/** `96/100 converged to 2026…; 3 converging; 1 held rows`, by id when they differ. */
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

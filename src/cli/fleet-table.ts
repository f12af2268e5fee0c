// What `layoutd fleet status` prints (design §7.3): the rollout and
// unreadable records, the boxes (gone and unconverged first) with their
// words and row counts, the summary line and what stuck boxes need; cut to
// a screen when given one.
import {
  boxWord,
  deadlineAt,
  howGone,
  rolloutRunning,
  rolloutStopped,
  summaryLine,
  type FleetRow,
  type FleetView,
} from '../domain/box-summary.js'
import { progressLine, type BoxProgress, type RolloutRecord } from '../domain/rollout.js'
import type { IntentRecord } from '../domain/schemas.js'
import { screenLines } from './status-view.js'
import { formatTable } from './table.js'

export interface FleetRead {
  view: FleetView
  /** Newest last; the rollout in play is judged against them. */
  records: IntentRecord[]
  /** The rollout the active pointer names, with its boxes' progress. */
  rollout: { record: RolloutRecord; progress: ReadonlyMap<string, BoxProgress> } | undefined
}

/** A stamp this far ahead is not said to be: two clocks never agree. */
const CLOCK_TOLERANCE_MS = 10_000

/** `12s ago`, `4m ago`, `3h ago`; `-` for none; one ahead of this clock says so. */
export function ago(iso: string | null, now: number): string {
  if (iso === null) return '-'
  const ms = now - Date.parse(iso)
  if (!Number.isFinite(ms)) return iso
  if (ms < -CLOCK_TOLERANCE_MS) return `${span(-ms)} ahead of this clock`
  const s = Math.max(0, Math.round(ms / 1000))
  return `${span(s * 1000)} ago`
}

function span(ms: number): string {
  const s = Math.round(ms / 1000)
  return s < 120 ? `${s}s` : s < 7200 ? `${Math.round(s / 60)}m` : `${Math.round(s / 3600)}h`
}

/** `deadline in 4m (at T)`, or `deadline passed 2m ago (at T)`. */
export function deadlineLine(r: RolloutRecord, now: number): string {
  const iso = deadlineAt(r)
  if (iso === null) return `deadline unknown (wave opened ${r.waveOpenedAt})`
  const at = Date.parse(iso)
  return at >= now ? `deadline in ${span(at - now)} (at ${iso})` : `deadline passed ${span(now - at)} ago (at ${iso})`
}

/** With its deadline while it runs or is paused; '' when none is in play. */
export function rolloutLine(read: FleetRead, now: number): string {
  const r = read.rollout?.record
  if (r === undefined || read.rollout === undefined) return ''
  const inPlay = rolloutRunning(r, read.records) || rolloutStopped(r, read.records) !== null
  if (!inPlay) return ''
  const deadline = r.state === 'running' || r.state === 'paused' ? `; ${deadlineLine(r, now)}` : ''
  return `${progressLine(r, read.rollout.progress)}${deadline}\n`
}

const HEAD = [
  'BOX',
  'INTENT',
  'MODE',
  'STATE',
  'NESTED',
  'FLAT',
  'FENCED',
  'DEFERRED',
  'HELD',
  'REFUSED',
  'FAILED',
  'SUMMARY',
  'LAST RUN',
]

function tableRow(r: FleetRow, now: number): string[] {
  const s = r.summary
  const stale = r.wants !== null && s.intent !== r.wants ? ` (box read ${s.intent ?? 'none'})` : ''
  const n = (w: string) => String(s.counts[w] ?? 0)
  // A box of a build before `withheld` does not say: `-`.
  const w = s.leg.withheld
  const of = (k: 'deferred' | 'refused' | 'failed') => (w === undefined ? '-' : String(w[k]))
  return [
    s.box,
    `${r.wants ?? '-'}${stale}`,
    s.mode,
    boxWord(r),
    n('nested'),
    n('flat'),
    n('fenced'),
    of('deferred'),
    String(s.held),
    of('refused'),
    of('failed'),
    ago(s.at, now),
    ago(s.leg.lastRunAt, now),
  ]
}

/** What a gone box's line below the table says. */
export function goneLine(r: FleetRow): string {
  if (r.gone === null) return ''
  const box = r.summary.box
  return (
    `${box} gone since ${r.gone.since} (${howGone(r.gone)}): its last summary is shown; ` +
    `bring its agent back, or \`layoutd fleet forget ${box}\` once it is retired\n`
  )
}

export interface Fit {
  rows: number
  columns: number
}

const cut = (line: string, columns: number) => [...line].slice(0, columns).join('')

/** fit cuts the table to a screen, the head and summary line kept whole. */
export function formatFleet(read: FleetRead, now: number, fit?: Fit): string {
  const v = read.view
  const above = v.unreadable.map(
    (u) =>
      `intent record ${u.id} cannot be read (${u.where}: ${u.why}): no box can read its intent until it is ` +
      `quarantined (layoutd intent quarantine ${u.id} --record MODE --fleet)\n`,
  )
  const head = `${rolloutLine(read, now)}${above.join('')}`
  const table = formatTable(
    HEAD,
    v.rows.map((r) => tableRow(r, now)),
  ).split('\n')
  table.pop()
  const below =
    `\n${summaryLine(v)}\n` +
    v.rows.map(goneLine).join('') +
    v.rows
      .filter((r) => r.needs !== null)
      .map((r) => `${r.summary.box} needs you: ${r.needs}\n`)
      .join('')
  if (fit === undefined) return `${head}${table.map((l) => `${l}\n`).join('')}${below}`
  return fitted(head, table, below, fit)
}

/** Rows that do not fit (the converged, last) are counted as `… N more boxes`. */
function fitted(head: string, table: string[], below: string, fit: Fit): string {
  const { rows, columns } = fit
  const tail = below.split('\n').slice(0, 3).join('\n')
  const room = Math.max(2, rows - screenLines(head, columns) - screenLines(`${tail}\n`, columns) - 2)
  let shown = table
  let more = ''
  if (table.length > room) {
    shown = table.slice(0, room - 1)
    more = `… ${table.length - shown.length} more boxes (\`layoutd fleet status\` lists them all)\n`
  }
  const lines = (text: string) =>
    text
      .split('\n')
      .slice(0, -1)
      .map((l) => `${cut(l, columns)}\n`)
      .join('')
  return `${lines(head)}${shown.map((l) => `${cut(l, columns)}\n`).join('')}${lines(more)}${lines(`${tail}\n`)}`
}

// What an intent command would do, decided before anything is written
// (design §8): `intent migrate|revert --dry-run` and `intent prune`. Pure.
import type { BoxSummary } from './box-summary.js'
import { selectIntent } from './intent.js'
import type { Mode } from './modes.js'
import { printable } from './printable.js'
import type { IntentRecord, LayoutReport } from './schemas.js'

export interface DryRun {
  move: string[]
  unchanged: string[]
  withheld: Array<{ host: string; word: string; reason: string }>
}

export function dryRun(report: LayoutReport, mode: Mode): DryRun {
  const from = mode === 'nested' ? 'flat' : 'nested'
  const out: DryRun = { move: [], unchanged: [], withheld: [] }
  for (const host of Object.keys(report.rows).sort()) {
    const row = report.rows[host]
    if (row === undefined) continue
    if (row.layout === from) out.move.push(host)
    else if (row.layout === mode) out.unchanged.push(host)
    else out.withheld.push({ host, word: row.layout, reason: row.reason })
  }
  return out
}

export function formatDryRun(box: string, mode: Mode, d: DryRun): string {
  const lines = [
    `box ${box} would converge to ${mode}: ` +
      `${d.move.length} to move, ${d.unchanged.length} already ${mode}, ${d.withheld.length} withheld`,
  ]
  for (const h of d.move) lines.push(`  move      ${h}`)
  for (const w of d.withheld) lines.push(`  withheld  ${printable(w.host)} (${w.word}): ${printable(w.reason)}`)
  return `${lines.join('\n')}\n`
}

/** From the counts another box published; its own --dry-run names the rows. */
export function formatSummaryDryRun(summary: BoxSummary, mode: Mode): string {
  const from = mode === 'nested' ? 'flat' : 'nested'
  const count = (word: string) => summary.counts[word] ?? 0
  const others = Object.keys(summary.counts)
    .filter((word) => word !== from && word !== mode && count(word) > 0)
    .sort()
  const withheld = others.reduce((n, word) => n + count(word), 0)
  const words = others.length === 0 ? '' : ` (${others.map((word) => `${count(word)} ${word}`).join(', ')})`
  return (
    `box ${summary.box}, from the summary it published at ${summary.at}: up to ${count(from)} to move, ` +
    `${count(mode)} already ${mode}, ${withheld} withheld${words}; run --dry-run there to see its rows\n`
  )
}

export interface PrunePlan {
  remove: string[]
  kept: Array<{ id: string; why: string }>
}

/** All but the newest keep, never the newest addressing any box or the fleet, nor one a box is on. */
export function prunePlan(records: readonly IntentRecord[], keep: number, boxes: readonly BoxSummary[]): PrunePlan {
  const why = new Map<string, string>()
  const mark = (id: string | undefined, reason: string) => {
    if (id !== undefined && !why.has(id)) why.set(id, reason)
  }
  records.slice(Math.max(0, records.length - keep)).forEach((r) => mark(r.id, `one of the newest ${keep}`))
  const fleetWide = [...records].reverse().find((r) => r.box === undefined)
  mark(fleetWide?.id, 'the newest addressing the whole fleet')
  const labels = new Set<string>([
    ...records.flatMap((r) => (r.box === undefined ? [] : [r.box])),
    ...boxes.map((b) => b.box),
  ])
  for (const label of [...labels].sort()) {
    const read = selectIntent(records, label)
    if (read.found) mark(read.intent.id, `the newest addressing box ${label}`)
  }
  for (const b of boxes)
    if (b.intent !== null)
      mark(b.intent, `box ${b.box} reports it ${b.converged ? 'converged' : 'is converging'} to it`)
  const ids = new Set(records.map((r) => r.id))
  return {
    remove: records.filter((r) => !why.has(r.id)).map((r) => r.id),
    kept: [...why].filter(([id]) => ids.has(id)).map(([id, w]) => ({ id, why: w })),
  }
}

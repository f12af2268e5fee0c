// What `layoutd status` prints (design §8): the summary line, warnings, the
// rows table and one host with what to do. Pure given the time; colour is
// the caller's choice.
import type { LayoutReport, LegRun, LegState, RowReport } from '../domain/schemas.js'
import { hostsReached } from '../domain/leg.js'
import { printable } from '../domain/printable.js'
import { ADVICE } from './advice.js'
import { formatTable } from './table.js'

/** In the summary's order: green first, then those that want an operator. */
export const ROW_WORDS = ['nested', 'flat', 'fenced', 'conflict', 'foreign', 'external'] as const

/** Green is done, yellow waits, red wants an operator. */
const WORD_COLOUR: Record<string, string> = {
  nested: '32',
  flat: '32',
  fenced: '33',
  held: '33',
  deferred: '33',
  conflict: '31',
  foreign: '31',
  refused: '31',
  failed: '31',
  unreadable: '31',
  external: '2',
}

export type Paint = (word: string, text?: string) => string

export const plain: Paint = (word, text = word) => text

export const ansi: Paint = (word, text = word) => {
  const code = WORD_COLOUR[word]
  return code === undefined ? text : `\x1b[${code}m${text}\x1b[0m`
}

/** Only on a terminal, never with NO_COLOR set (https://no-color.org). */
export function wantsColour(stream: { isTTY?: boolean }, environ: NodeJS.ProcessEnv): boolean {
  return stream.isTTY === true && environ.NO_COLOR === undefined
}

/** 45s, 9m, 2h 5m, 3d. */
export function span(ms: number): string {
  const s = Math.floor(Math.max(0, ms) / 1000)
  if (s < 60) return `${s}s`
  const m = Math.floor(s / 60)
  if (m < 60) return `${m}m`
  const h = Math.floor(m / 60)
  if (h < 48) return m % 60 === 0 ? `${h}h` : `${h}h ${m % 60}m`
  return `${Math.floor(h / 24)}d`
}

/** `in 9m` or `2m ago`, from an RFC 3339 stamp. */
export function relative(iso: string, now: number): string {
  const at = Date.parse(iso)
  if (Number.isNaN(at)) return iso
  return at >= now ? `in ${span(at - now)}` : `${span(now - at)} ago`
}

/** `2 moved, 1 refused`, in the order they came. */
export function summarize(results: LegRun['results'], paint: Paint = plain): string {
  const counts = new Map<string, number>()
  for (const r of results) counts.set(r.outcome, (counts.get(r.outcome) ?? 0) + 1)
  if (counts.size === 0) return 'no host to move'
  return [...counts].map(([outcome, n]) => paint(outcome, `${n} ${outcome}`)).join(', ')
}

/** `5 rows: 3 nested, 1 flat, 1 fenced`. */
export function countRows(rows: Record<string, RowReport>, paint: Paint = plain): string {
  const counts = new Map<string, number>()
  for (const row of Object.values(rows)) counts.set(row.layout, (counts.get(row.layout) ?? 0) + 1)
  const total = Object.keys(rows).length
  const order = [
    ...ROW_WORDS,
    ...[...counts.keys()].filter((w) => !(ROW_WORDS as readonly string[]).includes(w)).sort(),
  ]
  const parts = order.filter((w) => counts.has(w)).map((w) => paint(w, `${counts.get(w)} ${w}`))
  return `${total} row${total === 1 ? '' : 's'}${parts.length > 0 ? `: ${parts.join(', ')}` : ''}`
}

/** What the leg does now, its last run, its next retry. */
export function describeLeg(leg: LegState, now: number, paint: Paint = plain): string {
  const parts: string[] = []
  const run = leg.lastRun
  if (leg.running) {
    const done = run !== null && run.finishedAt === null ? hostsReached(run.results) : 0
    const since = run !== null && run.finishedAt === null ? `, started ${relative(run.startedAt, now)}` : ''
    parts.push(
      `running (${done} host${done === 1 ? '' : 's'} done${since})${leg.pending ? ', another run pending' : ''}`,
    )
  } else parts.push(leg.pending ? 'pending' : 'idle')
  if (run !== null && run.finishedAt !== null)
    parts.push(`last run ${relative(run.finishedAt, now)} (${summarize(run.results, paint)})`)
  if (leg.retryAt !== null)
    parts.push(Date.parse(leg.retryAt) > now ? `retry ${relative(leg.retryAt, now)}` : 'retry due')
  return parts.join(', ')
}

function describeIntent(r: LayoutReport, paint: Paint): string {
  return `intent ${paint(r.mode)}${r.default ? ' (nested by default)' : ''}`
}

/** Box, intent, rows by word, leg. */
export function summaryLine(r: LayoutReport, now: number, paint: Paint = plain): string {
  return (
    `box ${printable(r.box)}  ${describeIntent(r, paint)}  ${countRows(r.rows, paint)}  ` +
    `leg ${describeLeg(r.leg, now, paint)}\n`
  )
}

/** Rows that need nothing: where the intent wants them, or not the pass's (external). */
const CLEAN_WORDS: ReadonlySet<string> = new Set(['nested', 'flat', 'external'])

/** Any other word, or any reason's code. */
export function isProblem(row: RowReport): boolean {
  return !CLEAN_WORDS.has(row.layout) || row.code !== ''
}

export interface ReportView {
  problems?: boolean
  fit?: { rows: number; columns: number }
}

const cut = (line: string, columns: number) => [...line].slice(0, columns).join('')

export function screenSize(stream: NodeJS.WritableStream): { rows: number; columns: number } | undefined {
  const { rows, columns } = stream as { rows?: number; columns?: number }
  return rows !== undefined && columns !== undefined && rows > 0 && columns > 0 ? { rows, columns } : undefined
}

/** The terminal lines a text of whole lines takes at this width. */
export function screenLines(text: string, columns: number): number {
  if (text === '') return 0
  return text
    .replace(/\n$/, '')
    .split('\n')
    .reduce((n, line) => n + Math.max(1, Math.ceil([...line].length / Math.max(1, columns))), 0)
}

/** Warnings come before the rows, so rows never bury them. */
export function formatReport(r: LayoutReport, now: number, paint: Paint = plain, view: ReportView = {}): string {
  let head = summaryLine(r, now, paint)
  if (r.defaultBlocked !== '') head += `default: ${printable(r.defaultBlocked)}\n`
  for (const warning of r.warnings) head += `warning: ${printable(warning)}\n`
  const all = Object.keys(r.rows).sort()
  const hosts = view.problems === true ? all.filter((h) => isProblem(r.rows[h] as RowReport)) : all
  if (view.problems === true) head += `${hosts.length} of ${all.length} rows not clean\n`
  if (hosts.length === 0) return head
  const table = formatTable(
    ['HOST', 'LAYOUT', 'REASON', 'NOTE'],
    hosts.map((host) => {
      const row = r.rows[host]
      return [host, row?.layout ?? '', row?.reason ?? '', row?.note ?? '']
    }),
  ).split('\n')
  table.pop()
  let shown = table
  let more = ''
  if (view.fit !== undefined) {
    const { rows, columns } = view.fit
    // The blank line before the table, the watch's footer and the `… N more` line.
    const room = Math.max(2, rows - screenLines(head, columns) - 3)
    if (table.length > room) {
      shown = table.slice(0, room - 1)
      more = `… ${table.length - shown.length} more rows (\`layoutd status --problems\` lists the rows not clean)`
      more = `${cut(more, columns)}\n`
    }
    shown = shown.map((line) => cut(line, columns))
  }
  // Painted after the padding and the cut, so colour never shifts a column.
  const body = shown.map((line, i) =>
    i === 0 ? line : paintColumn(line, hosts[i - 1] ?? '', r.rows[hosts[i - 1] ?? '']?.layout ?? '', paint),
  )
  return `${head}\n${body.map((line) => `${line}\n`).join('')}${more}`
}

function paintColumn(line: string, host: string, word: string, paint: Paint): string {
  const shown = printable(host)
  if (word === '' || !line.startsWith(shown)) return line
  const at = line.indexOf(word, shown.length)
  return at < 0 || at + word.length > line.length
    ? line
    : line.slice(0, at) + paint(word) + line.slice(at + word.length)
}

/** By row word; green words need nothing. */
export const RUNBOOK: Record<string, string> = {
  fenced: 'docs/runbook.md#fenced',
  conflict: 'docs/runbook.md#conflict',
  foreign: 'docs/runbook.md#foreign',
  external: 'docs/runbook.md#external',
  held: 'docs/runbook.md#clear-a-hold',
  journal: 'docs/runbook.md#a-kept-journal',
  unreadable: 'docs/runbook.md#unreadable',
}

/** The runbook's advice for the row's code, else by its word. */
export function whatToDo(row: RowReport, has: { journal: boolean; hold: boolean }, mode: string): string {
  if (has.hold && row.code === '')
    return `the host is held after a refused move: clear the hold once the reason is fixed (${RUNBOOK.held})`
  if (mode === 'unreadable')
    return `the intent cannot be read, so nothing moves: make it readable (${RUNBOOK.unreadable})`
  if (row.code !== '') return ADVICE[row.code]
  if (has.journal) return `recovery kept the journal: finish the move by hand (${RUNBOOK.journal})`
  const doc = RUNBOOK[row.layout]
  if (doc !== undefined) return `see ${doc}`
  if (
    (row.layout === 'flat' || row.layout === 'nested') &&
    (mode === 'flat' || mode === 'nested') &&
    row.layout !== mode
  )
    return (
      `nothing yet: the intent wants it ${mode}, and the leg moves it on a run ` +
      '(`layoutd converge --wait` asks for one now; an awake tenant waits out its grace: docs/runbook.md#deferred)'
    )
  if (row.reason !== '')
    return (
      'nothing yet: the leg comes back for it on its own (`layoutd converge --wait` to ask now); ' +
      'docs/runbook.md#outcomes'
    )
  return 'nothing: the row is where the intent wants it'
}

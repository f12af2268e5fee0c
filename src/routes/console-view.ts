// What the console page shows, drawn from the report and readiness: the
// intent, the gate, counts by word, the leg, warnings and a page of rows.
import type { Readiness } from '../agent-api.js'
import { hostsReached } from '../domain/leg.js'
import type { IntentRecord, LayoutReport, LegRun, RowReport } from '../domain/schemas.js'
import { defaultSlicer } from '../domain/loop-turns.js'
import { html, type Html } from './console-html.js'

/** The row words in the order of their precedence (design §1.1). */
export const ROW_WORDS = ['fenced', 'conflict', 'foreign', 'nested', 'flat', 'external'] as const

/** A box of 10,000 tenants is paged, never drawn whole. */
export const PAGE_ROWS = 200

export interface ConsoleQuery {
  /** '' for every row. */
  word: string
  /** Part of a hostname, any case. */
  q: string
  /** 1-based. */
  page: number
}

export interface ConsoleInput {
  report: LayoutReport
  readiness: Readiness
  query: ConsoleQuery
  /** Relative times are taken from it. */
  now: number
  /** The record the box read last. */
  intent?: Pick<IntentRecord, 'id' | 'by' | 'recordedAt' | 'message'> | null
  /** The rows walked already, in slices; walked here when absent. */
  drawn?: RowsDrawn
}

/** `42s ago`, `in 9m`, `3h 5m ago`. */
export function relative(iso: string, now: number): string {
  const t = Date.parse(iso)
  if (Number.isNaN(t)) return iso
  const s = Math.round(Math.abs(t - now) / 1000)
  const span =
    s < 60
      ? `${s}s`
      : s < 3600
        ? `${Math.floor(s / 60)}m`
        : s < 86_400
          ? `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`
          : `${Math.floor(s / 86_400)}d`
  if (s === 0) return 'just now'
  return t > now ? `in ${span}` : `${span} ago`
}

function when(iso: string, now: number): Html {
  return html`<time datetime="${iso}" title="${iso}">${relative(iso, now)}</time>`
}

/** This page with the query changed, as a relative URL. */
export function pageLink(query: ConsoleQuery, change: Partial<ConsoleQuery>): string {
  const q = { ...query, ...change }
  const params = new URLSearchParams()
  if (q.word !== '') params.set('word', q.word)
  if (q.q !== '') params.set('q', q.q)
  if (q.page > 1) params.set('page', String(q.page))
  const s = params.toString()
  return s === '' ? '/' : `/?${s}`
}

/** The known words first, then any other. */
/** What the page takes from every row, in one walk: counts by word, rows in flight, the rows the query selects. */
export interface RowsDrawn {
  counts: Map<string, number>
  inFlight: number
  /** Sorted by host. */
  selected: Array<[string, RowReport]>
}

/** Rows walked between two looks at the loop's budget. */
const ROWS_PER_STEP = 200

/** Yields every ROWS_PER_STEP rows, so a page of a box of ten thousand never holds the loop. */
function* drawSteps(rows: Readonly<Record<string, RowReport>>, query: ConsoleQuery): Generator<void, RowsDrawn, void> {
  const drawn: RowsDrawn = { counts: new Map(ROW_WORDS.map((w) => [w, 0])), inFlight: 0, selected: [] }
  const needle = query.q.toLowerCase()
  let walked = 0
  // Sorted bare: each poll in a converge sorts a whole new report.
  for (const host of Object.keys(rows).sort()) {
    if (++walked % ROWS_PER_STEP === 0) yield
    const r = rows[host]
    if (r === undefined) continue
    drawn.counts.set(r.layout, (drawn.counts.get(r.layout) ?? 0) + 1)
    if (r.code === 'in_flight' || r.code === 'fenced_for_move') drawn.inFlight++
    if ((query.word === '' || r.layout === query.word) && (needle === '' || host.toLowerCase().includes(needle)))
      drawn.selected.push([host, r])
  }
  return drawn
}

export function rowsDrawn(rows: Readonly<Record<string, RowReport>>, query: ConsoleQuery): RowsDrawn {
  const steps = drawSteps(rows, query)
  for (;;) {
    const step = steps.next()
    if (step.done === true) return step.value
  }
}

/** rowsDrawn in slices of the loop's budget. */
export async function rowsDrawnSoon(
  rows: Readonly<Record<string, RowReport>>,
  query: ConsoleQuery,
): Promise<RowsDrawn> {
  const steps = drawSteps(rows, query)
  for (;;) {
    const step = steps.next()
    if (step.done === true) return step.value
    await defaultSlicer.pause()
  }
}

function whoLine(i: ConsoleInput['intent']): Html | string {
  if (i === undefined || i === null) return ''
  const why = i.message === undefined ? '' : html`: <q class="message">${i.message}</q>`
  return html`<p class="who">record <code>${i.id}</code>, by <b>${i.by}</b> at ${i.recordedAt}${why}</p>`
}

function intentLine(r: LayoutReport, who: Html | string): Html {
  const why =
    r.mode === 'unmanaged'
      ? 'no activator is armed on this box (CARLOS_ACTIVATOR=none): nothing moves, rows are judged by their paths'
      : r.mode === 'unreadable'
        ? 'the intent could not be read: nothing moves and nothing is released flat until it is'
        : r.mode === 'none'
          ? 'no recorded intent addresses this box'
          : r.default
            ? 'by the nested default: no recorded intent addresses this box'
            : 'recorded for this box or its fleet'
  const blocked =
    r.defaultBlocked === '' ? '' : html`<p class="blocked">The nested default does not apply: ${r.defaultBlocked}</p>`
  const mode = html`<span class="mode m-${r.mode}">${r.mode}</span>`
  return html`<section class="intent"><h2>Intent</h2><p>${mode} ${why}</p>${who}${blocked}</section>`
}

function gate(r: Readiness): Html {
  const line = (ok: boolean, name: string, detail: string): Html =>
    html`<li class="${ok ? 'ok' : 'bad'}">${ok ? '✓' : '✗'} <b>${name}</b> ${detail}</li>`
  const nested = r.nested.allowed ? 'nested instances may wake' : `nested instances may not wake: ${r.nested.reason}`
  const phase = html`<span class="phase ${r.ready ? 'ok' : 'bad'}">${r.phase}</span>`
  const wakes = r.ready ? 'the activator may wake instances' : 'the activator wakes nothing yet'
  const isolation = (r.isolation ?? []).map((c) =>
    line(c.ok, `isolation/${c.name}`, c.ok ? c.detail : `${c.code}: ${c.detail}`),
  )
  const isolationList = isolation.length > 0 ? html`<ul class="checks">${isolation}</ul>` : ''
  return html`<section class="gate"><h2>Readiness and the isolation gate</h2>
<p>${phase} ${wakes}</p>
<ul class="checks">${r.checks.map((c) => line(c.ok, c.name, c.detail))}</ul>
<p class="${r.nested.allowed ? 'ok' : 'bad'}">Gate: ${nested}</p>
${isolationList}</section>`
}

function bar(counts: Map<string, number>, total: number, query: ConsoleQuery): Html {
  const shown = [...counts].filter(([, n]) => n > 0)
  let x = 0
  const rects = shown.map(([word, n]) => {
    const w = (n / Math.max(total, 1)) * 1000
    const title = html`<title>${word}: ${n}</title>`
    const [left, width] = [x.toFixed(2), w.toFixed(2)]
    const shape = html`<rect class="w-${word}" x="${left}" y="0" width="${width}" height="20">${title}</rect>`
    const rect = html`<a href="${pageLink(query, { word, page: 1 })}">${shape}</a>`
    x += w
    return rect
  })
  const legend = [...counts].map(([word, n]) => {
    const on = query.word === word ? ' on' : ''
    return html`<li><a class="word w-${word}${on}" href="${pageLink(query, { word, page: 1 })}">${word}</a> ${n}</li>`
  })
  const allOn = query.word === '' ? ' on' : ''
  const allHref = pageLink(query, { word: '', page: 1 })
  const all = html`<li><a class="word all${allOn}" href="${allHref}">all</a> ${total}</li>`
  return html`<section class="counts"><h2>Rows by word <small>${total} in all</small></h2>
<svg class="bar" viewBox="0 0 1000 20" preserveAspectRatio="none" role="img" aria-label="rows by word">${rects}</svg>
<ul class="legend">${all}${legend}</ul></section>`
}

function tally(run: LegRun): string {
  const by = new Map<string, number>()
  for (const r of run.results) by.set(r.outcome, (by.get(r.outcome) ?? 0) + 1)
  return [...by].map(([o, n]) => `${n} ${o}`).join(', ') || 'no host reached'
}

/** Rows fenced for a move under way. */
/** Rows in flight read as moving, not as nothing reached. */
function runningLine(run: LegRun, inFlight: number, now: number): Html {
  const n = hostsReached(run.results)
  const reached = html`${n} host${n === 1 ? '' : 's'} finished so far (${tally(run)})`
  const flying = inFlight === 0 ? '' : html`, ${inFlight} row${inFlight === 1 ? '' : 's'} fenced in flight (moving now)`
  return html`<li>this run: started ${when(run.startedAt, now)}, ${reached}${flying}</li>`
}

function leg(r: LayoutReport, now: number, inFlight: number): Html {
  const { running, pending, lastRun, retryAt } = r.leg
  const current = lastRun !== null && lastRun.finishedAt === null ? lastRun : null
  const last = current === null ? lastRun : null
  const lastLine =
    last === null || last.finishedAt === null
      ? current === null
        ? 'none finished yet'
        : 'none finished before this one'
      : html`finished ${when(last.finishedAt, now)}: ${tally(last)}`
  return html`<section class="leg"><h2>Leg</h2><ul>
<li>${running ? html`<b class="running">running</b>` : 'idle'}${pending ? ', another run due after this one' : ''}</li>
${current === null ? '' : runningLine(current, inFlight, now)}
<li>last run: ${lastLine}</li>
<li>next retry: ${retryAt === null ? 'none pending' : when(retryAt, now)}</li></ul></section>`
}

function warnings(list: readonly string[]): Html {
  if (list.length === 0) return html`<section class="warnings none"><h2>Warnings</h2><p>none</p></section>`
  return html`<section class="warnings"><h2>Warnings</h2><ul>${list.map((w) => html`<li>${w}</li>`)}</ul></section>`
}

function rowsTable(selected: ReadonlyArray<[string, RowReport]>, query: ConsoleQuery): Html {
  const pages = Math.max(1, Math.ceil(selected.length / PAGE_ROWS))
  const page = Math.min(query.page, pages)
  const from = (page - 1) * PAGE_ROWS
  const slice = selected.slice(from, from + PAGE_ROWS)
  const what = [query.word === '' ? '' : `word ${query.word}`, query.q === '' ? '' : `host containing “${query.q}”`]
    .filter((s) => s !== '')
    .join(', ')
  const range = selected.length === 0 ? 'no row' : `rows ${from + 1}–${from + slice.length} of ${selected.length}`
  // One string, so the template never splits the words a reader looks for.
  const at = `page ${page} of ${pages}`
  const prev = page > 1 ? html`<a rel="prev" href="${pageLink(query, { page: page - 1 })}">← previous</a>` : ''
  const next = page < pages ? html`<a rel="next" href="${pageLink(query, { page: page + 1 })}">next →</a>` : ''
  const nav = pages === 1 ? '' : html`<nav class="pages">${prev} ${at} ${next}</nav>`
  const body = slice.map(([host, r]) => {
    const code = r.code === '' ? '' : html`<code class="code c-${r.code}">${r.code}</code> `
    const cells = [
      html`<td class="host">${host}</td>`,
      html`<td><span class="word w-${r.layout}">${r.layout}</span></td>`,
      html`<td class="reason">${code}${r.reason}</td>`,
      html`<td class="note">${r.note}</td>`,
    ]
    return html`<tr data-host="${host}" data-word="${r.layout}" data-code="${r.code}">${cells}</tr>`
  })
  const filtered = what === '' ? '' : ` (${what})`
  const head = html`<thead><tr><th>host</th><th>word</th><th>reason</th><th>note</th></tr></thead>`
  return html`<section class="rows"><h2>Rows <small id="range">${range}${filtered}</small></h2>${nav}
<table>${head}<tbody>${body}</tbody></table>${nav}</section>`
}

/** Redrawn in place when the report changes. */
export function livePart({ report, readiness, query, now, intent, drawn: walked }: ConsoleInput): Html {
  const { counts, inFlight, selected } = walked ?? rowsDrawn(report.rows, query)
  let total = 0
  for (const n of counts.values()) total += n
  const drawn = new Date(now).toISOString()
  const sections = [
    intentLine(report, report.mode === 'flat' || report.mode === 'nested' ? whoLine(intent) : ''),
    gate(readiness),
    bar(counts, total, query),
    leg(report, now, inFlight),
    warnings(report.warnings),
    rowsTable(selected, query),
  ]
  return html`<p class="drawn">drawn ${drawn}</p>
${sections}`
}

/** Sent as the query, so a plain reload shows the same. */
export function filterForm(query: ConsoleQuery): Html {
  const options = ['', ...ROW_WORDS].map(
    (w) => html`<option value="${w}"${query.word === w ? ' selected' : ''}>${w === '' ? 'every word' : w}</option>`,
  )
  return html`<form class="filters" method="get" action="/"><label>word <select name="word">${options}</select></label>
<label>host <input type="search" name="q" value="${query.q}" placeholder="part of a hostname" maxlength="253"></label>
<button type="submit">show</button>${query.word !== '' || query.q !== '' ? html` <a href="/">clear</a>` : ''}</form>`
}

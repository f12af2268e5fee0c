// What the fleet page shows (design §6.3, §7.6): boxes, rollout and intent
// records from the deploy store. A part that could not be read says why. Pure.
import {
  boxWord,
  deadlineAt,
  fleetView,
  howGone,
  summaryLine,
  type BoxGone,
  type FleetRow,
  type KeptBox,
} from '../domain/box-summary.js'
import {
  eventLine,
  fleetRecords,
  newestFirst,
  progressLine,
  rolloutCounts,
  waveState,
  type BoxProgress,
  type RolloutEvent,
  type RolloutRecord,
} from '../domain/rollout.js'
import type { IntentRecord } from '../domain/schemas.js'
import { html, type Html, type Interpolated } from './console-html.js'
import { relative } from './console-view.js'

/** The newest records shown in the history. */
export const HISTORY_ROWS = 50
/** The newest events shown; `fleet rollout history` lists them all. */
export const EVENT_ROWS = 50

export type Read<T> = { ok: true; value: T } | { ok: false; why: string }

/** Events oldest first, as stored. */
export interface RolloutRead {
  record: RolloutRecord
  progress: ReadonlyMap<string, BoxProgress>
  /** Absent: not read. */
  events?: Read<RolloutEvent[]>
}

export interface FleetPageInput {
  /** Every box the store knows, gone ones too. */
  boxes: Read<KeptBox[]>
  records: Read<IntentRecord[]>
  /** undefined: the store keeps no rollouts (the directory store). */
  rollout: Read<RolloutRead | null> | undefined
  now: number
}

const failed = (what: string, why: string): Html => html`<p class="unreadable" role="alert">${what}: ${why}</p>`

const when = (iso: string, now: number): Html =>
  html`<time datetime="${iso}" title="${iso}">${relative(iso, now)}</time>`

/** As `fleet status` says it; a gone box's with since when and how. */
function stateCell(r: FleetRow, now: number): Html {
  const word = boxWord(r)
  if (r.gone === null) return html`<td class="word-cell">${word}</td>`
  return html`<td class="word-cell">${word} since ${when(r.gone.since, now)} <small>(${howGone(r.gone)})</small></td>`
}

function boxRow(r: FleetRow, now: number): Html {
  const s = r.summary
  const n = (w: string) => s.counts[w] ?? 0
  const w = s.leg.withheld
  const of = (k: 'deferred' | 'refused' | 'failed') => (w === undefined ? '-' : w[k])
  const stale = r.wants !== null && s.intent !== r.wants ? html` <small>(box read ${s.intent ?? 'none'})</small>` : ''
  const at = s.leg.lastRunAt
  const word = boxWord(r).replace(' ', '-')
  const head = html`<td class="host">${s.box}</td>${stateCell(r, now)}<td class="mono">${r.wants ?? '-'}${stale}</td>`
  const figures = [s.mode, n('nested'), n('flat'), n('fenced'), of('deferred'), s.held, of('refused'), of('failed')]
  const times = [when(s.at, now), at === null ? '-' : when(at, now), s.version]
  return html`<tr class="state-${r.state} word-${word}">${head}${cells([...figures, ...times])}</tr>`
}

function cells(values: readonly Interpolated[]): Html[] {
  return values.map((v) => html`<td>${v}</td>`)
}

function boxesPart(boxes: KeptBox[], records: IntentRecord[], now: number): Html {
  const gone = new Map<string, BoxGone>()
  for (const b of boxes) if (b.gone !== undefined) gone.set(b.summary.box, b.gone)
  const v = fleetView(
    boxes.map((b) => b.summary),
    records,
    [],
    gone,
  )
  const needs = v.rows.filter((r) => r.needs !== null)
  const needsList =
    needs.length === 0
      ? ''
      : html`<ul class="needs">${needs.map(
          (r) => html`<li><span class="host">${r.summary.box}</span> needs you: ${r.needs}</li>`,
        )}</ul>`
  return html`<section id="boxes"><h2>Boxes</h2><p class="summary">${summaryLine(v)}</p>${needsList}
<div class="wide"><table><thead><tr><th>box</th><th>state</th><th>intent</th><th>mode</th><th>nested</th><th>flat</th>
<th>fenced</th><th>deferred</th><th>held</th><th>refused</th><th>failed</th><th>summary</th><th>last run</th>
<th>version</th></tr></thead><tbody>${v.rows.map((r) => boxRow(r, now))}</tbody></table></div></section>`
}

/** A stopped rollout's cause; the open wave's deadline. */
function causePart(r: RolloutRecord, now: number): Html | string {
  // A reason is set only on a stopped rollout.
  const cause =
    r.reason !== ''
      ? html`<p class="cause" role="status"><b>${r.state}:</b> ${r.reason}${
          r.cause === undefined ? '' : html` <small>[${r.cause}]</small>`
        }</p>`
      : ''
  const at = deadlineAt(r)
  const deadline =
    (r.state === 'running' || r.state === 'paused') && at !== null
      ? html`<p class="deadline">Wave ${r.wave + 1}'s progress deadline: ${when(at, now)} (${
          Date.parse(at) >= now ? 'time left' : 'passed'
        }; ${Math.round(r.progressDeadlineMs / 1000)}s from the wave's opening${
          r.state === 'paused' ? ', counted again from a resume' : ''
        }).</p>`
      : ''
  return html`${cause}${deadline}`
}

function rolloutPart(input: FleetPageInput['rollout'], now: number): Html {
  if (input === undefined) return html`<section id="rollout"><h2>Rollout</h2><p>${ONE_BOX_STORE}</p></section>`
  if (!input.ok) return html`<section id="rollout"><h2>Rollout</h2>${failed('the rollout', input.why)}</section>`
  if (input.value === null)
    return html`<section id="rollout"><h2>Rollout</h2><p>No rollout was ever recorded.</p></section>`
  const { record: r, progress } = input.value
  const waves = r.waves.map((w, i) => {
    // Counted as `fleet rollout status` counts them.
    const c = rolloutCounts(r, progress, i)
    const state = waveState(r, i)
    const pct = c.boxes === 0 ? 100 : Math.round((c.done / c.boxes) * 100)
    const meter = html`<td><meter min="0" max="100" value="${pct}">${pct}%</meter></td>`
    const counts = [i + 1, w.length, c.done, c.moving, c.failedRows, c.deferredRows, c.skipped, state]
    return html`<tr class="wave-${state.replace(' ', '-')}">${cells(counts)}${meter}</tr>`
  })
  const message = r.message === '' ? '' : html`: <q>${r.message}</q>`
  // The cause is said once, in its own paragraph below the line.
  const line = progressLine(r, progress)
  const cause = `: ${r.reason}${r.cause === undefined ? '' : ` [${r.cause}]`}`
  const summary = r.reason !== '' && line.endsWith(cause) ? line.slice(0, -cause.length) : line
  return html`<section id="rollout"><h2>Rollout</h2><p class="summary state-${r.state}">${summary}</p>
${causePart(r, now)}<p>Toward ${r.mode}, recorded ${r.recordedAt} by ${r.by}${message};
at most ${r.maxParallel} moving at once, on failure ${r.onFailure}, up to ${r.maxFailedRows} failed rows a wave.</p>
<div class="wide"><table><thead><tr><th>wave</th><th>boxes</th><th>done</th><th>moving</th><th>failed rows</th>
<th>deferred rows</th><th>skipped</th><th>state</th><th>progress</th></tr></thead><tbody>${waves}</tbody></table></div>
${eventsPart(r, input.value.events, now)}</section>`
}

/** Newest first, in the words of `fleet rollout history`. */
function eventsPart(r: RolloutRecord, events: Read<RolloutEvent[]> | undefined, now: number): Html | string {
  if (events === undefined) return ''
  if (!events.ok) return html`<h3>Events</h3>${failed("the rollout's events", events.why)}`
  const newest = newestFirst(events.value).slice(0, EVENT_ROWS)
  const older = events.value.length - EVENT_ROWS
  const more = older > 0 ? html`<p>${older} older events not shown: \`layoutd fleet rollout history ${r.id}\`.</p>` : ''
  return html`<h3>Events</h3><p>${events.value.length} events, newest first.</p><ol class="events">${newest.map(
    (e) => html`<li>${eventLine(e)} <small>(${relative(e.at, now)})</small></li>`,
  )}</ol>${more}`
}

function extra(r: IntentRecord, name: string): string {
  const v = (r as unknown as Record<string, unknown>)[name]
  return typeof v === 'string' ? v : ''
}

function historyPart(records: IntentRecord[]): Html {
  const newest = [...records].reverse().slice(0, HISTORY_ROWS)
  const rows = newest.map(
    (r) =>
      html`<tr><td class="mono">${r.id}</td><td>${r.mode}</td><td>${
        r.box === undefined ? 'the whole fleet' : html`box <span class="host">${r.box}</span>`
      }</td><td>${r.force ? 'yes' : 'no'}</td><td>${r.recordedAt}</td><td>${r.by}</td><td>${extra(
        r,
        'message',
      )}</td></tr>`,
  )
  const more =
    records.length > HISTORY_ROWS ? html`<p>${records.length - HISTORY_ROWS} older records not shown.</p>` : ''
  return html`<section id="history"><h2>Intent history</h2><p>${records.length} records, newest first.</p>
<div class="wide"><table><thead><tr><th>id</th><th>mode</th><th>addresses</th><th>force</th><th>recorded</th><th>by</th>
<th>message</th></tr></thead><tbody>${rows}</tbody></table></div>${more}</section>`
}

const ONE_BOX_STORE = 'This deploy store serves one box and keeps no rollouts.'

export function fleetPart(input: FleetPageInput): Html {
  const { boxes, records, now } = input
  // A box in the rollout is judged by its intent, as its agent reads it.
  const played = input.rollout?.ok === true ? (input.rollout.value ?? undefined) : undefined
  const boxesHtml = !boxes.ok
    ? html`<section id="boxes"><h2>Boxes</h2>${failed('the box summaries', boxes.why)}</section>`
    : boxesPart(
        boxes.value,
        fleetRecords(records.ok ? records.value : [], played?.record, played?.progress ?? new Map()),
        now,
      )
  const recordsWarning = records.ok ? '' : failed('the intent records', records.why)
  const history = records.ok
    ? historyPart(records.value)
    : html`<section id="history"><h2>Intent history</h2></section>`
  return html`${recordsWarning}${boxesHtml}${rolloutPart(input.rollout, now)}${history}`
}

// What the fleet page shows (design §6.3, §7.6), drawn from what the deploy
// store holds: every live box with its state against the intent
// addressing it, the rollout in play with its waves and their progress,
// and the intent records newest first, with who recorded each and why
// when a record says. A part that could not be read says why, and the
// others are still drawn. Pure: the same inputs draw the same markup.
import { fleetView, summaryLine, type BoxSummary } from '../domain/box-summary.js'
import { fleetRecords, progressLine, type BoxProgress, type RolloutRecord } from '../domain/rollout.js'
import type { IntentRecord } from '../domain/schemas.js'
import { html, type Html } from './console-html.js'
import { relative } from './console-view.js'

/** Records shown in the history: the newest ones. */
export const HISTORY_ROWS = 50

export type Read<T> = { ok: true; value: T } | { ok: false; why: string }

export interface FleetPageInput {
  boxes: Read<BoxSummary[]>
  records: Read<IntentRecord[]>
  /** undefined: the store keeps no rollouts (the directory store). */
  rollout: Read<{ record: RolloutRecord; progress: ReadonlyMap<string, BoxProgress> } | null> | undefined
  now: number
}

const failed = (what: string, why: string): Html => html`<p class="unreadable" role="alert">${what}: ${why}</p>`

function boxesPart(boxes: BoxSummary[], records: IntentRecord[], now: number): Html {
  const v = fleetView(boxes, records)
  const rows = v.rows.map((r) => {
    const s = r.summary
    const n = (w: string) => s.counts[w] ?? 0
    const stale = r.wants !== null && s.intent !== r.wants ? html` <small>(box read ${s.intent ?? 'none'})</small>` : ''
    const at = s.leg.lastRunAt
    return html`<tr class="state-${r.state}"><td class="host">${s.box}</td><td>${r.state}${
      s.leg.running ? ' (running)' : ''
    }</td><td class="mono">${r.wants ?? '-'}${stale}</td><td>${s.mode}</td><td>${n('nested')}</td><td>${n(
      'flat',
    )}</td><td>${n('fenced')}</td><td>${s.held}</td><td>${
      at === null ? '-' : html`<time datetime="${at}">${relative(at, now)}</time>`
    }</td><td>${s.version}</td></tr>`
  })
  return html`<section id="boxes"><h2>Boxes</h2><p class="summary">${summaryLine(v)}</p>
<table><thead><tr><th>box</th><th>state</th><th>intent</th><th>mode</th><th>nested</th><th>flat</th><th>fenced</th>
<th>held</th><th>last run</th><th>version</th></tr></thead><tbody>${rows}</tbody></table></section>`
}

function rolloutPart(input: FleetPageInput['rollout']): Html {
  if (input === undefined) return html`<section id="rollout"><h2>Rollout</h2><p>${ONE_BOX_STORE}</p></section>`
  if (!input.ok) return html`<section id="rollout"><h2>Rollout</h2>${failed('the rollout', input.why)}</section>`
  if (input.value === null)
    return html`<section id="rollout"><h2>Rollout</h2><p>No rollout was ever recorded.</p></section>`
  const { record: r, progress } = input.value
  const waves = r.waves.map((w, i) => {
    const done = w.filter((b) => progress.get(b)?.done === true)
    const moving = w.filter((b) => progress.get(b)?.done === false)
    const failedRows = done.reduce((n, b) => n + (progress.get(b)?.failedRows ?? 0), 0)
    const state = i < r.wave || r.state === 'done' ? 'passed' : i === r.wave ? r.state : 'waiting'
    const pct = Math.round((done.length / w.length) * 100)
    return html`<tr class="wave-${state}"><td>${i + 1}</td><td>${w.length}</td><td>${done.length}</td><td>${
      moving.length
    }</td><td>${failedRows}</td><td>${state}</td><td><meter min="0" max="100" value="${pct}">${pct}%</meter></td></tr>`
  })
  const message = r.message === '' ? '' : html`: <q>${r.message}</q>`
  return html`<section id="rollout"><h2>Rollout</h2><p class="summary state-${r.state}">${progressLine(r, progress)}</p>
<p>Toward ${r.mode}, recorded ${r.recordedAt} by ${r.by}${message}; at most ${r.maxParallel} moving at once,
on failure ${r.onFailure}, up to ${r.maxFailedRows} failed rows a wave.</p>
<table><thead><tr><th>wave</th><th>boxes</th><th>done</th><th>moving</th><th>failed rows</th><th>state</th>
<th>progress</th></tr></thead><tbody>${waves}</tbody></table></section>`
}

/** A field a record may carry beside the ones this build names (who recorded it and why, from newer builds). */
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
<table><thead><tr><th>id</th><th>mode</th><th>addresses</th><th>force</th><th>recorded</th><th>by</th><th>message</th>
</tr></thead><tbody>${rows}</tbody></table>${more}</section>`
}

/** What the rollout part says on the directory store. */
const ONE_BOX_STORE = 'This deploy store serves one box and keeps no rollouts.'

export function fleetPart(input: FleetPageInput): Html {
  const { boxes, records, now } = input
  // A box that started in the rollout is judged against the rollout's intent, as its agent reads it.
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
  return html`${recordsWarning}${boxesHtml}${rolloutPart(input.rollout)}${history}`
}

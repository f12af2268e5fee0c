// What the fleet page draws (design §7.3, §7.6), against `fleet status`:
// the same word for each box (a box with a held row `needs you` on both),
// deferred rows apart from held, refused and failed ones, a gone box kept
// with since when, each summary's age, and a paused rollout's cause and the
// time left to its wave's deadline.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { formatFleet } from '../../src/cli/fleet-table.js'
import { fleetView, summarize, type BoxGone, type KeptBox } from '../../src/domain/box-summary.js'
import type { RolloutEvent, RolloutRecord } from '../../src/domain/rollout.js'
import type { IntentRecord, LayoutReport } from '../../src/domain/schemas.js'
import { fleetPart } from '../../src/routes/fleet-view.js'

const NOW = Date.parse('2026-12-01T09:00:00.000Z')
const at = (ago: number) => new Date(NOW - ago).toISOString()

function report(rows: Record<string, [string, string, LayoutReport['rows'][string]['code']]>): LayoutReport {
  const r: LayoutReport['rows'] = {}
  for (const [host, [layout, reason, code]] of Object.entries(rows)) r[host] = { layout, reason, code, note: '' }
  return {
    box: 'x',
    mode: 'nested',
    default: false,
    defaultBlocked: '',
    leg: { running: false, pending: false, lastRun: null, retryAt: null },
    warnings: [],
    rows: r,
  }
}

const intent: IntentRecord = { id: 'i1', mode: 'nested', force: false, recordedAt: at(3_600_000), by: 'ops' }

function box(name: string, rows: Parameters<typeof report>[0], ageMs: number): KeptBox {
  return { summary: { ...summarize(report(rows), intent, '0.1.0', at(ageMs)), box: name } }
}

/** The text of the page's markup, tags dropped, spaces folded. */
const text = (markup: string) =>
  markup
    .replace(/<[^>]+>/g, ' ')
    .replace(/\s+/g, ' ')
    .trim()

void test('the fleet page says what fleet status says: needs you, deferred apart, gone since, summary age', () => {
  const gone: BoxGone = { since: at(120_000), how: 'expired' }
  const boxes: KeptBox[] = [
    box('web-01', { a: ['fenced', 'second name', 'second_name'], b: ['nested', '', ''] }, 60_000),
    box('web-02', { a: ['flat', 'awake: 42m of grace left', 'awake_grace'], b: ['nested', '', ''] }, 5_000),
    { ...box('web-03', { a: ['nested', '', ''] }, 600_000), gone },
  ]
  const page = fleetPart({
    boxes: { ok: true, value: boxes },
    records: { ok: true, value: [intent] },
    rollout: undefined,
    now: NOW,
  }).text
  const rows = [...page.matchAll(/<tr class="state-[^"]*"[^>]*>([\s\S]*?)<\/tr>/g)].map((m) => text(m[1] ?? ''))
  assert.deepEqual(rows, [
    'web-01 needs you i1 nested 1 0 1 0 1 0 0 1m ago - 0.1.0',
    'web-02 converging i1 nested 1 1 0 1 0 0 0 5s ago - 0.1.0',
    'web-03 gone since 2m ago (its lease expired) i1 nested 1 0 0 0 0 0 0 10m ago - 0.1.0',
  ])
  assert.match(text(page), /<?web-01 needs you: 1 held \(1 second_name\)/)
  // The CLI's words for the same boxes.
  const gones = new Map([['web-03', gone]])
  const v = fleetView(
    boxes.map((b) => b.summary),
    [intent],
    [],
    gones,
  )
  const cli = formatFleet({ view: v, records: [intent], rollout: undefined }, NOW)
  assert.match(cli, /^web-01 .* needs you /m)
  assert.match(cli, /^web-02 .* converging /m)
  assert.match(cli, /^web-03 .* gone /m)
  assert.ok(text(page).includes('0/3 converged to i1; 2 converging; 1 held rows; 1 gone'), text(page))
  assert.ok(cli.includes('\n0/3 converged to i1; 2 converging; 1 held rows; 1 gone\n'), cli)
})

void test("the fleet page shows a paused rollout's cause and the time left to its wave's deadline", () => {
  const reason = `wave 2: 37 rows not nested (on ${Array.from({ length: 20 }, (_, i) => `web-${i}`).join(', ')})`
  const r: RolloutRecord = {
    id: 'i2',
    mode: 'nested',
    force: false,
    waves: [['web-01'], ['web-02']],
    maxParallel: 1,
    progressDeadlineMs: 600_000,
    onFailure: 'pause',
    maxFailedRows: 0,
    state: 'paused',
    wave: 1,
    waveOpenedAt: at(240_000),
    reason,
    recordedAt: at(3_600_000),
    by: 'ops',
    message: '',
  }
  const page = fleetPart({
    boxes: { ok: true, value: [] },
    records: { ok: true, value: [] },
    rollout: { ok: true, value: { record: r, progress: new Map() } },
    now: NOW,
  }).text
  const rollout = text(page.slice(page.indexOf('<section id="rollout">')))
  assert.ok(rollout.includes(`paused: ${reason}`), rollout)
  assert.match(rollout, /Wave 2's progress deadline: in 6m \(time left; 600s from the wave's opening/)
})

void test("the fleet page lists the rollout's events newest first, who, when and why, and counts deferred rows apart", () => {
  const r: RolloutRecord = {
    id: 'i3',
    mode: 'nested',
    force: false,
    waves: [['web-01', 'web-02'], ['web-03']],
    maxParallel: 2,
    progressDeadlineMs: 600_000,
    onFailure: 'pause',
    maxFailedRows: 0,
    state: 'paused',
    cause: 'box_gone',
    wave: 0,
    waveOpenedAt: at(240_000),
    reason: 'box web-02 of wave 1 left the fleet before it was done',
    recordedAt: at(600_000),
    by: 'ops@desk',
    message: 'canary',
  }
  const events: RolloutEvent[] = [
    { at: at(600_000), by: 'ops@desk', kind: 'recorded', state: 'running', wave: 1, message: 'canary' },
    {
      at: at(60_000),
      by: 'agent web-01',
      kind: 'paused',
      state: 'paused',
      wave: 1,
      reason: 'box web-02 of wave 1 left the fleet before it was done',
      cause: 'box_gone',
    },
  ]
  const progress = new Map([
    ['web-01', { done: true, failedRows: 0, deferredRows: 4 }],
    ['web-02', { done: false, failedRows: 0 }],
  ])
  const page = fleetPart({
    boxes: { ok: true, value: [] },
    records: { ok: true, value: [] },
    rollout: { ok: true, value: { record: r, progress, events: { ok: true, value: events } } },
    now: NOW,
  }).text
  const items = [...page.matchAll(/<li>([\s\S]*?)<\/li>/g)].map((m) => text(m[1] ?? ''))
  assert.deepEqual(items, [
    `${at(60_000)} paused wave 1 by agent web-01: box web-02 of wave 1 left the fleet before it was done [box_gone] (1m ago)`,
    `${at(600_000)} recorded wave 1 by ops@desk — &quot;canary&quot; (10m ago)`,
  ])
  const waves = [...page.matchAll(/<tr class="wave-[^"]*">([\s\S]*?)<\/tr>/g)].map((m) => text(m[1] ?? ''))
  // wave, boxes, done, moving, failed rows, deferred rows, skipped, state: as `fleet rollout status` counts.
  assert.deepEqual(waves, ['1 2 1 1 0 4 0 paused 50%', '2 1 0 0 0 0 0 not open 0%'])
  assert.match(text(page), /4 deferred rows; paused/)
  const section = text(page.slice(page.indexOf('<section id="rollout">'), page.indexOf('<h3>Events</h3>')))
  assert.equal(section.split('left the fleet before it was done').length, 2, `the cause is said once: ${section}`)
  const unread = fleetPart({
    boxes: { ok: true, value: [] },
    records: { ok: true, value: [] },
    rollout: { ok: true, value: { record: r, progress, events: { ok: false, why: 'etcd: timed out' } } },
    now: NOW,
  }).text
  assert.match(text(unread), /the rollout&#39;s events: etcd: timed out/)
})

// The box summary and the fleet's view of them (design §7.3): what a report
// summarizes to, when a summary counts as new, each box's verdict against
// the intent that addresses it, the table's order and the summary line.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import {
  BoxSummary,
  boxWord,
  fleetView,
  rolloutStopped,
  needsPerson,
  sameSummary,
  summarize,
  summaryLine,
} from '../../src/domain/box-summary.js'
import { Type, Value } from '../../src/domain/typebox.js'
import type { ReasonCode } from '../../src/domain/reason-codes.js'
import type { IntentRecord, LayoutReport } from '../../src/domain/schemas.js'

function report(rows: Record<string, [string, string, ReasonCode?]>, over: Partial<LayoutReport> = {}): LayoutReport {
  return {
    box: 'kass-1',
    mode: 'nested',
    default: false,
    defaultBlocked: '',
    leg: {
      running: false,
      pending: false,
      lastRun: { startedAt: '2026-12-01T08:00:00.000Z', finishedAt: '2026-12-01T08:00:01.000Z', results: [] },
      retryAt: null,
    },
    warnings: [],
    rows: Object.fromEntries(
      Object.entries(rows).map(([h, [layout, reason, code]]) => [h, { layout, code: code ?? '', reason, note: '' }]),
    ),
    ...over,
  }
}

const intent = (id: string, extra: Partial<IntentRecord> = {}): IntentRecord => ({
  id,
  mode: 'nested',
  force: false,
  recordedAt: 'x',
  by: 'ops',
  ...extra,
})

void test('summarize: counts by word, held rows, and converged only when every row is where the intent wants it', () => {
  const at = '2026-12-01T08:00:02.000Z'
  const done = summarize(
    report({ a: ['nested', ''], b: ['nested', ''], c: ['external', ''] }),
    intent('i1'),
    '0.1.0',
    at,
  )
  assert.deepEqual(done, {
    box: 'kass-1',
    version: '0.1.0',
    intent: 'i1',
    mode: 'nested',
    converged: true,
    counts: { nested: 2, external: 1 },
    held: 0,
    leg: {
      running: false,
      pending: false,
      lastRunAt: '2026-12-01T08:00:01.000Z',
      retryAt: null,
      withheld: { deferred: 0, refused: 0, failed: 0, kept: 0, heldBy: {} },
    },
    at,
  })
  assert.equal(
    summarize(report({ a: ['nested', ''], b: ['flat', ''] }), intent('i1'), '0.1.0', at).converged,
    false,
    'a flat row left',
  )
  const held = summarize(
    report({
      a: ['nested', ''],
      b: ['fenced', 'held down after a refused move to nested: a file of its has a second name', 'second_name'],
    }),
    intent('i1'),
    '0.1.0',
    at,
  )
  assert.equal(held.held, 1)
  assert.equal(held.converged, false, 'a held row')
  // Held is the code's to say, not the sentence's: a kept journal is fenced, not held, whatever it reads.
  const byCode = summarize(
    report({
      a: ['fenced', 'held down, in other words', 'ambiguous'],
      b: ['fenced', 'reworded', 'revert_unreadable'],
      c: ['fenced', 'reworded', 'legacy_hold'],
    }),
    intent('i1'),
    '0.1.0',
    at,
  )
  assert.equal(byCode.held, 2)
  const running = report({ a: ['nested', ''] })
  running.leg.running = true
  assert.equal(summarize(running, intent('i1'), '0.1.0', at).converged, false, 'a run under way')
  assert.equal(
    summarize(report({ a: ['nested', ''] }, { mode: 'flat' }), intent('i1'), '0.1.0', at).converged,
    false,
    'last converged to another mode',
  )
  assert.equal(summarize(report({ a: ['nested', ''] }), null, '0.1.0', at).converged, false, 'no intent')
})

void test('sameSummary: the time of the change aside', () => {
  const a = summarize(report({ a: ['nested', ''] }), intent('i1'), '0.1.0', '2026-12-01T08:00:00.000Z')
  assert.equal(sameSummary(undefined, a), false)
  assert.equal(sameSummary(a, { ...a, at: '2026-12-01T09:00:00.000Z' }), true)
  assert.equal(sameSummary(a, { ...a, counts: { nested: 2 } }), false)
  assert.equal(sameSummary(a, { ...a, intent: 'i2' }), false)
})

void test('fleetView: each box against the intent addressing it; the unconverged first; the summary line', () => {
  const s = (box: string, intentId: string | null, converged: boolean, held = 0): BoxSummary => ({
    box,
    version: '0.1.0',
    intent: intentId,
    mode: 'nested',
    converged,
    counts: { nested: 1 },
    held,
    leg: { running: false, pending: false, lastRunAt: null },
    at: 'x',
  })
  const records = [intent('i1'), intent('i2', { box: 'web-02', mode: 'flat' }), intent('i3')]
  const v = fleetView(
    [s('web-01', 'i3', true), s('web-02', 'i2', true), s('web-03', 'i1', true), s('web-04', 'i3', false, 2)],
    records,
  )
  assert.deepEqual(
    v.rows.map((r) => [r.summary.box, r.wants, r.state]),
    [
      ['web-02', 'i3', 'converging'], // i3, fleet-wide and newer, supersedes its own i2
      ['web-03', 'i3', 'converging'], // converged, but to an older intent
      ['web-04', 'i3', 'converging'],
      ['web-01', 'i3', 'converged'],
    ],
  )
  assert.equal(v.allConverged, false)
  assert.equal(summaryLine(v), '1/4 converged to i3; 3 converging; 2 held rows')
  const all = fleetView([s('web-01', 'i3', true), s('web-02', 'i3', true)], records)
  assert.equal(all.allConverged, true)
  assert.equal(summaryLine(all), '2/2 converged to i3; 0 converging; 0 held rows')
  const none = fleetView([s('web-01', null, false)], [])
  assert.equal(none.allConverged, false)
  assert.equal(
    summaryLine(none),
    '0/1 converged to the intents addressing them; 0 converging; 0 held rows; 1 with no intent',
  )
  assert.equal(fleetView([], records).allConverged, false, 'no box reported is not a converged fleet')
})

void test('summarize: what the last run withheld, by kind and held by code; a reader of the schema before it reads it', () => {
  const s = summarize(
    report({
      a: ['flat', 'awake: 42m of grace left', 'awake_grace'],
      b: ['flat', 'isolation not ready', 'gate_shut'],
      c: ['flat', 'the activator did not stop it', 'stop_timeout'],
      d: ['fenced', 'second name', 'second_name'],
      e: ['fenced', 'second name', 'second_name'],
      f: ['fenced', 'files at both ends', 'ambiguous'],
      g: ['fenced', 'moving', 'in_flight'],
      // Where the intent wants it: a nested row that cannot wake is not withheld from nested.
      h: ['nested', 'isolation not ready', 'gate_shut'],
    }),
    intent('i1'),
    '0.1.0',
    'x',
  )
  assert.deepEqual(s.leg.withheld, { deferred: 1, refused: 1, failed: 1, kept: 1, heldBy: { second_name: 2 } })
  assert.equal(s.held, 2)
  // The schema of the build before `withheld` (its leg admitted fields it did not name): it reads this summary.
  const before = Type.Object(
    {
      ...BoxSummary.properties,
      leg: Type.Object({
        running: Type.Boolean(),
        pending: Type.Boolean(),
        lastRunAt: Type.Union([Type.String(), Type.Null()]),
      }),
    },
    { additionalProperties: false },
  )
  assert.ok(Value.Check(before, s), 'an older fleet status reads a newer summary')
})

void test('needsPerson: only a box idle on its intent whose every row short of it is held, refused or kept', () => {
  const base = summarize(report({ a: ['flat', 'isolation not ready', 'gate_shut'] }), intent('i1'), '0.1.0', 'x')
  assert.equal(needsPerson(base, 'i1'), '1 refused')
  assert.equal(needsPerson(base, 'i2'), null, 'not yet on the intent that addresses it')
  // A held host has the leg come back to look at its hold: no progress of its own.
  assert.equal(needsPerson({ ...base, leg: { ...base.leg, retryAt: 'soon' } }, 'i1'), '1 refused')
  const failing = summarize(
    report({ a: ['flat', 'refused', 'gate_shut'], b: ['flat', 'stop timed out', 'stop_timeout'] }),
    intent('i1'),
    '0.1.0',
    'x',
  )
  assert.equal(needsPerson(failing, 'i1'), null, 'a failed row is retried')
  assert.equal(needsPerson({ ...base, leg: { ...base.leg, pending: true } }, 'i1'), null, 'a run is due')
  const older = { ...base.leg }
  delete older.withheld
  assert.equal(needsPerson({ ...base, leg: older }, 'i1'), null, 'an older agent says nothing of it')
  const deferring = summarize(
    report({ a: ['flat', 'refused', 'gate_shut'], b: ['flat', 'awake', 'awake_grace'] }),
    intent('i1'),
    '0.1.0',
    'x',
  )
  assert.equal(needsPerson(deferring, 'i1'), null, 'a deferred row moves on its own')
})

void test('boxWord: one word for a box, the same in fleet status and on the fleet page', () => {
  const records = [intent('i1')]
  const held = summarize(report({ a: ['fenced', 'second name', 'second_name'] }), intent('i1'), '0.1.0', 'x')
  const deferred = summarize(report({ a: ['flat', 'awake', 'awake_grace'] }), intent('i1'), '0.1.0', 'x')
  const running = { ...deferred, box: 'web-03', leg: { ...deferred.leg, running: true } }
  const done = summarize(report({ a: ['nested', ''] }), intent('i1'), '0.1.0', 'x')
  const v = fleetView(
    [
      { ...held, box: 'web-01' },
      { ...deferred, box: 'web-02' },
      running,
      { ...done, box: 'web-04' },
      { ...done, box: 'web-05' },
    ],
    records,
    [],
    new Map([['web-05', { since: '2026-12-01T08:00:00.000Z', how: 'expired' as const }]]),
  )
  assert.deepEqual(
    v.rows.map((r) => [r.summary.box, boxWord(r)]),
    [
      ['web-01', 'needs you'],
      ['web-02', 'converging'],
      ['web-03', 'running'],
      ['web-05', 'gone'],
      ['web-04', 'converged'],
    ],
  )
  assert.equal(v.gone, 1)
  assert.equal(v.allConverged, false, 'a gone box is not converged')
  assert.match(summaryLine(v), /; 1 gone$/)
  assert.equal(boxWord(fleetView([done], []).rows[0]!), 'no intent')
})

void test('rolloutStopped: paused, frozen or aborted, unless a newer fleet-wide record superseded it', () => {
  const r = {
    id: '20261201T000000.000Z-roll',
    mode: 'nested' as const,
    force: false,
    waves: [['web-01']],
    maxParallel: 1,
    progressDeadlineMs: 1000,
    onFailure: 'pause' as const,
    maxFailedRows: 0,
    state: 'paused' as const,
    wave: 0,
    waveOpenedAt: 'x',
    reason: 'wave 1 failed',
    recordedAt: 'x',
    by: 'ops',
    message: '',
  }
  assert.equal(rolloutStopped(r, []), 'rollout 20261201T000000.000Z-roll is paused: wave 1 failed')
  assert.equal(rolloutStopped({ ...r, state: 'running' }, []), null)
  assert.equal(rolloutStopped({ ...r, state: 'done' }, []), null)
  assert.equal(rolloutStopped(r, [intent('20261202T000000.000Z-new')]), null, 'superseded')
  assert.notEqual(rolloutStopped(r, [intent('20261202T000000.000Z-own', { box: 'web-01' })]), null)
})

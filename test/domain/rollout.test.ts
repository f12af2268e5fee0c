import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import {
  advance,
  assignWaves,
  changeEvent,
  cutWaves,
  eventLine,
  operatorChange,
  progressLine,
  deadlinePassed,
  fleetRecords,
  mayStart,
  parseWaves,
  predecessorOf,
  waveVerdict,
  withRolloutIntents,
  type BoxProgress,
  type RolloutRecord,
} from '../../src/domain/rollout.js'
import { selectIntent } from '../../src/domain/intent.js'

const labels = (n: number) => Array.from({ length: n }, (_, i) => `web-${String(i).padStart(3, '0')}`)

function rollout(over: Partial<RolloutRecord> = {}): RolloutRecord {
  return {
    id: '20261203T100000.000Z-abcd',
    mode: 'nested',
    force: false,
    waves: [['a'], ['b', 'c', 'd'], ['e', 'f']],
    maxParallel: 2,
    progressDeadlineMs: 60_000,
    onFailure: 'pause',
    maxFailedRows: 0,
    state: 'running',
    wave: 0,
    waveOpenedAt: '2026-12-03T10:00:00.000Z',
    reason: '',
    recordedAt: '2026-12-03T10:00:00.000Z',
    by: 'ops@host',
    message: '',
    ...over,
  }
}

const done = (failedRows = 0): BoxProgress => ({ done: true, failedRows })
const moving: BoxProgress = { done: false, failedRows: 0 }
const T0 = Date.parse('2026-12-03T10:00:00.000Z')

void describe('parseWaves / assignWaves', () => {
  void it('cuts 1,10%,50%,100% of 100 boxes into waves of 1, 9, 40 and 50', () => {
    const waves = assignWaves('r1', labels(100), parseWaves('1,10%,50%,100%'))
    assert.deepEqual(
      waves.map((w) => w.length),
      [1, 9, 40, 50],
    )
    assert.equal(new Set(waves.flat()).size, 100)
  })

  void it('drops waves left empty on a small fleet, and keeps every box', () => {
    const waves = assignWaves('r1', labels(3), parseWaves('1,10%,50%,100%'))
    assert.deepEqual(
      waves.map((w) => w.length),
      [1, 1, 1],
    )
  })

  void it('is fixed by the rollout id and the labels, whatever order they came in', () => {
    const a = assignWaves('r1', labels(20), parseWaves('1,50%,100%'))
    const b = assignWaves('r1', labels(20).reverse(), parseWaves('1,50%,100%'))
    assert.deepEqual(a, b)
    assert.notDeepEqual(assignWaves('r2', labels(20), parseWaves('1,50%,100%')), a)
  })

  void it('refuses a bad item, naming it, and waves that leave boxes out', () => {
    assert.throws(() => parseWaves('1,x,100%'), /item "x"/)
    assert.throws(() => parseWaves('0,100%'), /item "0"/)
    assert.throws(() => parseWaves('1,150%'), /item "150%"/)
    assert.throws(() => parseWaves('1,50%'), /last wave must be 100%/)
    assert.throws(() => assignWaves('r', [], parseWaves('100%')), /no live box/)
  })
})

void describe('mayStart: the open wave only, never more than maxParallel moving', () => {
  const live = new Set(['a', 'b', 'c', 'd', 'e', 'f'])
  void it('starts no box of a wave not yet open', () => {
    assert.equal(mayStart(rollout(), 'a', new Map(), live), true)
    assert.equal(mayStart(rollout(), 'b', new Map(), live), false)
  })

  void it('lets box i of the wave start once box i - N is done (N lanes)', () => {
    const r = rollout({ wave: 1 })
    assert.equal(predecessorOf(r, 'd'), 'b')
    const p = new Map([['a', done()]])
    assert.equal(mayStart(r, 'b', p, live), true)
    assert.equal(mayStart(r, 'c', p, live), true)
    assert.equal(mayStart(r, 'd', p, live), false)
    p.set('b', moving).set('c', moving)
    assert.equal(mayStart(r, 'd', p, live), false)
    p.set('b', done())
    assert.equal(mayStart(r, 'd', p, live), true)
  })

  void it('passes a lane on past a box that left the fleet unstarted, and starts no box twice', () => {
    const r = rollout({ wave: 1 })
    assert.equal(mayStart(r, 'd', new Map(), new Set(['c', 'd'])), true)
    assert.equal(mayStart(r, 'b', new Map([['b', moving]]), live), false)
  })

  void it('keeps a lane for a started box that left: it may be moving still, or come back', () => {
    const r = rollout({ wave: 1 })
    assert.equal(mayStart(r, 'd', new Map([['b', moving]]), new Set(['c', 'd'])), false)
    assert.equal(mayStart(r, 'd', new Map([['b', done()]]), new Set(['c', 'd'])), true)
  })

  void it('starts nothing while paused', () => {
    assert.equal(mayStart(rollout({ state: 'paused' }), 'a', new Map(), live), false)
  })
})

void describe('waveVerdict and advance', () => {
  const live = new Set(['a', 'b', 'c', 'd', 'e', 'f'])
  void it('opens the next wave only once every box of the open one is done', () => {
    const r = rollout({ wave: 1 })
    const p = new Map([
      ['a', done()],
      ['b', done()],
      ['c', done()],
    ])
    const v = waveVerdict(r, p, live)
    assert.deepEqual(v, { kind: 'under-way', pending: ['d'] })
    assert.equal(advance(r, v, T0 + 1000), null)
    p.set('d', done())
    const next = advance(r, waveVerdict(r, p, live), T0 + 2000)
    assert.equal(next?.wave, 2)
    assert.equal(next?.state, 'running')
    assert.equal(next?.waveOpenedAt, new Date(T0 + 2000).toISOString())
  })

  void it('ends done after the last wave passes', () => {
    const r = rollout({ wave: 2 })
    const p = new Map([
      ['e', done()],
      ['f', done()],
    ])
    assert.equal(advance(r, waveVerdict(r, p, live), T0)?.state, 'done')
  })

  void it('fails a wave over the row threshold, and acts as --on-failure says', () => {
    const p = new Map([['a', done(3)]])
    const v = waveVerdict(rollout(), p, live)
    assert.equal(v.kind, 'failed')
    assert.match(v.kind === 'failed' ? v.why : '', /3 rows not nested \(on a\), over the threshold of 0/)
    assert.equal(advance(rollout(), v, T0)?.state, 'paused')
    assert.equal(advance(rollout({ onFailure: 'freeze' }), v, T0)?.state, 'frozen')
    assert.equal(advance(rollout({ onFailure: 'revert' }), v, T0)?.state, 'reverted')
    assert.equal(waveVerdict(rollout({ maxFailedRows: 3 }), p, live).kind, 'passed')
  })

  void it('fails a wave whose box left the fleet before it was done', () => {
    const v = waveVerdict(rollout(), new Map([['a', moving]]), new Set(['b']))
    assert.equal(v.kind, 'failed')
    assert.match(v.kind === 'failed' ? v.why : '', /box a of wave 1 left the fleet/)
  })

  void it('pauses once the progress deadline passes, naming the boxes waited on', () => {
    const r = rollout()
    const v = waveVerdict(r, new Map([['a', moving]]), live)
    assert.equal(deadlinePassed(r, T0 + 59_000), false)
    assert.equal(advance(r, v, T0 + 59_000), null)
    assert.equal(deadlinePassed(r, T0 + 61_000), true)
    const next = advance(r, v, T0 + 61_000)
    assert.equal(next?.state, 'paused')
    assert.match(next?.reason ?? '', /progress deadline: wave 1 did not pass within 60s \(waiting on a\)/)
  })

  void it('changes nothing in a rollout that is not running', () => {
    assert.equal(advance(rollout({ state: 'paused' }), { kind: 'passed', failedRows: 0 }, T0), null)
  })
})

void describe('withRolloutIntents', () => {
  const older = { id: '20261203T090000.000Z-aaaa', mode: 'flat', force: false, recordedAt: '', by: '' }
  const newer = { id: '20261203T110000.000Z-bbbb', mode: 'flat', force: false, recordedAt: '', by: '' }
  void it("makes the rollout a started box's intent, and none of a box not started", () => {
    const r = rollout()
    const on = withRolloutIntents([older], [r], 'a', () => true)
    assert.deepEqual(selectIntent(on, 'a'), { found: true, intent: { ...on[1], box: 'a' } })
    assert.equal(on[1]?.mode, 'nested')
    const off = withRolloutIntents([older], [r], 'b', () => false)
    assert.deepEqual(selectIntent(off, 'b'), { found: true, intent: older })
  })

  void it('loses to a record made later, and stops standing once reverted', () => {
    const r = rollout()
    assert.equal(
      selectIntent(
        withRolloutIntents([older, newer], [r], 'a', () => true),
        'a',
      ).found,
      true,
    )
    const read = selectIntent(
      withRolloutIntents([older, newer], [r], 'a', () => true),
      'a',
    )
    assert.equal(read.found ? read.intent.id : '', newer.id)
    const back = selectIntent(
      withRolloutIntents([older], [rollout({ state: 'reverted' })], 'a', () => true),
      'a',
    )
    assert.equal(back.found ? back.intent.id : '', older.id)
  })
})

void describe('fleetRecords', () => {
  void it("judges each started box against the rollout's intent, and the others against the records", () => {
    const older = { id: '20261203T090000.000Z-aaaa', mode: 'flat', force: false, recordedAt: '', by: '' }
    const recs = fleetRecords([older], rollout(), new Map([['a', done()]]))
    const a = selectIntent(recs, 'a')
    const b = selectIntent(recs, 'b')
    assert.equal(a.found ? `${a.intent.id}/${a.intent.mode}` : '', `${rollout().id}/nested`)
    assert.equal(b.found ? b.intent.id : '', older.id)
    assert.deepEqual(fleetRecords([older], rollout({ state: 'reverted' }), new Map([['a', done()]])), [older])
  })
})

void describe('manual gates, operator changes, counts and events', () => {
  const live = new Set(['a', 'b', 'c', 'd', 'e', 'f'])
  const by = { by: 'ops@h', at: '2026-12-03T10:05:00.000Z' }

  void it('reads pause as a gate before the next wave, and refuses one first or twice in a row', () => {
    const { waves, gates } = cutWaves('r1', labels(10), parseWaves('1,pause,50%,100%'))
    assert.deepEqual(
      waves.map((w) => w.length),
      [1, 4, 5],
    )
    assert.deepEqual(gates, [1])
    assert.throws(() => parseWaves('pause,100%'), /a pause stands between two waves/)
    assert.throws(() => parseWaves('1,pause,pause,100%'), /a pause stands between two waves/)
    assert.throws(() => parseWaves('1,100%,pause'), /last wave must be 100%/)
  })

  void it('waits at a gate once the wave before it passed, and promote opens it', () => {
    const r = rollout({ gates: [1] })
    const next = advance(r, waveVerdict(r, new Map([['a', done()]]), live), T0)
    assert.equal(next?.state, 'waiting')
    assert.ok(next !== null)
    assert.equal(next.cause, 'manual_gate')
    const out = operatorChange(next, { kind: 'promote' }, by)
    assert.ok(!('refused' in out))
    assert.equal(out.next.state, 'running')
    assert.equal(out.next.wave, 1)
    assert.equal(out.next.cause, undefined)
    assert.equal(out.event.kind, 'promoted')
  })

  void it('refuses what cannot be: a box in no wave, a retry of a box not started, a final rollout', () => {
    const r = rollout()
    assert.deepEqual(
      (operatorChange(r, { kind: 'retry', box: 'zz', started: false }, by) as { refused: string }).refused,
      'box',
    )
    assert.match(
      (operatorChange(r, { kind: 'retry', box: 'b', started: false }, by) as { why: string }).why,
      /has not started/,
    )
    assert.match((operatorChange(rollout({ state: 'done' }), { kind: 'pause' }, by) as { why: string }).why, /over/)
    assert.match(
      (operatorChange(rollout({ wave: 2 }), { kind: 'promote' }, by) as { why: string }).why,
      /wave 3 is the last/,
    )
  })

  void it('leaves a skipped box out of the verdict and the lanes; a retried box is not done until it answers', () => {
    const r = rollout({ wave: 1, skipped: { b: { by: 'ops', at: '', message: 'dead' } } })
    const p = new Map([
      ['c', done()],
      ['d', done()],
    ])
    assert.equal(waveVerdict(r, p, new Set(['c', 'd'])).kind, 'passed')
    assert.equal(mayStart(r, 'd', new Map([['c', moving]]), live), true, "b's lane is free")
    const retried = { ...r, retries: { c: 1 } }
    assert.deepEqual(waveVerdict(retried, p, live), { kind: 'under-way', pending: ['c'] })
    assert.equal(waveVerdict(retried, new Map([...p, ['c', { ...done(), retried: 1 }]]), live).kind, 'passed')
  })

  void it('counts as moving only started boxes not done, and deferred rows apart', () => {
    const p = new Map<string, BoxProgress>([
      ['a', { done: true, failedRows: 0, deferredRows: 2 }],
      ['b', moving],
    ])
    assert.equal(
      progressLine(rollout({ wave: 1, state: 'paused', reason: 'x', cause: 'operator_pause' }), p),
      `rollout ${rollout().id} (nested): wave 2/3, 1/6 boxes done, 1 moving, 2 deferred rows; paused: x [operator_pause]`,
    )
  })

  void it('says an event in one line', () => {
    const e = changeEvent(
      rollout(),
      rollout({ state: 'paused', reason: 'lunch', cause: 'operator_pause' }),
      'T',
      'u@h',
      {
        message: 'm',
      },
    )
    assert.equal(eventLine(e), 'T paused wave 1 by u@h: lunch [operator_pause] — "m"')
  })
})

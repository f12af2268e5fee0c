// The rollout follower against an in-memory port (no etcd): what a box
// writes as its progress from its summary (deferred rows apart from failed
// ones; written again whenever the summary's counts change, not once), and
// an operator's retry, which runs the box's leg and is answered by the
// summary of a run that ended after it.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { RolloutFollower } from '../../src/agent/rollout-follower.js'
import type { BoxSummary } from '../../src/domain/box-summary.js'
import { systemClock } from '../../src/domain/ports.js'
import type {
  ActiveRollout,
  BoxProgress,
  BoxReport,
  RolloutEvent,
  RolloutPort,
  RolloutRecord,
  StoredRollout,
} from '../../src/domain/rollout.js'
import { FakeLogger } from '../domain/fakes.js'
import { until } from '../helpers/until.js'

const ID = '20261207T100000.000Z-abcd'

function rollout(over: Partial<RolloutRecord> = {}): RolloutRecord {
  return {
    id: ID,
    mode: 'nested',
    force: false,
    waves: [['box-a'], ['box-b']],
    maxParallel: 1,
    progressDeadlineMs: 600_000,
    onFailure: 'pause',
    maxFailedRows: 0,
    state: 'running',
    wave: 0,
    waveOpenedAt: new Date().toISOString(),
    reason: '',
    recordedAt: new Date().toISOString(),
    by: 'ops@test',
    message: '',
    ...over,
  }
}

/** Only what the follower of one box calls; the record is as the test sets it. */
class MemPort implements RolloutPort {
  record: RolloutRecord
  rev = 1
  readonly started = new Set<string>()
  readonly reports: Array<{ box: string; report: BoxReport }> = []
  readonly log: RolloutEvent[] = []
  readonly closed = new AbortController().signal
  #onChange: (() => void) | undefined

  constructor(r: RolloutRecord) {
    this.record = r
  }
  set(r: RolloutRecord): void {
    this.record = r
    this.rev++
    this.#onChange?.()
  }
  describe = () => 'mem'
  list = () => Promise.resolve([{ record: this.record, rev: String(this.rev) }])
  get = () => Promise.resolve({ record: this.record, rev: String(this.rev) })
  active = (): Promise<ActiveRollout> =>
    Promise.resolve({ pointerRev: '1', current: { record: this.record, rev: String(this.rev) } })
  create = () => Promise.resolve(false)
  update(s: StoredRollout, next: RolloutRecord, _signal: AbortSignal, _i?: unknown, e?: RolloutEvent) {
    if (s.rev !== String(this.rev)) return Promise.resolve(false)
    if (e !== undefined) this.log.push(e)
    this.set(next)
    return Promise.resolve(true)
  }
  recordIntentAborting = () => Promise.resolve(false)
  start(_s: StoredRollout, box: string) {
    this.started.add(box)
    return Promise.resolve(true)
  }
  /** No lane is ever held here: these boxes are alone in theirs. */
  laneHolder = (_id: string, _wave: number, lane: number) => Promise.resolve({ lane, box: null, rev: '0' })
  putProgress(_id: string, box: string, _wave: number, report: BoxReport) {
    this.reports.push({ box, report })
    return Promise.resolve()
  }
  hasStarted = (_id: string, box: string) => Promise.resolve(this.started.has(box))
  hasFinished = () => Promise.resolve(false)
  isLive = () => Promise.resolve(true)
  progress(): Promise<Map<string, BoxProgress>> {
    const out = new Map<string, BoxProgress>()
    for (const b of this.started) out.set(b, { done: false, failedRows: 0 })
    for (const { box, report } of this.reports) out.set(box, { done: true, ...report })
    return Promise.resolve(out)
  }
  doneCount = () => Promise.resolve(new Set(this.reports.map((r) => r.box)).size)
  liveBoxes = () => Promise.resolve(new Set(['box-a', 'box-b']))
  events = () => Promise.resolve(this.log)
  /** As etcd's watch does when it comes up: tells once at once. */
  watch(onChange: () => void): void {
    this.#onChange = onChange
    queueMicrotask(onChange)
  }
}

function summary(counts: Record<string, number>, over: Partial<BoxSummary['leg']> = {}): BoxSummary {
  return {
    box: 'box-a',
    version: 'test',
    intent: ID,
    mode: 'nested',
    converged: false,
    counts,
    held: 0,
    leg: {
      running: false,
      pending: false,
      lastRunAt: '2026-12-07T10:00:01.000Z',
      withheld: { deferred: 0, refused: 0, failed: 0, kept: 0, heldBy: {} },
      ...over,
    },
    at: new Date().toISOString(),
  }
}

function follow(port: MemPort, kickLeg?: () => void) {
  const life = new AbortController()
  const f = new RolloutFollower({
    port,
    box: 'box-a',
    clock: systemClock,
    logger: new FakeLogger(),
    signal: life.signal,
    tickMs: 20,
    evaluateMs: 20,
    kickLeg,
  })
  f.start()
  return { f, stop: () => life.abort() }
}

void test('a row deferred for its wake grace is not a failed row: the wave passes on the rest', async (t) => {
  const port = new MemPort(rollout())
  const { f, stop } = follow(port)
  t.after(stop)
  await until('box-a to start', () => port.started.has('box-a'))
  const withheld = { deferred: 1, refused: 0, failed: 0, kept: 0, heldBy: {} }
  f.noteSummary(summary({ nested: 9, flat: 1 }, { withheld, retryAt: '2026-12-07T10:10:00.000Z' }))
  const first = await until('its progress', () => port.reports[0])
  assert.deepEqual(first.report, { failedRows: 0, deferredRows: 1, retried: 0 })
  await until('the next wave to open', () => port.record.wave === 1 && port.record.state === 'running')
})

void test('a box rewrites its progress when its counts change after its end: a held row fixed is seen', async (t) => {
  const port = new MemPort(rollout())
  const { f, stop } = follow(port)
  t.after(stop)
  await until('box-a to start', () => port.started.has('box-a'))
  const held = { deferred: 0, refused: 0, failed: 0, kept: 0, heldBy: { second_name: 1 } }
  f.noteSummary(summary({ nested: 9, fenced: 1 }, { withheld: held }))
  await until('the wave to fail on the held row', () => port.record.state === 'paused')
  assert.equal(port.record.cause, 'failed_rows')
  f.noteSummary(summary({ nested: 10 }, { lastRunAt: '2026-12-07T10:05:00.000Z' }))
  const fixed = await until('its progress to be written again', () =>
    port.reports.find((r) => r.report.failedRows === 0),
  )
  assert.deepEqual(fixed.report, { failedRows: 0, deferredRows: 0, retried: 0 })
})

void test("an operator's retry runs the box's leg, and is answered by a run that ended after it", async (t) => {
  const port = new MemPort(rollout({ waves: [['box-a', 'box-b']], maxParallel: 2 }))
  let kicks = 0
  const { f, stop } = follow(port, () => kicks++)
  t.after(stop)
  await until('box-a to start', () => port.started.has('box-a'))
  f.noteSummary(summary({ nested: 10 }))
  await until('its progress', () => port.reports.length === 1)
  port.set({ ...port.record, retries: { 'box-a': 1 } })
  await until('the leg to be kicked', () => kicks === 1)
  // The same summary again (the run has not ended): no answer yet.
  f.noteSummary(summary({ nested: 10 }))
  await new Promise((r) => setTimeout(r, 100))
  assert.equal(port.reports.length, 1)
  f.noteSummary(summary({ nested: 10 }, { lastRunAt: '2026-12-07T10:09:00.000Z' }))
  const answered = await until('the retry to be answered', () => port.reports[1])
  assert.deepEqual(answered.report, { failedRows: 0, deferredRows: 0, retried: 1 })
  assert.equal(kicks, 1, 'one run per retry')
})

void test('a summary whose leg could not read the intent is no end of its pass: the box is not done', async (t) => {
  const port = new MemPort(rollout())
  let looks = 0
  const life = new AbortController()
  t.after(() => life.abort())
  const f = new RolloutFollower({
    port,
    box: 'box-a',
    clock: systemClock,
    logger: new FakeLogger(),
    signal: life.signal,
    tickMs: 20,
    evaluateMs: 20,
    onState: () => looks++,
  })
  f.start()
  await until('box-a to start', () => port.started.has('box-a'))
  // The leg's read failed: nothing moved, a retry is due, the summary names the intent the poller read.
  f.noteSummary({ ...summary({ flat: 10 }, { retryAt: '2026-12-07T10:00:05.000Z' }), mode: 'unreadable' })
  const seen = looks
  await until('two more looks', () => looks >= seen + 2)
  assert.deepEqual(port.reports, [])
  f.noteSummary(summary({ nested: 10 }, { lastRunAt: '2026-12-07T10:00:06.000Z' }))
  const first = await until('its progress', () => port.reports[0])
  assert.deepEqual(first.report, { failedRows: 0, deferredRows: 0, retried: 0 })
})

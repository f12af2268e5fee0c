// Staged rollouts on a real etcd (test/helpers/etcd.ts): the record's
// compare-and-swap transactions (one of two racing changes lands, a box
// starts once and only while the record it read stands), then whole
// rollouts across in-process boxes (the agent's store, watch, lease,
// summary, follower and poller; a stand-in pass): the waves open in order
// with at most N moving, a passed deadline pauses, a box that leaves fails
// its wave, and the CLI shows and changes it.
import assert from 'node:assert/strict'
import { PassThrough } from 'node:stream'
import { test, type TestContext } from 'node:test'
import { fleetCommand } from '../../../src/cli/commands/fleet.js'
import { loadConfig } from '../../../src/config.js'
import type { RolloutPort, RolloutRecord } from '../../../src/domain/rollout.js'
import { selectIntent } from '../../../src/domain/intent.js'
import { SimFleet, movesBroken } from '../../helpers/sim-fleet.js'
import { until } from '../../helpers/until.js'
import { live, memLogger, useSharedEtcd } from './fixtures.js'
import { Registry } from 'prom-client'
import { RolloutMetrics } from '../../../src/metrics/rollout-metrics.js'

const shared = useSharedEtcd()

function rollout(over: Partial<RolloutRecord> = {}): RolloutRecord {
  const at = new Date().toISOString()
  return {
    id: '20261203T100000.000Z-abcd',
    mode: 'nested',
    force: false,
    waves: [['a'], ['b', 'c']],
    maxParallel: 1,
    progressDeadlineMs: 600_000,
    onFailure: 'pause',
    maxFailedRows: 0,
    state: 'running',
    wave: 0,
    waveOpenedAt: at,
    reason: '',
    recordedAt: at,
    by: 'ops@test',
    message: '',
    ...over,
  }
}

function portFor(t: TestContext): { port: RolloutPort; prefix: string } {
  const { store, prefix } = shared.storeFor(t)
  return { port: store.rollouts(), prefix }
}

async function run(argv: string[], t: TestContext, prefix: string) {
  const { store } = shared.storeFor(t, [shared.server.url], { prefix })
  const stdout = new PassThrough()
  const stderr = new PassThrough()
  let out = ''
  let err = ''
  stdout.on('data', (d: Buffer) => (out += d.toString()))
  stderr.on('data', (d: Buffer) => (err += d.toString()))
  const config = loadConfig({ CARLOS_BOX: 'ops', CARLOS_DEPLOYMENT_ETCD: shared.server.url })
  const code = await fleetCommand(argv, { config, store, stdout, stderr, everyMs: 100 })
  return { code, out, err }
}

void test('a rollout is created only over the pointer as read; two racing changes: one lands', async (t) => {
  const { port } = portFor(t)
  const seen = await port.active(live())
  assert.deepEqual(seen, { pointerRev: '0', current: undefined })
  assert.equal(await port.create(rollout(), seen, live()), true)
  assert.equal(await port.create(rollout({ id: 'other' }), seen, live()), false, 'a stale pointer refuses')
  const s = await port.get(rollout().id, live())
  assert.ok(s !== undefined)
  const results = await Promise.all([
    port.update(s, { ...s.record, wave: 1 }, live()),
    port.update(s, { ...s.record, state: 'paused', reason: 'x' }, live()),
  ])
  assert.deepEqual(
    results.filter((x) => x),
    [true],
    'exactly one of two changes from one revision lands',
  )
})

void test('a box starts once, and only while the record it read still stands', async (t) => {
  const { port } = portFor(t)
  await port.create(rollout(), await port.active(live()), live())
  const s = await port.get(rollout().id, live())
  assert.ok(s !== undefined)
  assert.equal(await port.start(s, 'a', 0, live()), true)
  assert.equal(await port.start(s, 'a', 0, live()), false, 'never twice')
  assert.equal(await port.hasStarted(s.record.id, 'a', 0, live()), true)
  assert.equal(await port.update(s, { ...s.record, state: 'paused', reason: 'p' }, live()), true)
  assert.equal(await port.start(s, 'b', 1, live()), false, 'the record moved on (paused): the box does not start')
  assert.equal(await port.hasStarted(s.record.id, 'b', 1, live()), false)
})

void test('the agents run a rollout to its end: waves in order, at most N moving, each box once', async (t) => {
  const { prefix } = portFor(t)
  const fleet = new SimFleet({ endpoints: [shared.server.url], prefix, boxes: 6, passMs: 150 })
  t.after(() => fleet.stop())
  await fleet.start()
  const rec = await run(['rollout', 'migrate', '--waves', '1,50%,100%', '--max-parallel', '2', '-m', 'go'], t, prefix)
  assert.equal(rec.code, 0, rec.err)
  assert.match(rec.out, /recorded rollout \S+ toward nested: 3 waves of 1, 2, 3 boxes, at most 2 moving at once/)
  // The command has returned: nothing of the operator's runs from here on.
  const { store } = shared.storeFor(t, [shared.server.url], { prefix })
  const port = store.rollouts()
  const done = await until(
    'the rollout to be done',
    async () => {
      const a = await port.active(live())
      return a.current?.record.state === 'done' ? a.current.record : undefined
    },
    30_000,
  )
  assert.deepEqual(movesBroken(done, fleet.moves, fleet.maxMoving), [])
  assert.deepEqual(fleet.errors(), [])
  // It leaves a fleet-wide intent of its layout, just after its own id.
  const records = await store.list(live())
  const read = selectIntent(records, 'box-0000')
  assert.equal(read.found ? `${read.intent.id}/${read.intent.mode}` : '', `${done.id}.done/nested`)
  const status = await run(['rollout', 'status'], t, prefix)
  assert.equal(status.code, 0)
  assert.match(status.out, /wave 3\/3, 6\/6 boxes done, 0 moving; done/)
  assert.match(status.out, /recorded .* by .*: go/)
})

void test('fleet status judges a box that started in the rollout against the rollout intent it is on', async (t) => {
  const { prefix } = portFor(t)
  // Each box's stand-in pass takes 2 s: the second wave's box is still moving when the first is done.
  const fleet = new SimFleet({ endpoints: [shared.server.url], prefix, boxes: 2, passMs: 2000 })
  t.after(() => fleet.stop())
  await fleet.start()
  const rec = await run(['rollout', 'migrate', '--waves', '1,100%', '--max-parallel', '1'], t, prefix)
  assert.equal(rec.code, 0, rec.err)
  const { store } = shared.storeFor(t, [shared.server.url], { prefix })
  const port = store.rollouts()
  const { record, first } = await until(
    'the first wave to be done',
    async () => {
      const a = await port.active(live())
      if (a.current === undefined) return undefined
      const r = a.current.record
      const progress = await port.progress(r.id, 0, live())
      const box = r.waves[0]?.[0]
      return box !== undefined && progress.get(box)?.done === true ? { record: r, first: box } : undefined
    },
    30_000,
  )
  const status = await run(['status', '--json'], t, prefix)
  const view = JSON.parse(status.out) as { boxes: { box: string; wants: string | null; state: string }[] }
  const row = view.boxes.find((b) => b.box === first)
  assert.deepEqual(
    { wants: row?.wants, state: row?.state },
    { wants: record.id, state: 'converged' },
    `the first wave's box is on the rollout's intent: ${status.out}`,
  )
})

void test('a passed progress deadline pauses the rollout, says why, and resume goes on', async (t) => {
  const { prefix } = portFor(t)
  // The deadline must pass while box-0000 still moves (a look comes each tick after it), and must not pass for
  // the second wave after the resume: both seconds apart, on a loaded machine too.
  const deadlineMs = 6_000
  const slow = (box: string) => (box === 'box-0000' ? 2 * deadlineMs : 50)
  const { logger, lines } = memLogger()
  const registry = new Registry()
  const gauges = new RolloutMetrics(registry)
  const fleet = new SimFleet({
    endpoints: [shared.server.url],
    prefix,
    boxes: 3,
    passMs: slow,
    logger,
    onRolloutState: (box, r) => box === 'box-0001' && gauges.set(r),
  })
  t.after(() => fleet.stop())
  await fleet.start()
  const { store } = shared.storeFor(t, [shared.server.url], { prefix })
  const port = store.rollouts()
  const live3 = [...(await port.liveBoxes(live()))].sort()
  const r = rollout({ waves: [['box-0000', 'box-0001'], ['box-0002']], maxParallel: 2, progressDeadlineMs: deadlineMs })
  assert.deepEqual(live3, ['box-0000', 'box-0001', 'box-0002'])
  assert.equal(await port.create(r, await port.active(live()), live()), true)
  const paused = await until('the deadline to pause it', async () => {
    const a = await port.active(live())
    return a.current?.record.state === 'paused' ? a.current.record : undefined
  })
  assert.match(paused.reason, /progress deadline: wave 1 did not pass within 6s \(waiting on box-0000\)/)
  assert.ok(!fleet.moves.some((m) => m.box === 'box-0002'), 'the next wave did not open')
  // The agent that paused it says so at warn once its transaction has answered, which may be after the test
  // reads the record.
  await until('the agent that paused it to say so at warn', () =>
    lines.some((l) => l.level === 'warn' && /rollout: rollout \S+ is paused: progress deadline/.test(l.msg)),
  )
  await until('the gauge to say paused', async () =>
    (await registry.metrics()).includes('carlos_layout_rollout_state{state="paused"} 1'),
  )
  assert.match(await registry.metrics(), /carlos_layout_rollout_wave 1\n/)
  const st = await run(['rollout', 'status', '--wait'], t, prefix)
  assert.equal(st.code, 1)
  assert.match(st.err, /is paused: progress deadline/)
  // Resumed once the slow box is through: the deadline starts again from the resume.
  await until('box-0000 to end its move', () => fleet.moves.some((m) => m.box === 'box-0000'))
  const resumed = await run(['rollout', 'resume'], t, prefix)
  assert.equal(resumed.code, 0, resumed.err)
  const done = await until('the rollout to be done after resume', async () => {
    const a = await port.active(live())
    return a.current?.record.state === 'done' ? a.current.record : undefined
  })
  assert.deepEqual(movesBroken(done, fleet.moves, fleet.maxMoving), [])
})

void test('a box that leaves the fleet mid-wave fails the wave: --on-failure freeze ends it there', async (t) => {
  const { prefix } = portFor(t)
  const fleet = new SimFleet({
    endpoints: [shared.server.url],
    prefix,
    boxes: 3,
    passMs: (box) => (box === 'box-0001' ? 60_000 : 50),
    store: { boxTtlMs: 1_000 },
  })
  t.after(() => fleet.stop())
  await fleet.start()
  const { store } = shared.storeFor(t, [shared.server.url], { prefix })
  const port = store.rollouts()
  const r = rollout({ waves: [['box-0000', 'box-0001'], ['box-0002']], maxParallel: 2, onFailure: 'freeze' })
  await port.create(r, await port.active(live()), live())
  await until('box-0001 to start', () => port.hasStarted(r.id, 'box-0001', 0, live()))
  await fleet.box('box-0001').stop()
  const frozen = await until(
    'the wave to fail',
    async () => {
      const a = await port.active(live())
      return a.current?.record.state === 'frozen' ? a.current.record : undefined
    },
    15_000,
  )
  assert.match(frozen.reason, /box box-0001 of wave 1 left the fleet before it was done/)
  assert.ok(!fleet.moves.some((m) => m.box === 'box-0002'))
  // The box lost is an event of the rollout: who judged it, when, and why, with its cause.
  const lost = (await port.events(r.id, live())).filter((e) => e.cause === 'box_gone')
  assert.deepEqual(
    lost.map((e) => [e.kind, e.state, e.wave, e.by.startsWith('agent box-000'), e.reason]),
    [['frozen', 'frozen', 1, true, frozen.reason]],
  )
})

void test('rollout status --wait exits 1 at once, naming it, when a box the rollout waits on is gone', async (t) => {
  const { prefix } = portFor(t)
  const { store } = shared.storeFor(t, [shared.server.url], { prefix })
  const port = store.rollouts()
  // No agent runs: box-0009's lease expired, and none is left to pause the rollout for it.
  const r = rollout({ waves: [['box-0009']], maxParallel: 1 })
  await port.create(r, await port.active(live()), live())
  const t0 = Date.now()
  const waited = await run(['rollout', 'status', '--wait', '--timeout', '60'], t, prefix)
  assert.equal(waited.code, 1, waited.err)
  assert.match(waited.err, /box box-0009 of wave 1 is gone: rollout \S+ cannot pass its wave until its agent is back/)
  assert.ok(Date.now() - t0 < 30_000, 'it did not wait for the timeout')
  // Skipped, the box is waited on no more: --wait waits (here until its timeout, with no agent to end it).
  assert.equal((await run(['rollout', 'skip', 'box-0009', '-m', 'retired'], t, prefix)).code, 0)
  const skipped = await run(['rollout', 'status', '--wait', '--timeout', '1'], t, prefix)
  assert.equal(skipped.code, 1)
  assert.match(skipped.err, /is running after waiting 1s/)
})

void test('rollout status --wait exits 1 on a rollout paused, waiting at a gate, frozen or aborted', async (t) => {
  const { prefix } = portFor(t)
  const { store } = shared.storeFor(t, [shared.server.url], { prefix })
  const port = store.rollouts()
  const r = rollout({ waves: [['box-0000']] })
  await port.create(r, await port.active(live()), live())
  const stops: Array<Partial<RolloutRecord>> = [
    { state: 'paused', cause: 'operator_pause', reason: 'paused by ops: lunch' },
    { state: 'waiting', cause: 'manual_gate', reason: 'wave 1 passed; wave 2 opens on promote' },
    { state: 'frozen', cause: 'failed_rows', reason: 'wave 1: 3 rows not nested' },
    { state: 'aborted', cause: 'operator_abort', reason: 'aborted by ops' },
  ]
  for (const stop of stops) {
    const { current } = await port.active(live())
    assert.ok(current !== undefined)
    assert.ok(await port.update(current, { ...current.record, ...stop }, live()))
    const waited = await run(['rollout', 'status', '--wait', '--timeout', '60'], t, prefix)
    assert.equal(waited.code, 1, `${stop.state}: ${waited.err}`)
    assert.ok(waited.err.includes(`is ${stop.state}: ${stop.reason}`), waited.err)
  }
})

void test("an operator's retry runs the box's leg again, and the box answers it", async (t) => {
  const { prefix } = portFor(t)
  const fleet = new SimFleet({ endpoints: [shared.server.url], prefix, boxes: 2, passMs: 50 })
  t.after(() => fleet.stop())
  await fleet.start()
  const rec = await run(['rollout', 'migrate', '--waves', '1,pause,100%'], t, prefix)
  assert.equal(rec.code, 0, rec.err)
  const { store } = shared.storeFor(t, [shared.server.url], { prefix })
  const port = store.rollouts()
  const r = await until(
    'the gate',
    async () => {
      const a = await port.active(live())
      return a.current?.record.state === 'waiting' ? a.current.record : undefined
    },
    30_000,
  )
  const first = r.waves[0]?.[0] ?? ''
  const box = fleet.box(first)
  const runs = box.runs
  const retry = await run(['rollout', 'retry', first, '-m', 'once more'], t, prefix)
  assert.equal(retry.code, 0, retry.err)
  await until(
    'the box to answer the retry',
    async () => ((await port.progress(r.id, 0, live())).get(first)?.retried === 1 ? true : undefined),
    30_000,
  )
  assert.ok(box.runs > runs, `the box ran its leg again: ${box.runs} runs, ${runs} before the retry`)
})

void test('a wave over the failed-row threshold with --on-failure revert sends the boxes that moved back', async (t) => {
  const { prefix } = portFor(t)
  const fleet = new SimFleet({
    endpoints: [shared.server.url],
    prefix,
    boxes: 3,
    passMs: 50,
    failRows: (box) => (box === 'box-0000' ? 2 : 0),
  })
  t.after(() => fleet.stop())
  await fleet.start()
  const { store } = shared.storeFor(t, [shared.server.url], { prefix })
  await store.record(
    { id: '20261201T000000.000Z-before', mode: 'flat', force: false, recordedAt: '', by: 'ops' },
    live(),
  )
  const port = store.rollouts()
  const r = rollout({ waves: [['box-0000'], ['box-0001', 'box-0002']], onFailure: 'revert', maxFailedRows: 1 })
  await port.create(r, await port.active(live()), live())
  const reverted = await until('the wave to fail', async () => {
    const a = await port.active(live())
    return a.current?.record.state === 'reverted' ? a.current.record : undefined
  })
  assert.match(reverted.reason, /wave 1: 2 rows not nested \(on box-0000\), over the threshold of 1/)
  await until('box-0000 to be back on flat', () => fleet.moves.some((m) => m.box === 'box-0000' && m.mode === 'flat'))
  assert.deepEqual(
    fleet.moves.map((m) => `${m.box}:${m.mode}`),
    ['box-0000:nested', 'box-0000:flat'],
  )
})

void test('pause, resume and abort change the record; a second rollout is refused while one is in play', async (t) => {
  const { prefix } = portFor(t)
  const fleet = new SimFleet({ endpoints: [shared.server.url], prefix, boxes: 2, passMs: 60_000 })
  t.after(() => fleet.stop())
  await fleet.start()
  assert.equal((await run(['rollout', 'migrate', '--waves', '100%'], t, prefix)).code, 0)
  const again = await run(['rollout', 'revert', '--waves', '100%'], t, prefix)
  assert.equal(again.code, 1)
  assert.match(again.err, /rollout \S+ is running \(wave 1\/1\): let it end, or `layoutd fleet rollout abort` it/)
  assert.match((await run(['rollout', 'pause', '-m', 'lunch'], t, prefix)).out, /paused: paused by .*: lunch/)
  assert.equal((await run(['rollout', 'pause'], t, prefix)).code, 1)
  assert.match((await run(['rollout', 'resume'], t, prefix)).out, /; running$/m)
  assert.match((await run(['rollout', 'abort'], t, prefix)).out, /aborted: aborted by/)
  const now = await run(['rollout', 'revert', '--now'], t, prefix)
  assert.equal(now.code, 0, now.err)
  assert.match(now.out, /recorded intent \S+: every box to flat at once\n/)
})

void test('bad options are usage errors that record nothing', async (t) => {
  const { prefix } = portFor(t)
  const cases: Array<[string[], RegExp]> = [
    [['rollout', 'migrate'], /--waves is required/],
    [['rollout', 'migrate', '--waves', '1,50%'], /the last wave must be 100%/],
    [['rollout', 'migrate', '--waves', '100%', '--on-failure', 'explode'], /--on-failure "explode": pause, revert/],
    [['rollout', 'migrate', '--waves', '100%', '--progress-deadline', '10'], /a duration like 90s/],
    [
      ['rollout', 'migrate', '--waves', '100%', '--max-parallel', '0'],
      /--max-parallel "0": a whole number, at least 1/,
    ],
    [['rollout', 'migrate', '--now'], /--now does not go with migrate/],
    [['rollout', 'jump'], /unknown action "jump"/],
  ]
  for (const [argv, want] of cases) {
    const r = await run(argv, t, prefix)
    assert.equal(r.code, 2, `${argv.join(' ')}: ${r.err}`)
    assert.match(r.err, want)
  }
  assert.equal((await shared.server.range(prefix.replace(/\/$/, '-rollouts/'))).size, 0)
})

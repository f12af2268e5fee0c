// An awake tenant deferred for its wake grace moves as soon as it sleeps
// (design §3 step 2): the activator's release is a serial move, so the row
// neither waits the retry timer nor keeps reading `awake: …m of grace
// left`; and a grace that runs out before the retry interval brings the
// leg back when it ends, not at the interval.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Leg } from '../../src/domain/leg.js'
import { addFlat, agentBox, recordIntent } from '../helpers/agent.js'
import { FakeClock, FakeLogger } from '../domain/fakes.js'
import { until } from '../helpers/until.js'

void test('a release of a host the last run deferred runs the leg again at once, and the host moves', async (t) => {
  // The retry timer is an hour out: only the release can bring the leg back within the test.
  const b = await agentBox(t, { env: { CARLOS_LAYOUT_RETRY: '1h', CARLOS_LAYOUT_POLL: '1h' } })
  await addFlat(b, 'a.example.com')
  await recordIntent(b, 'nested')
  await b.agent.start()
  await until('the agent to be ready', () => b.agent.readiness().ready || undefined)
  const claim = await b.agent.claimWake('a.example.com')
  assert.equal(claim.granted, true)
  const deferred = await until('the run to defer the awake host', () => {
    const r = b.agent.report()
    const row = r.rows['a.example.com']
    return !r.leg.running && !r.leg.pending && row?.code === 'awake_grace' ? r : undefined
  })
  b.agent.kick()
  await until('the kicked run to end with the host still deferred', () => {
    const r = b.agent.report()
    return !r.leg.running && !r.leg.pending && r.leg.lastRun?.startedAt !== deferred.leg.lastRun?.startedAt
      ? true
      : undefined
  })
  assert.equal(b.agent.report().rows['a.example.com']?.code, 'awake_grace')
  b.agent.releaseWake('a.example.com')
  const moved = await until('the host to move nested without a kick', () => {
    const row = b.agent.report().rows['a.example.com']
    return row?.layout === 'nested' ? row : undefined
  })
  assert.equal(moved.reason, '')
})

void test('a run whose awake host has less grace left than the retry interval comes back when it ends', async () => {
  const clock = new FakeClock()
  let runs = 0
  const leg = new Leg({
    clock,
    logger: new FakeLogger(),
    retryMs: 600_000,
    run: () => {
      runs++
      return Promise.resolve({ results: [], retry: true, unfinished: false, retryInMs: 90_000 })
    },
  })
  leg.kick()
  await leg.wait()
  assert.equal(leg.state().retryAt, new Date(clock.now() + 90_000).toISOString())
  clock.advance(90_000)
  await leg.wait()
  assert.equal(runs, 2)
  leg.stop()
})

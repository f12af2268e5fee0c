// A leg that could not finish comes back (design §5.1): the leg's own read
// of the intent fails once while the poller's read succeeded, on a quiet
// fleet (the poller reads once an hour here, so nothing else kicks the
// leg); the retry timer reads again, and the report leaves `unreadable`.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { DeployStore } from '../../src/domain/ports.js'
import { agentBox, recordIntent, withReads } from '../helpers/agent.js'
import { until } from '../helpers/until.js'

/** A store whose next read fails once when the test says so; every other read is the real one. */
function failingOnce(store: DeployStore): { store: DeployStore; reads: () => number; failNext: () => void } {
  let reads = 0
  let fail = false
  return {
    reads: () => reads,
    failNext: () => {
      fail = true
    },
    store: withReads(store, (signal) => {
      reads++
      if (!fail) return store.list(signal)
      fail = false
      return Promise.reject(new Error('etcd: connection reset'))
    }),
  }
}

const RETRY_MS = 5_000

async function gauge(b: { metrics: { text(): Promise<string> } }, name: string): Promise<number> {
  return Number(new RegExp(`^carlos_layout_${name} (\\S+)$`, 'm').exec(await b.metrics.text())?.[1] ?? 'NaN')
}

void test("the leg's own read fails once while the poller's succeeds: a retry is scheduled, the read comes back, the report leaves unreadable without a kick", async (t) => {
  let wrapped: ReturnType<typeof failingOnce> | undefined
  const b = await agentBox(t, {
    // The poller reads once, at start: nothing but the retry timer can come back after the failure. The retry
    // waits seconds: the test must see the failed run's state before the retry replaces it, on a loaded machine too.
    env: { CARLOS_LAYOUT_POLL: '1h', CARLOS_LAYOUT_RETRY: `${RETRY_MS}ms` },
    wrapStore: (s) => (wrapped = failingOnce(s)).store,
  })
  const w = wrapped
  assert.ok(w)
  await recordIntent(b, 'flat')
  await b.agent.start()
  await until('the start-up runs to read flat and end', () => {
    const r = b.agent.report()
    return r.mode === 'flat' && b.agent.readiness().nested.allowed && !r.leg.running && !r.leg.pending
      ? true
      : undefined
  })
  // The leg's own read fails; the poller's read at start succeeded.
  w.failNext()
  const before = Date.now()
  b.agent.kick()
  const failedRun = await until('the run to find the intent unreadable', () => {
    const r = b.agent.report()
    return r.mode === 'unreadable' && !r.leg.running ? r : undefined
  })
  const readsAfterFailure = w.reads()
  const retryAt = failedRun.leg.retryAt
  assert.ok(retryAt !== null, 'a run that could not read its intent schedules a retry')
  const at = Date.parse(retryAt)
  assert.ok(
    at >= before + 0.8 * RETRY_MS && at <= Date.now() + RETRY_MS,
    `retryAt ${retryAt} is one jittered retry interval out`,
  )
  assert.equal(await gauge(b, 'leg_next_retry_timestamp_seconds'), at / 1000)

  const back = await until('the retry to read the intent again, and its run to end', () => {
    const r = b.agent.report()
    return r.mode === 'flat' && !r.leg.running && !r.leg.pending ? r : undefined
  })
  assert.equal(w.reads(), readsAfterFailure + 1, "one read more, the retry's: nothing else came back")
  assert.equal(back.leg.retryAt, null, 'a run that finished clean leaves no retry')
  await until('the gauge to say no retry', async () => (await gauge(b, 'leg_next_retry_timestamp_seconds')) === 0)
})

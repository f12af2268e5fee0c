// The waits of GET /ready/:host?wait= (design §6.4): woken by the fence's
// lift, ended by their time or their client, bounded, and counted.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { GateAnswer } from '../../src/agent-api.js'
import { ReadyWaiters } from '../../src/agent/ready-waiters.js'
import { FenceTable } from '../../src/domain/fence.js'

const H = 'a.example.com'

/** A judge that reads the fence table: fenced is not yet, else ready. */
function setUp(bounds: { perHost?: number; total?: number } = {}) {
  const fence = new FenceTable()
  const gauge: number[] = []
  const judge = (host: string): GateAnswer =>
    fence.fenced(host) === undefined
      ? {
          answer: { granted: true, grant: { host, layout: 'flat', dir: '/d', socket: '/s', db: '' } },
          state: 'ready',
          retryAfter: null,
        }
      : {
          answer: { granted: false, refusal: { host, layout: 'fenced', code: 'fenced_for_move', reason: 'fenced' } },
          state: 'fenced',
          retryAfter: 1,
        }
  const waiters = new ReadyWaiters({ fence, judge, metrics: { setReadyWaiters: (n) => gauge.push(n) }, ...bounds })
  return { fence, waiters, gauge }
}

void test('a wait ends as soon as the fence on its host lifts, not at its end', async () => {
  const { fence, waiters, gauge } = setUp()
  fence.fence([H, 'b.example.com'], 1)
  const started = performance.now()
  // The waits' own bound is a minute: one ended by its timer would be tens of seconds past the lift.
  const waited = waiters.wait(H, 60_000, new AbortController().signal)
  const other = waiters.wait('b.example.com', 60_000, new AbortController().signal)
  assert.equal(waiters.size, 2)
  setTimeout(() => fence.lift([H]), 50)
  const answer = await waited
  assert.equal(answer.state, 'ready')
  assert.ok(performance.now() - started < 30_000, 'woken by the lift, not by a timer')
  assert.equal(waiters.size, 1, 'the other host still waits')
  fence.lift(['b.example.com'])
  assert.equal((await other).state, 'ready')
  assert.deepEqual(gauge, [1, 2, 1, 0])
})

void test('a wait ends at its time with the answer then, and a ready host is not waited for', async () => {
  const { fence, waiters } = setUp()
  assert.equal((await waiters.wait(H, 10_000, new AbortController().signal)).state, 'ready')
  assert.equal(waiters.size, 0)
  fence.fence([H], 1)
  assert.equal((await waiters.wait(H, 30, new AbortController().signal)).state, 'fenced')
  assert.equal(waiters.size, 0)
})

void test('a client that goes away releases its wait', async () => {
  const { fence, waiters, gauge } = setUp()
  fence.fence([H], 1)
  const left = new AbortController()
  const waited = waiters.wait(H, 20_000, left.signal)
  assert.equal(waiters.size, 1)
  left.abort()
  assert.equal((await waited).state, 'fenced')
  assert.equal(waiters.size, 0)
  assert.deepEqual(gauge, [1, 0])
})

void test('waits are bounded per host and in all: beyond the bound, too_many_waiters', async () => {
  const { fence, waiters } = setUp({ perHost: 2, total: 3 })
  fence.fence([H, 'b.example.com', 'c.example.com'], 1)
  const signal = new AbortController()
  const open = [waiters.wait(H, 20_000, signal.signal), waiters.wait(H, 20_000, signal.signal)]
  assert.throws(() => waiters.wait(H, 20_000, signal.signal), {
    code: 'too_many_waiters',
    message: /for this host \(2\)/,
  })
  open.push(waiters.wait('b.example.com', 20_000, signal.signal))
  assert.throws(() => waiters.wait('c.example.com', 20_000, signal.signal), {
    code: 'too_many_waiters',
    message: /on this agent \(3\)/,
  })
  signal.abort()
  await Promise.all(open)
  assert.equal(waiters.size, 0)
})

void test('close ends every wait with its answer now', async () => {
  const { fence, waiters } = setUp()
  fence.fence([H], 1)
  const waited = waiters.wait(H, 20_000, new AbortController().signal)
  waiters.close()
  assert.equal((await waited).state, 'fenced')
})

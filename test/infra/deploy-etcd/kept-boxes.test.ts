// Boxes never vanish from the fleet's view on etcd (design §7.3), against
// the real etcd: a box whose lease expired leaves the live set (listBoxes,
// the rollout's liveBoxes and isLive keep meaning leased-live) but stays
// known with its last summary, gone since the first reader found it so;
// a clean stop marks it gone at once; the kept copy is written with the
// summary, never by a keep-alive; `forget` refuses a live box and an
// unknown one, and removes a gone one; a box that comes back is live again.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { request } from 'undici'
import type { BoxSummary } from '../../../src/domain/box-summary.js'
import type { Clock } from '../../../src/domain/ports.js'
import { AppError } from '../../../src/errors.js'
import { until } from '../../helpers/until.js'
import { live, useSharedEtcd } from './fixtures.js'

const etcd = useSharedEtcd()

function summary(box: string, flat: number): BoxSummary {
  return {
    box,
    version: '0.1.0',
    intent: null,
    mode: 'none',
    converged: false,
    counts: { flat },
    held: 0,
    leg: { running: false, pending: false, lastRunAt: null },
    at: '2026-12-01T08:00:00.000Z',
  }
}

/** A clock whose timers fire only when the test says: renewals held, or run one at a time. */
function heldClock() {
  const timers: Array<() => void> = []
  const clock: Clock = {
    now: () => Date.now(),
    setTimer: (_ms, fn) => {
      timers.push(fn)
      return () => {
        const i = timers.indexOf(fn)
        if (i >= 0) timers.splice(i, 1)
      }
    },
  }
  return { clock, fire: () => timers.splice(0).forEach((fn) => fn()), pending: () => timers.length }
}

/** The revision a key was last written at, read straight from etcd's gateway. */
async function modRevision(url: string, key: string): Promise<string | undefined> {
  const res = await request(`${url}/v3/kv/range`, {
    method: 'POST',
    body: JSON.stringify({ key: Buffer.from(key).toString('base64') }),
    headers: { 'content-type': 'application/json' },
    signal: AbortSignal.timeout(5000),
  })
  const r = (await res.body.json()) as { kvs?: Array<{ mod_revision?: string }> }
  return r.kvs?.[0]?.mod_revision
}

const codeOf = (err: unknown) => (err instanceof AppError ? err.code : String(err))

void test('a box whose lease expired stays known with its last summary, gone since; the live set is leased-live', async (t) => {
  const held = heldClock()
  const dead = etcd.storeFor(t, undefined, { clock: held.clock, boxTtlMs: 1000 })
  const other = etcd.storeFor(t, undefined, { prefix: dead.prefix })
  await dead.store.publishBox(summary('web-01', 3), live())
  await other.store.publishBox(summary('web-02', 5), live())
  const reader = etcd.storeFor(t, undefined, { prefix: dead.prefix })
  // Cut off: no renewal, and the lease runs out.
  await until('the lease to expire', async () => (await reader.store.listBoxes(live())).length === 1, 10_000)
  const port = reader.store.rollouts()
  assert.deepEqual([...(await port.liveBoxes(live()))], ['web-02'], 'the rollout sees the leased boxes alone')
  assert.equal(await port.isLive('web-01', live()), false)

  const before = Date.now()
  const known = await reader.store.listKnownBoxes(live())
  assert.deepEqual(
    known.map((b) => [b.summary.box, b.summary.counts.flat, b.gone?.how ?? 'live']),
    [
      ['web-01', 3, 'expired'],
      ['web-02', 5, 'live'],
    ],
  )
  const since = known[0]?.gone?.since ?? ''
  assert.ok(Date.parse(since) >= before - 1000, since)
  // The first reader's mark is kept: a later read says the same time.
  const again = await etcd.storeFor(t, undefined, { prefix: dead.prefix }).store.listKnownBoxes(live())
  assert.equal(again[0]?.gone?.since, since)

  await assert.rejects(reader.store.forgetBox('web-02', live()), (e) => codeOf(e) === 'box_live')
  await assert.rejects(reader.store.forgetBox('web-09', live()), (e) => codeOf(e) === 'unknown_box')
  assert.equal((await reader.store.listKnownBoxes(live())).length, 2, 'a refused forget changed nothing')

  // It comes back: live again, its gone mark gone with the new summary.
  const back = etcd.storeFor(t, undefined, { prefix: dead.prefix })
  await back.store.publishBox(summary('web-01', 0), live())
  const now = await reader.store.listKnownBoxes(live())
  assert.deepEqual(
    now.map((b) => [b.summary.box, b.summary.counts.flat, b.gone?.how ?? 'live']),
    [
      ['web-01', 0, 'live'],
      ['web-02', 5, 'live'],
    ],
  )
  await back.store.close()
  const stopped = await reader.store.listKnownBoxes(live())
  assert.equal(stopped[0]?.gone?.how, 'stopped', 'a clean stop is gone at once, said so')
  const forgotten = await reader.store.forgetBox('web-01', live())
  assert.equal(forgotten.summary.box, 'web-01')
  assert.deepEqual(
    (await reader.store.listKnownBoxes(live())).map((b) => b.summary.box),
    ['web-02'],
  )
})

void test('the kept summary is written when the summary changes, never on a keep-alive', async (t) => {
  const held = heldClock()
  const agent = etcd.storeFor(t, undefined, { clock: held.clock, boxTtlMs: 30_000 })
  await agent.store.publishBox(summary('web-01', 3), live())
  const key = `${agent.prefix.slice(0, -1)}-boxes-kept/web-01`
  const rev = () => modRevision(etcd.server.url, key)
  const first = await rev()
  assert.ok(first !== undefined, `${key} is written with the summary`)
  for (let i = 0; i < 3; i++) {
    assert.ok(held.pending() > 0, 'a renewal is due')
    held.fire()
    await until('the keep-alive to be sent', () => held.pending() > 0)
  }
  assert.equal(await rev(), first, 'three keep-alives wrote nothing')
  await agent.store.publishBox(summary('web-01', 2), live())
  assert.notEqual(await rev(), first, 'a new summary is kept')
})

// The watch's silence bound against real etcd members: a quiet stream on a
// live member is kept (its member answers the watch's own read), and a
// member frozen with SIGSTOP, which holds the stream open and says nothing,
// is left within the bound for another member, the new stream starting
// from the revision after the last one seen, so no event is missed and
// none is seen twice.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { setTimeout as delay } from 'node:timers/promises'
import type { WatchEvent } from '../../../src/infra/deploy-etcd/watch.js'
import { EtcdDeployStore } from '../../../src/infra/deploy-etcd/store.js'
import { EtcdServer } from '../../helpers/etcd.js'
import { until } from '../../helpers/until.js'
import { live, memLogger, rec, watching } from './fixtures.js'

const SILENCE_MS = 2000

void test('a quiet stream on a live member is kept past its silence bound', async (t) => {
  const etcd = await EtcdServer.forTest(t)
  const { logger, lines } = memLogger()
  const store = new EtcdDeployStore([etcd.url], { prefix: '/test/quiet/', logger, watchSilenceMs: SILENCE_MS })
  t.after(() => store.close())
  await watching(t, store)
  await delay(SILENCE_MS * 2.5)
  assert.deepEqual(
    lines.filter((l) => l.level === 'warn'),
    [],
    'no break in two and a half bounds of quiet',
  )
  assert.equal(lines.filter((l) => l.msg.includes('watching /test/quiet/')).length, 1, 'one stream all along')
})

void test('a SIGSTOPped member is left within the silence bound; no event is missed or seen twice', async (t) => {
  const members = await EtcdServer.clusterForTest(t, 3)
  const [frozen, a, b] = members
  if (frozen === undefined || a === undefined || b === undefined) throw new Error('three members')
  const { logger, lines } = memLogger()
  const stamped: Array<{ at: number; msg: string }> = []
  const stampingLogger = {
    ...logger,
    warn: (f: Record<string, unknown>, msg: string) => {
      stamped.push({ at: Date.now(), msg })
      logger.warn(f, msg)
    },
  }
  const seen: WatchEvent[] = []
  const prefix = '/test/frozen/'
  // The watch starts on the first endpoint: the one this test freezes.
  const store = new EtcdDeployStore(
    members.map((m) => m.url),
    {
      prefix,
      logger: stampingLogger,
      watchSilenceMs: SILENCE_MS,
      watchRetryFirstMs: 20,
      watchRetryMaxMs: 100,
      onWatchEvents: (events) => seen.push(...events),
    },
  )
  t.after(() => store.close())
  // Records go through the two members that stay up.
  const recorder = new EtcdDeployStore([a.url, b.url], { prefix })
  t.after(() => recorder.close())
  await watching(t, store)
  assert.ok(
    lines.some((l) => l.msg.includes(`watching ${prefix} on ${frozen.url}`)),
    'the watch is on the member to freeze',
  )
  await recorder.record(rec('20261201T080000.000Z-000001'), live())
  await until('the first event', () => Promise.resolve(seen.length === 1))

  const t0 = Date.now()
  await frozen.pause()
  // Recorded while the stream is stalled: the next stream must bring it.
  await recorder.record(rec('20261201T080000.000Z-000002'), live())
  await until(
    'the watch to drop the silent stream',
    () => Promise.resolve(stamped.some((l) => /nothing heard for/.test(l.msg))),
    10_000,
  )
  const noticed = (stamped.find((l) => /nothing heard for/.test(l.msg))?.at ?? NaN) - t0
  // Noticed, within the wait above; how close to the bound is a figure (timers on a loaded machine fire late).
  t.diagnostic(`SIGSTOP noticed after ${noticed} ms (bound ${SILENCE_MS} ms)`)
  await until('the second event, on another member', () => Promise.resolve(seen.length === 2), 10_000)
  assert.ok(
    lines.some((l) => new RegExp(`watching ${prefix} on (${a.url}|${b.url}) from revision`).test(l.msg)),
    JSON.stringify(lines.map((l) => l.msg)),
  )

  await frozen.resume()
  await recorder.record(rec('20261201T080000.000Z-000003'), live())
  await until('the third event', () => Promise.resolve(seen.length >= 3), 10_000)
  await delay(300)
  assert.deepEqual(
    seen.map((e) => e.key),
    ['000001', '000002', '000003'].map((n) => `${prefix}20261201T080000.000Z-${n}`),
    'each event once, in order',
  )
  const revisions = seen.map((e) => e.revision)
  assert.ok(
    revisions.every((r, i) => i === 0 || r > (revisions[i - 1] ?? 0n)),
    `revisions rise: ${revisions.join(',')}`,
  )
})

// The summary's put is a transaction that applies only while the box label
// is on the agent's own lease (design §7.5), against the real etcd: an agent
// whose lease is still live, but whose label another agent holds (the label
// key was removed under it, and the other agent took it), writes nothing
// over the holder's summary, says it lost the label, and stops publishing.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { BoxSummary } from '../../../src/domain/box-summary.js'
import type { Clock, LabelHolder } from '../../../src/domain/ports.js'
import { EtcdGateway, type Gateway } from '../../../src/infra/deploy-etcd/gateway.js'
import { live, memLogger, useSharedEtcd } from './fixtures.js'

const etcd = useSharedEtcd()

/** Long enough that the first agent's lease outlives the test by far: its put meets a live lease. */
const LONG_TTL_MS = 600_000

function holder(extra: Partial<LabelHolder> = {}): LabelHolder {
  return { box: 'web-01', dataRoot: '/var/lib/layoutd', pid: 4242, host: 'web-01.example', since: 'now', ...extra }
}

function summary(nested: number): BoxSummary {
  return {
    box: 'web-01',
    version: '0.1.0',
    intent: null,
    mode: 'none',
    converged: false,
    counts: { nested },
    held: 0,
    leg: { running: false, pending: false, lastRunAt: null },
    at: '2026-12-01T08:00:00.000Z',
  }
}

/** A clock whose timers never fire: no renewal runs between the test's own steps. */
const still: Clock = { now: () => Date.now(), setTimer: () => () => undefined }

void test('a live lease whose label another agent holds puts no summary over the holder’s, and stops publishing', async (t) => {
  const first = memLogger()
  const a = etcd.storeFor(t, undefined, { clock: still, logger: first.logger, boxTtlMs: LONG_TTL_MS })
  await a.store.claimLabel(holder(), live())
  await a.store.publishBox(summary(300), live())

  // The label key goes from under the first agent (its lease lives on), and another agent takes the label.
  const labelKey = `${a.prefix.replace(/\/$/, '-labels/')}web-01`
  assert.deepEqual([...(await etcd.server.range(labelKey)).keys()], [labelKey], 'the label key, as the store names it')
  await etcd.server.del(labelKey)
  const b = etcd.storeFor(t, undefined, { prefix: a.prefix, clock: still })
  await b.store.claimLabel(holder({ dataRoot: '/srv/clone', pid: 7, host: 'web-07.example' }), live())
  await b.store.publishBox(summary(0), live())

  // The first agent publishes again on its live lease: the label is not on it, so nothing is put.
  await a.store.publishBox(summary(300), live())
  assert.deepEqual(
    (await b.store.listBoxes(live())).map((s) => [s.box, s.counts.nested]),
    [['web-01', 0]],
    'the holder’s summary stands',
  )
  assert.ok(
    first.lines.some(
      (l) => l.level === 'error' && /was taken over by another agent \(pid 7 on host web-07\.example/.test(l.msg),
    ),
    JSON.stringify(first.lines),
  )
  const labels = await etcd.server.range(labelKey)
  assert.equal((JSON.parse(labels.get(labelKey) ?? '{}') as LabelHolder).pid, 7, 'the label is still the holder’s')

  // And it stays out: a later summary of the first agent is not put either.
  await a.store.publishBox(summary(301), live())
  assert.deepEqual(
    (await b.store.listBoxes(live())).map((s) => [s.box, s.counts.nested]),
    [['web-01', 0]],
  )
})

void test('the claim and the first publish asking for a lease at once share one grant', async (t) => {
  const real = new EtcdGateway([etcd.server.url])
  t.after(() => real.close())
  let grants = 0
  let answer = () => {}
  const held = new Promise<void>((resolve) => (answer = resolve))
  // Every grant's answer waits until both have asked: two grants at once would leave one lease unrenewed.
  const gateway = new Proxy(real, {
    get(target, key) {
      if (key === 'call')
        return async (...a: Parameters<Gateway['call']>) => {
          if (a[0] === '/v3/lease/grant') {
            grants++
            await held
          }
          return target.call(...a)
        }
      const v: unknown = Reflect.get(target, key)
      return typeof v === 'function' ? (v as (...x: unknown[]) => unknown).bind(target) : v
    },
  }) as Gateway
  const { store } = etcd.storeFor(t, undefined, { gateway })
  const claim = store.claimLabel(holder(), live())
  const publish = store.publishBox(summary(3), live())
  answer()
  await Promise.all([claim, publish])
  assert.equal(grants, 1)
})

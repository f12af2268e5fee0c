// One agent per box label on etcd (design §7.5), against the real etcd: the
// label held on the agent's lease with who holds it; a second agent with the
// same label refused, naming the holder; a previous run of the same data root
// taken over at once; a label taken over after a lease expired said in both
// logs, and the agent that finds its label taken stops publishing.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { BoxSummary } from '../../../src/domain/box-summary.js'
import type { Clock, LabelHolder } from '../../../src/domain/ports.js'
import { AppError } from '../../../src/errors.js'
import { loadConfig } from '../../../src/config.js'
import { EtcdDeployStore } from '../../../src/infra/deploy-etcd/store.js'
import { openAgentDeployStore } from '../../../src/infra/deploy-store.js'
import { EtcdServer } from '../../helpers/etcd.js'
import { until } from '../../helpers/until.js'
import { live, memLogger, useSharedEtcd } from './fixtures.js'

const etcd = useSharedEtcd()

function holder(extra: Partial<LabelHolder> = {}): LabelHolder {
  return { box: 'web-01', dataRoot: '/var/lib/layoutd', pid: 4242, host: 'web-01.example', since: 'now', ...extra }
}

function summary(box: string, nested: number): BoxSummary {
  return {
    box,
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

/** A clock whose timers fire only when the test says: an agent cut off (its renewals stopped), then back. */
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
  const fire = () => {
    for (const fn of timers.splice(0)) fn()
  }
  return { clock, fire }
}

void test('a second agent with the same label is refused, naming the holder; the first keeps its summary', async (t) => {
  const a = etcd.storeFor(t)
  await a.store.claimLabel(holder(), live())
  await a.store.publishBox(summary('web-01', 300), live())
  const b = etcd.storeFor(t, undefined, { prefix: a.prefix })
  await assert.rejects(
    b.store.claimLabel(holder({ dataRoot: '/srv/clone', pid: 7, host: 'web-07.example' }), live()),
    (err: unknown) => {
      assert.ok(err instanceof AppError)
      assert.equal(err.code, 'label_taken')
      assert.match(
        err.message,
        /box label web-01 is held by another agent \(pid 4242 on host web-01\.example, data root \/var\/lib\/layoutd/,
      )
      return true
    },
  )
  const boxes = await a.store.listBoxes(live())
  assert.deepEqual(
    boxes.map((s) => [s.box, s.counts.nested]),
    [['web-01', 300]],
  )
  // The label's key says who holds it.
  const labels = await etcd.server.range(a.prefix.replace(/\/$/, '-labels/'))
  assert.deepEqual(JSON.parse([...labels.values()][0] ?? '{}'), holder())
})

void test('a previous run of the same data root on the same host is taken over at once, and said', async (t) => {
  const { logger, lines } = memLogger()
  const { clock } = heldClock()
  const a = etcd.storeFor(t, undefined, { clock })
  await a.store.claimLabel(holder({ pid: 1 }), live())
  // The agent was killed: its lease still runs, but its data root's lock is the new agent's.
  const b = etcd.storeFor(t, undefined, { prefix: a.prefix, logger })
  await b.store.claimLabel(holder({ pid: 2 }), live())
  const took = lines.find((l) => l.level === 'warn' && /taken over from pid 1 /.test(l.msg))
  assert.ok(took, JSON.stringify(lines))
})

void test('a label taken over after its lease expired is said in both logs; the old agent stops publishing', async (t) => {
  const old = memLogger()
  const next = memLogger()
  const held = heldClock()
  const a = etcd.storeFor(t, undefined, { clock: held.clock, logger: old.logger, boxTtlMs: 1000 })
  await a.store.claimLabel(holder(), live())
  await a.store.publishBox(summary('web-01', 300), live())
  // Cut off: no renewal, and the lease runs out.
  await until('the lease to expire', async () => (await a.store.listBoxes(live())).length === 0, 10_000)
  const b = etcd.storeFor(t, undefined, { prefix: a.prefix, logger: next.logger })
  await b.store.claimLabel(holder({ dataRoot: '/srv/clone', pid: 7, host: 'web-07.example' }), live())
  await b.store.publishBox(summary('web-01', 0), live())
  assert.ok(
    next.lines.some(
      (l) => l.level === 'warn' && /box label web-01 taken over from pid 4242 on host web-01\.example/.test(l.msg),
    ),
    JSON.stringify(next.lines),
  )
  // The old agent comes back: its renewal finds the lease gone and the label another's.
  held.fire()
  await until('the old agent to say it lost the label', () =>
    old.lines.some(
      (l) => l.level === 'error' && /was taken over by another agent \(pid 7 on host web-07\.example/.test(l.msg),
    ),
  )
  await a.store.publishBox(summary('web-01', 300), live())
  const boxes = await b.store.listBoxes(live())
  assert.deepEqual(
    boxes.map((s) => [s.box, s.counts.nested]),
    [['web-01', 0]],
    'the old agent did not overwrite the new one',
  )
})

void test('a clean stop leaves no takeover to say: the next agent takes the label quietly', async (t) => {
  const { logger, lines } = memLogger()
  const a = etcd.storeFor(t)
  await a.store.claimLabel(holder(), live())
  await a.store.close()
  const b = etcd.storeFor(t, undefined, { prefix: a.prefix, logger })
  await b.store.claimLabel(holder({ host: 'other', dataRoot: '/other' }), live())
  assert.deepEqual(
    lines.filter((l) => l.level !== 'debug'),
    [],
  )
})

void test('etcd away when the agent starts: the claim fails without a refusal, and a later renewal takes the label', async (t) => {
  const server = await EtcdServer.forTest(t)
  const held = heldClock()
  // The killed etcd refuses at once; the renewal after its restart must be answered, so the bounds are the store's.
  const store = new EtcdDeployStore([server.url], { prefix: '/test/away/', clock: held.clock })
  t.after(() => store.close())
  await server.kill()
  await assert.rejects(store.claimLabel(holder(), live()), (err: unknown) => {
    assert.ok(!(err instanceof AppError && err.code === 'label_taken'), 'not a refusal')
    return true
  })
  await server.restart()
  held.fire()
  await until('the label taken by a renewal', async () => (await server.range('/test/away-labels/')).size === 1)
  const [value] = (await server.range('/test/away-labels/')).values()
  assert.deepEqual(JSON.parse(value ?? '{}'), holder())
})

void test('a store that could not be opened at start takes the label once it opens', async (t) => {
  const { logger } = memLogger()
  let fail = true
  const config = loadConfig({
    CARLOS_DEPLOYMENT_ETCD: etcd.server.url,
    CARLOS_BOX: 'web-01',
    CARLOS_DATA_DIR: '/tmp/x',
  })
  const prefix = `/test/reopen-${process.pid}/`
  const open = () =>
    fail ? Promise.reject(new Error('etcd away')) : Promise.resolve(new EtcdDeployStore([etcd.server.url], { prefix }))
  const store = await openAgentDeployStore(config, logger, open)
  t.after(() => store.close())
  await assert.rejects(store.claimLabel?.(holder(), live()) ?? Promise.resolve(), /etcd away/)
  fail = false
  await store.list(live())
  await until(
    'the label taken once the store opened',
    async () => (await etcd.server.range(`/test/reopen-${process.pid}-labels/`)).size === 1,
  )
})

// The intent poller's read rules, on a fake clock and a fake store: the
// first read comes before the leg's first kick, a watch push reads at once,
// reads never overlap, a push during a read makes exactly one more, and
// only a change kicks the leg.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import pino from 'pino'
import { IntentPoller } from '../../src/agent/intent-poller.js'
import type { DeployStore } from '../../src/domain/ports.js'
import type { IntentRecord } from '../../src/domain/schemas.js'
import { Metrics } from '../../src/metrics/metrics.js'
import { deferred, FakeClock, intent } from '../domain/fakes.js'
import { until } from '../helpers/until.js'

/** A store whose reads wait for the test to answer them, and which can push. */
class ScriptedStore implements DeployStore {
  records: IntentRecord[] = []
  reads = 0
  active = 0
  overlaps = 0
  readonly #waiting: Array<() => void> = []
  #push: () => void = () => {}
  async list(): Promise<IntentRecord[]> {
    this.reads++
    if (++this.active > 1) this.overlaps++
    const answer = deferred()
    this.#waiting.push(() => answer.resolve())
    await answer.promise
    this.active--
    return [...this.records]
  }
  /** Answers the oldest read still waiting; false when none is. */
  answer(): boolean {
    const next = this.#waiting.shift()
    next?.()
    return next !== undefined
  }
  waiting(): number {
    return this.#waiting.length
  }
  watch(onChange: () => void): void {
    this.#push = onChange
  }
  push(): void {
    this.#push()
  }
  record(): Promise<void> {
    return Promise.reject(new Error('not used'))
  }
  describe(): string {
    return 'scripted store'
  }
  close(): Promise<void> {
    return Promise.resolve()
  }
}

function poller(store: ScriptedStore, clock = new FakeClock()) {
  const kicks: number[] = []
  const life = new AbortController()
  const p = new IntentPoller({
    store,
    box: 'kass-1',
    pollMs: 5000,
    clock,
    logger: pino({ level: 'silent' }),
    metrics: new Metrics(),
    signal: life.signal,
    kickLeg: () => kicks.push(store.reads),
  })
  return { p, kicks, clock, stop: () => (p.stop(), life.abort()) }
}

void test('the first read comes before the leg’s first kick, and learns without kicking', async (t) => {
  const store = new ScriptedStore()
  const { p, kicks, stop } = poller(store)
  t.after(stop)
  const started = p.start()
  await until('the first read', () => store.waiting() === 1)
  assert.deepEqual(kicks, [], 'no kick before the first read has answered')
  store.answer()
  await started
  assert.deepEqual(kicks, [1], 'one kick, the leg’s first run, after the first read')
})

void test('a watch push reads at once; a push during a read makes exactly one more read, never an overlapping one', async (t) => {
  const store = new ScriptedStore()
  const { p, kicks, stop } = poller(store)
  t.after(stop)
  const started = p.start()
  await until('the first read', () => store.answer())
  await started

  store.push()
  await until('the pushed read', () => store.waiting() === 1)
  store.push()
  store.push()
  store.push()
  assert.ok(store.answer())
  await until('the one read after the pushes', () => store.waiting() === 1)
  assert.ok(store.answer())
  await new Promise((r) => setImmediate(r))
  assert.equal(store.waiting(), 0)
  assert.equal(store.reads, 3, 'the first read, the pushed one, and one more for the pushes during it')
  assert.equal(store.overlaps, 0)
  assert.deepEqual(kicks, [1], 'nothing changed: no kick')
})

void test('a changed intent kicks the leg; the timer reads again only after a read has ended', async (t) => {
  const store = new ScriptedStore()
  const { p, kicks, clock, stop } = poller(store)
  t.after(stop)
  const started = p.start()
  await until('the first read', () => store.answer())
  await started

  store.records = [intent({ id: '20261130T090000.000Z-aaaaaa', mode: 'nested' })]
  clock.advance(5000)
  await until('the timed read', () => store.waiting() === 1)
  clock.advance(60_000)
  assert.equal(store.reads, 2, 'no timer fires while a read is under way')
  assert.ok(store.answer())
  await until('the change to kick the leg', () => kicks.length === 2)
  clock.advance(5000)
  await until('the next timed read', () => store.waiting() === 1)
  assert.ok(store.answer())
})

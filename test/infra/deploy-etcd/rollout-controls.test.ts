// A rollout's operator controls and its verdicts from live state, on a real
// etcd (test/helpers/etcd.ts), with boxes whose summaries the test writes
// (the agent's store client, lease, summary and rollout follower; no pass):
// a wave paused on a held row goes on once the row is fixed and the
// rollout resumed, and ends done; a manual gate waits for promote; retry,
// skip and promote refuse what they cannot do; every change is an event,
// listed newest first by `rollout history`, and every command prints the
// state it left as the next status says it.
import assert from 'node:assert/strict'
import { PassThrough } from 'node:stream'
import { test, type TestContext } from 'node:test'
import { RolloutAwareStore } from '../../../src/agent/rollout-store.js'
import { fleetCommand } from '../../../src/cli/commands/fleet.js'
import { loadConfig } from '../../../src/config.js'
import type { BoxSummary } from '../../../src/domain/box-summary.js'
import { systemClock, type DeployStore } from '../../../src/domain/ports.js'
import type { RolloutEvent, RolloutRecord } from '../../../src/domain/rollout.js'
import { EtcdDeployStore } from '../../../src/infra/deploy-etcd/store.js'
import { until } from '../../helpers/until.js'
import { live, useSharedEtcd } from './fixtures.js'

const shared = useSharedEtcd()

const quiet = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined }

/** A box whose summary the test says: the agent's store and follower around it, its leg a counter. */
class TestBox {
  readonly reads: DeployStore
  runs = 0
  #counts: Record<string, number> = { flat: 10 }
  #withheld = { deferred: 0, refused: 0, failed: 0, kept: 0, heldBy: {} as Record<string, number> }
  #intent: string | null = null
  #lastRun = 0

  constructor(
    readonly box: string,
    prefix: string,
  ) {
    const store = new EtcdDeployStore([shared.server.url], { prefix, logger: quiet })
    this.reads = RolloutAwareStore.around(store, {
      box,
      clock: systemClock,
      logger: quiet,
      kickLeg: () => {
        this.runs++
        void this.say()
      },
    })
  }

  /** The box's leg ended a run on intent with these counts (held: rows held by second_name). */
  async ran(intent: string, counts: Record<string, number>, held = 0): Promise<void> {
    this.#intent = intent
    this.#counts = counts
    this.#withheld = { ...this.#withheld, heldBy: held === 0 ? {} : { second_name: held } }
    await this.say()
  }

  async say(): Promise<void> {
    this.#lastRun++
    const s: BoxSummary = {
      box: this.box,
      version: 'test',
      intent: this.#intent,
      mode: 'nested',
      converged: false,
      counts: this.#counts,
      held: Object.values(this.#withheld.heldBy).reduce((a, b) => a + b, 0),
      leg: {
        running: false,
        pending: false,
        lastRunAt: new Date(Date.UTC(2026, 11, 7, 10, 0, this.#lastRun)).toISOString(),
        withheld: this.#withheld,
      },
      at: new Date().toISOString(),
    }
    await this.reads.publishBox?.(s, live())
  }
}

async function fleet(t: TestContext, n: number) {
  const { store, prefix } = shared.storeFor(t)
  const boxes = Array.from({ length: n }, (_, i) => new TestBox(`box-${i}`, prefix))
  t.after(() => Promise.all(boxes.map((b) => b.reads.close())))
  await Promise.all(boxes.map((b) => b.say()))
  const run = async (argv: string[]) => {
    const stdout = new PassThrough()
    const stderr = new PassThrough()
    let out = ''
    let err = ''
    stdout.on('data', (d: Buffer) => (out += d.toString()))
    stderr.on('data', (d: Buffer) => (err += d.toString()))
    const config = loadConfig({ CARLOS_BOX: 'ops', CARLOS_DEPLOYMENT_ETCD: shared.server.url })
    const code = await fleetCommand(argv, { config, store, stdout, stderr, everyMs: 100, by: 'ops@test' })
    return { code, out, err }
  }
  const port = store.rollouts()
  const current = async () => (await port.active(live())).current?.record
  const state = (want: RolloutRecord['state']) =>
    until(`the rollout to be ${want}`, async () => {
      const r = await current()
      return r?.state === want ? r : undefined
    })
  const byLabel = (label: string) => boxes.find((b) => b.box === label)!
  return { boxes, run, port, current, state, byLabel }
}

void test('a wave paused on a held row goes on once the row is fixed and the rollout resumed, and ends done', async (t) => {
  const f = await fleet(t, 2)
  const rec = await f.run(['rollout', 'migrate', '--waves', '1,100%', '-m', 'go'])
  assert.equal(rec.code, 0, rec.err)
  const r = (await f.current())!
  const [first] = r.waves[0]!
  const [second] = r.waves[1]!
  await until('the first box to start', () => f.port.hasStarted(r.id, first!, 0, live()))
  // Its run ends with a row held: the wave fails on it.
  await f.byLabel(first!).ran(r.id, { nested: 9, fenced: 1 }, 1)
  const paused = await f.state('paused')
  assert.equal(paused.cause, 'failed_rows')
  // The row is fixed: the box converges, and says so.
  await f.byLabel(first!).ran(r.id, { nested: 10 })
  await until(
    'its progress to say so',
    async () => (await f.port.progress(r.id, 0, live())).get(first!)?.failedRows === 0,
  )
  const resumed = await f.run(['rollout', 'resume', '-m', 'fixed the link'])
  assert.equal(resumed.code, 0, resumed.err)
  assert.match(resumed.out, /wave 1\/2, 1\/2 boxes done, 0 moving; running\n/)
  await until('the second wave to open', async () => (await f.current())?.wave === 1)
  await until('the second box to start', () => f.port.hasStarted(r.id, second!, 1, live()))
  await f.byLabel(second!).ran(r.id, { nested: 10 })
  const done = await f.state('done')
  assert.equal(done.finalIntent, `${r.id}.done`)
  const history = await f.run(['rollout', 'history', '--json'])
  const events = (JSON.parse(history.out) as { events: RolloutEvent[] }).events
  assert.deepEqual(
    events.map((e) => e.kind),
    ['done', 'wave_opened', 'resumed', 'paused', 'recorded'],
  )
  assert.equal(events[2]?.message, 'fixed the link')
  assert.equal(events[3]?.cause, 'failed_rows')
  assert.match(events[3]?.by ?? '', /^agent box-/)
  const text = await f.run(['rollout', 'history'])
  assert.match(text.out, /resumed wave 1 by ops@test — "fixed the link"/)
})

void test('a manual gate waits after its wave for promote; promote on the last wave is refused', async (t) => {
  const f = await fleet(t, 2)
  const rec = await f.run(['rollout', 'migrate', '--waves', '1,pause,100%'])
  assert.equal(rec.code, 0, rec.err)
  assert.match(rec.out, /waves 2 open on promote/)
  const r = (await f.current())!
  const [first] = r.waves[0]!
  await until('the first box to start', () => f.port.hasStarted(r.id, first!, 0, live()))
  await f.byLabel(first!).ran(r.id, { nested: 10 })
  const waiting = await f.state('waiting')
  assert.equal(waiting.cause, 'manual_gate')
  assert.equal(waiting.wave, 0)
  const resume = await f.run(['rollout', 'resume'])
  assert.equal(resume.code, 1)
  assert.match(resume.err, /waits at a manual gate: `promote` opens the next wave/)
  const promoted = await f.run(['rollout', 'promote', '-m', 'canary ok'])
  assert.equal(promoted.code, 0, promoted.err)
  // The second box may have started before the answer was read: 0 or 1 moving.
  assert.match(promoted.out, /wave 2\/2, 1\/2 boxes done, [01] moving; running\n/)
  const last = await f.run(['rollout', 'promote'])
  assert.equal(last.code, 1)
  assert.match(last.err, /wave 2 is the last: nothing to promote/)
})

void test('retry and skip name a box of the rollout; skip needs -m; a skipped box leaves the wave to pass', async (t) => {
  const f = await fleet(t, 2)
  assert.equal((await f.run(['rollout', 'migrate', '--waves', '100%', '--max-parallel', '2'])).code, 0)
  const r = (await f.current())!
  const unknown = await f.run(['rollout', 'retry', 'box-nope'])
  assert.equal(unknown.code, 1)
  assert.match(unknown.err, /box box-nope is in no wave of rollout/)
  assert.equal((await f.run(['rollout', 'skip', 'box-0'])).code, 2, 'skip without -m is a usage error')
  assert.equal((await f.run(['rollout', 'retry'])).code, 2, 'retry without a box is a usage error')
  assert.equal((await f.run(['rollout', 'pause', 'box-0'])).code, 2, 'pause takes no box')
  await until('both boxes to start', async () => (await f.port.progress(r.id, 0, live())).size === 2)
  await f.byLabel('box-0').ran(r.id, { nested: 10 })
  const retried = await f.run(['rollout', 'retry', 'box-0', '-m', 'again'])
  assert.equal(retried.code, 0, retried.err)
  await until("box-0's leg to run again", () => f.byLabel('box-0').runs === 1)
  const skipped = await f.run(['rollout', 'skip', 'box-1', '-m', 'dead disk'])
  assert.equal(skipped.code, 0, skipped.err)
  assert.match(skipped.out, /1\/1 boxes done, 0 moving, 1 skipped; /)
  const done = await f.state('done')
  assert.deepEqual(Object.keys(done.skipped ?? {}), ['box-1'])
  const again = await f.run(['rollout', 'skip', 'box-1', '-m', 'x'])
  assert.equal(again.code, 1)
  assert.match(again.err, /is done: it is over; nothing to skip/)
})

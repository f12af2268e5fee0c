// `layoutd fleet status` on the directory store (design §7.3, §8): the
// boxes' summaries written as agents write them, the table, --json, the
// exit status, --wait until every box converged or its timeout, a box whose
// time ran out gone from the view, and usage errors.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test, type TestContext } from 'node:test'
import { fleetCommand } from '../../../src/cli/commands/fleet.js'
import { intentCommand } from '../../../src/cli/commands/intent.js'
import { loadConfig } from '../../../src/config.js'
import type { BoxSummary } from '../../../src/domain/box-summary.js'
import type { Clock } from '../../../src/domain/ports.js'
import { CLOCK_TOLERANCE_MS, DirDeployStore } from '../../../src/infra/deploy-dir.js'
import { sink } from '../../helpers/sink.js'
import { tmpDir } from '../../helpers/tmp.js'

const live = () => new AbortController().signal

async function setup(t: TestContext) {
  const root = await tmpDir(t)
  const config = loadConfig({
    CARLOS_DEPLOYMENT_DIR: root,
    CARLOS_BOX: 'ops-1',
    CARLOS_DATA_DIR: path.join(root, 'data'),
  })
  let now = Date.parse('2026-12-01T08:00:00.000Z')
  const clock: Clock = { now: () => now, setTimer: () => () => undefined }
  const reader = new DirDeployStore(root, { clock })
  /** A box's agent: a store of its own that publishes its summary. */
  const box = (label: string) => {
    const store = new DirDeployStore(root, { boxTtlMs: 30_000, clock })
    t.after(() => store.close())
    return (s: Partial<BoxSummary>) =>
      store.publishBox(
        {
          box: label,
          version: '0.1.0',
          intent: null,
          mode: 'none',
          converged: false,
          counts: {},
          held: 0,
          leg: { running: false, pending: false, lastRunAt: null },
          at: new Date(now).toISOString(),
          ...s,
        },
        live(),
      )
  }
  const run = async (...argv: string[]) => {
    const out = sink()
    const err = sink()
    const code = await fleetCommand(argv, {
      config,
      store: reader,
      stdout: out.stream,
      stderr: err.stream,
      now: () => now,
      everyMs: 20,
    })
    return { code, out: out.text(), err: err.text() }
  }
  const record = async (...argv: string[]) => {
    const out = sink()
    const err = sink()
    const code = await intentCommand(argv, { config, store: reader, stdout: out.stream, stderr: err.stream })
    assert.equal(code, 0, err.text())
    return /recorded intent (\S+):/.exec(out.text())?.[1] ?? ''
  }
  /** The agent stopped renewing ms ago: its file was last written then, on the reader's clock. */
  const age = async (label: string, ms: number) => {
    const when = new Date(now - ms)
    await fs.utimes(path.join(root, 'layout', 'boxes', `${label}.json`), when, when)
  }
  return { run, box, record, root, age, advance: (ms: number) => (now += ms), clock }
}

void test('fleet status: the table, the unconverged first, the summary line; exit 0 only when every live box converged', async (t) => {
  const { run, box, record, advance, age } = await setup(t)
  const id = await record('migrate', '--fleet')
  const web1 = box('web-01')
  const web2 = box('web-02')
  await web1({
    intent: id,
    mode: 'nested',
    converged: true,
    counts: { nested: 3, external: 1 },
    leg: { running: false, pending: false, lastRunAt: '2026-12-01T07:59:30.000Z' },
  })
  await web2({
    intent: id,
    mode: 'flat',
    counts: { nested: 1, flat: 2, fenced: 1 },
    held: 1,
    leg: { running: true, pending: false, lastRunAt: null },
  })
  const r = await run('status')
  assert.equal(r.code, 1)
  assert.equal(
    r.out,
    'BOX     INTENT' +
      ' '.repeat(id.length - 6) +
      '  MODE    CONVERGED  NESTED  FLAT  FENCED  DEFERRED  HELD  REFUSED  LAST RUN\n' +
      `web-02  ${id}  flat    running    1       2     1       -         1     -        -\n` +
      `web-01  ${id}  nested  yes        3       0     0       -         0     -        30s ago\n` +
      `\n1/2 converged to ${id}; 1 converging; 1 held rows\n`,
  )
  assert.match(r.err, /1 of 2 boxes have not converged/)
  const j = await run('status', '--json')
  const json = JSON.parse(j.out) as {
    boxes: Array<{ box: string; state: string; wants: string }>
    allConverged: boolean
    held: number
  }
  assert.deepEqual(
    json.boxes.map((b) => [b.box, b.state, b.wants]),
    [
      ['web-02', 'converging', id],
      ['web-01', 'converged', id],
    ],
  )
  assert.equal(json.allConverged, false)
  assert.equal(json.held, 1)

  // --wait reads again until web-02 converges.
  const waiting = run('status', '--wait', '--timeout', '30')
  await new Promise((r) => setTimeout(r, 100))
  await web2({ intent: id, mode: 'nested', converged: true, counts: { nested: 4 } })
  const w = await waiting
  assert.equal(w.code, 0, w.err)
  assert.match(w.err, /^waiting: 1\/2 converged/)
  assert.match(w.out, /\n2\/2 converged to \S+; 0 converging; 0 held rows\n$/)

  // A newer intent: converged to the old one is converging again.
  const id2 = await record('revert', '--box', 'web-01')
  const after = await run('status')
  assert.equal(after.code, 1)
  assert.match(after.out, new RegExp(`^BOX.*\\nweb-01  ${id2} \\(box read ${id}\\)  nested  no `))
  // A box whose agent stopped renewing is gone once its time runs out.
  await web1({ intent: id2, mode: 'flat', converged: true, counts: { flat: 3 } })
  advance(31_000)
  for (const b of ['web-01', 'web-02']) await age(b, 31_000 + CLOCK_TOLERANCE_MS)
  const gone = await run('status', '--json')
  assert.deepEqual((JSON.parse(gone.out) as { boxes: unknown[] }).boxes, [])
  assert.equal(gone.code, 1)
  assert.match(gone.err, /no box has reported/)
})

void test('fleet status --wait gives up after its timeout, exit 1', async (t) => {
  const { run, box, record } = await setup(t)
  const id = await record('migrate', '--fleet')
  await box('web-01')({ intent: id, mode: 'flat', counts: { flat: 1 } })
  const start = Date.now()
  const r = await run('status', '--wait', '--timeout', '0')
  assert.equal(r.code, 1)
  assert.ok(Date.now() - start < 5000)
  assert.match(r.err, /1 of 1 boxes have not converged after waiting 0s/)
})

void test('fleet usage errors exit 2', async (t) => {
  const { run } = await setup(t)
  for (const argv of [
    [],
    ['frobnicate'],
    ['status', '--timeout', '5'],
    ['status', '--wait', '--timeout', 'soon'],
    ['status', 'extra'],
  ]) {
    const r = await run(...argv)
    assert.equal(r.code, 2, argv.join(' '))
    assert.match(r.err, /usage:/)
  }
})

const withheld = (w: Partial<NonNullable<BoxSummary['leg']['withheld']>> = {}) => ({
  deferred: 0,
  refused: 0,
  failed: 0,
  kept: 0,
  heldBy: {},
  ...w,
})

void test('fleet status --wait fails at once, naming the box, when a box it saw leaves before it converged', async (t) => {
  const { run, box, record, root } = await setup(t)
  const id = await record('revert', '--fleet')
  await box('web-01')({ intent: id, mode: 'flat', converged: true, counts: { flat: 3 } })
  await box('web-02')({
    intent: id,
    mode: 'flat',
    counts: { nested: 300 },
    leg: { running: true, pending: false, lastRunAt: null },
  })
  const waiting = run('status', '--wait', '--timeout', '30')
  await new Promise((r) => setTimeout(r, 100))
  // web-02's agent is gone: its summary with it.
  await fs.rm(path.join(root, 'layout', 'boxes', 'web-02.json'))
  const w = await waiting
  assert.equal(w.code, 1)
  assert.match(w.err, /box web-02 left before it converged/)
  assert.match(w.out, /\n1\/1 converged to \S+; 0 converging/)
})

void test('fleet status --wait returns early, naming each box and why, when what remains needs a person', async (t) => {
  const { run, box, record } = await setup(t)
  const id = await record('migrate', '--fleet')
  await box('web-01')({ intent: id, mode: 'nested', converged: true, counts: { nested: 3 } })
  await box('web-02')({
    intent: id,
    mode: 'nested',
    counts: { nested: 5, fenced: 1, foreign: 2 },
    held: 1,
    leg: {
      running: false,
      pending: false,
      lastRunAt: null,
      retryAt: null,
      withheld: withheld({ heldBy: { second_name: 1 } }),
    },
  })
  await box('web-03')({
    intent: id,
    mode: 'nested',
    counts: { flat: 4 },
    leg: { running: false, pending: false, lastRunAt: null, retryAt: null, withheld: withheld({ refused: 4 }) },
  })
  const start = Date.now()
  const w = await run('status', '--wait', '--timeout', '600')
  assert.ok(Date.now() - start < 5000, 'not its whole timeout')
  assert.equal(w.code, 1)
  assert.match(w.err, /box web-02 needs a person: 1 held \(1 second_name\), 2 foreign/)
  assert.match(w.err, /box web-03 needs a person: 4 refused/)
  assert.match(w.out, /^web-02 .* nested +needs you +5 +0 +1 +0 +1 +0 /m)
  assert.match(w.out, /^web-03 .* nested +needs you +0 +4 +0 +0 +0 +4 /m)
  // A box still deferring (awake, in its grace) is on its way: --wait goes on waiting for it.
  await box('web-03')({
    intent: id,
    mode: 'nested',
    counts: { flat: 4 },
    leg: {
      running: false,
      pending: false,
      lastRunAt: null,
      retryAt: null,
      withheld: withheld({ refused: 3, deferred: 1 }),
    },
  })
  const w2 = await run('status', '--wait', '--timeout', '0')
  assert.match(w2.err, /after waiting 0s/)
})

void test('fleet status shows the table when a record cannot be read, that record named above it', async (t) => {
  const { run, box, record, root } = await setup(t)
  const id = await record('migrate', '--fleet')
  await box('web-01')({ intent: id, mode: 'nested', converged: true, counts: { nested: 3 } })
  const bad = path.join(root, 'layout', 'intents', '29990101T000000.000Z-bad.json')
  await fs.writeFile(bad, '{')
  const r = await run('status')
  assert.equal(r.code, 1)
  assert.match(r.out, new RegExp(`^intent record 29990101T000000\\.000Z-bad cannot be read \\(${bad}: not JSON`))
  assert.match(r.out, /\nBOX +INTENT .*\nweb-01 +\S+ +nested +unreadable /)
  const w = await run('status', '--wait', '--timeout', '600')
  assert.equal(w.code, 1)
  assert.match(w.err, /intent record 29990101T000000\.000Z-bad cannot be read/)
})

void test('the summary line names the id each converged box is on', async (t) => {
  const { run, box, record } = await setup(t)
  const fleet = await record('migrate', '--fleet')
  const own = await record('revert', '--box', 'web-02')
  await box('web-01')({ intent: fleet, mode: 'nested', converged: true, counts: { nested: 1 } })
  await box('web-02')({ intent: own, mode: 'flat', converged: true, counts: { flat: 1 } })
  const r = await run('status')
  assert.equal(r.code, 0, r.err)
  assert.match(r.out, new RegExp(`\\n2/2 converged to ${fleet} \\(1\\), ${own} \\(1\\); 0 converging`))
})

void test('a box whose clock stepped back two hours is still live: liveness is the renewal, not its stamps', async (t) => {
  const root = await tmpDir(t)
  const config = loadConfig({ CARLOS_DEPLOYMENT_DIR: root, CARLOS_BOX: 'ops-1', CARLOS_DATA_DIR: path.join(root, 'd') })
  // The box's agent, on a clock two hours behind this one's.
  const behind: Clock = { now: () => Date.now() - 2 * 3600_000, setTimer: () => () => undefined }
  const agent = new DirDeployStore(root, { clock: behind })
  t.after(() => agent.close())
  const at = new Date(behind.now()).toISOString()
  await agent.publishBox(
    {
      box: 'web-01',
      version: '0.1.0',
      intent: null,
      mode: 'none',
      converged: false,
      counts: {},
      held: 0,
      leg: { running: false, pending: false, lastRunAt: at },
      at,
    },
    live(),
  )
  const out = sink()
  const err = sink()
  const code = await fleetCommand(['status'], {
    config,
    store: new DirDeployStore(root),
    stdout: out.stream,
    stderr: err.stream,
  })
  assert.doesNotMatch(err.text(), /no box has reported/)
  assert.match(out.text(), /^web-01 /m)
  assert.equal(code, 1, 'no intent addresses it')
})

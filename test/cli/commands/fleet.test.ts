// `layoutd fleet status` on the directory store (design §7.3, §8): the
// boxes' summaries written as agents write them, the table, --json, the
// exit status, --wait until every box converged or its timeout, a box whose
// time ran out kept in view as gone until `fleet forget`, --watch, and
// usage errors.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test, type TestContext } from 'node:test'
import { fleetCommand } from '../../../src/cli/commands/fleet.js'
import { intentCommand } from '../../../src/cli/commands/intent.js'
import { loadConfig } from '../../../src/config.js'
import type { BoxSummary } from '../../../src/domain/box-summary.js'
import type { Clock, DeployStore } from '../../../src/domain/ports.js'
import type { RolloutPort, RolloutRecord } from '../../../src/domain/rollout.js'
import { DirDeployStore } from '../../../src/infra/deploy-dir.js'
import { sink } from '../../helpers/sink.js'
import { tmpDir } from '../../helpers/tmp.js'
import { until } from '../../helpers/until.js'

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
  /** A command left running (status --wait): what it said so far, and its end. */
  const start = (...argv: string[]) => {
    const out = sink()
    const err = sink()
    const io = { config, store: reader, stdout: out.stream, stderr: err.stream, now: () => now, everyMs: 20 }
    const done = fleetCommand(argv, io).then((code) => ({ code, out: out.text(), err: err.text() }))
    return { done, said: () => err.text() }
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
  return { run, start, box, record, root, age, advance: (ms: number) => (now += ms), clock }
}

void test('fleet status: the table, the unconverged first, the summary line; exit 0 only when every live box converged', async (t) => {
  const { run, start, box, record } = await setup(t)
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
      '  MODE    STATE      NESTED  FLAT  FENCED  DEFERRED  HELD  REFUSED  FAILED  SUMMARY  LAST RUN\n' +
      `web-02  ${id}  flat    running    1       2     1       -         1     -        -       0s ago   -\n` +
      `web-01  ${id}  nested  converged  3       0     0       -         0     -        -       0s ago   30s ago\n` +
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
  const waiting = start('status', '--wait', '--timeout', '30')
  await until('the first look of --wait', () => waiting.said().includes('waiting:'))
  await web2({ intent: id, mode: 'nested', converged: true, counts: { nested: 4 } })
  const w = await waiting.done
  assert.equal(w.code, 0, w.err)
  assert.match(w.err, /^waiting: 1\/2 converged/)
  assert.match(w.out, /\n2\/2 converged to \S+; 0 converging; 0 held rows\n$/)

  // A newer intent: converged to the old one is converging again.
  const id2 = await record('revert', '--box', 'web-01')
  const after = await run('status')
  assert.equal(after.code, 1)
  assert.match(after.out, new RegExp(`^BOX.*\\nweb-01  ${id2} \\(box read ${id}\\)  nested  converging `))
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
    ['status', '--watch', '--wait'],
    ['status', '--watch', '--json'],
    ['forget'],
    ['forget', 'a', 'b'],
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
  const { start, box, record, root } = await setup(t)
  const id = await record('revert', '--fleet')
  await box('web-01')({ intent: id, mode: 'flat', converged: true, counts: { flat: 3 } })
  await box('web-02')({
    intent: id,
    mode: 'flat',
    counts: { nested: 300 },
    leg: { running: true, pending: false, lastRunAt: null },
  })
  const waiting = start('status', '--wait', '--timeout', '30')
  await until('the first look of --wait', () => waiting.said().includes('waiting:'))
  // web-02's agent is gone: its summary with it.
  await fs.rm(path.join(root, 'layout', 'boxes', 'web-02.json'))
  const w = await waiting.done
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

void test('a box whose time ran out stays, gone since then with its last summary; --wait fails naming it', async (t) => {
  const { run, box, record, advance, age } = await setup(t)
  const id = await record('migrate', '--fleet')
  await box('web-01')({ intent: id, mode: 'nested', converged: true, counts: { nested: 3 } })
  await box('web-02')({ intent: id, mode: 'nested', converged: true, counts: { nested: 2 } })
  assert.equal((await run('status')).code, 0)
  // web-02's agent stopped renewing: its time ran out 11 s ago.
  advance(41_000)
  await age('web-01', 0)
  await age('web-02', 41_000)
  const since = new Date(Date.parse('2026-12-01T08:00:00.000Z') + 30_000).toISOString()
  const r = await run('status')
  assert.equal(r.code, 1)
  assert.match(r.out, new RegExp(`^web-02  ${id}  nested  gone +2 +0 +0 +- +0 +- +- +41s ago +-$`, 'm'))
  assert.match(r.out, /\n1\/2 converged to \S+; 0 converging; 0 held rows; 1 gone\n/)
  assert.match(r.out, new RegExp(`\nweb-02 gone since ${since} \\(its lease expired\\): its last summary is shown`))
  const j = JSON.parse((await run('status', '--json')).out) as {
    boxes: Array<{ box: string; state: string; word: string; gone: unknown }>
    gone: number
  }
  assert.deepEqual(
    j.boxes.map((b) => [b.box, b.state, b.word, b.gone]),
    [
      ['web-02', 'gone', 'gone', { since, how: 'expired' }],
      ['web-01', 'converged', 'converged', null],
    ],
  )
  assert.equal(j.gone, 1)
  const start = Date.now()
  const w = await run('status', '--wait', '--timeout', '600')
  assert.ok(Date.now() - start < 5000, 'not its whole timeout')
  assert.equal(w.code, 1)
  assert.match(w.err, new RegExp(`box web-02 is gone since ${since} \\(its lease expired\\)`))
})

void test('fleet forget: refused for a live box and an unknown one; a gone box leaves the view, -m said', async (t) => {
  const { run, box, record, advance, age } = await setup(t)
  const id = await record('migrate', '--fleet')
  await box('web-01')({ intent: id, mode: 'nested', converged: true, counts: { nested: 3 } })
  await box('web-02')({ intent: id, mode: 'nested', counts: { flat: 2 } })
  const refused = await run('forget', 'web-01')
  assert.equal(refused.code, 1)
  assert.match(refused.err, /refused: box web-01 is live .*nothing was changed/)
  const unknown = await run('forget', 'web-09')
  assert.equal(unknown.code, 1)
  assert.match(unknown.err, /refused: the deploy store knows no box web-09/)
  assert.equal((await run('forget')).code, 2, 'BOX is required')
  advance(41_000)
  await age('web-01', 0)
  await age('web-02', 41_000)
  const f = await run('forget', 'WEB-02', '-m', 'retired in the rack move')
  assert.equal(f.code, 0, f.err)
  assert.match(f.out, /^forgot box web-02 \(gone since \S+, its lease expired\); .*: retired in the rack move\n$/)
  const after = await run('status')
  assert.equal(after.code, 0, after.err)
  assert.doesNotMatch(after.out, /web-02/)
  assert.match((await run('forget', 'web-02')).err, /knows no box web-02/, 'forgotten once')
})

void test('a box whose agent stopped cleanly is gone at once, said so; its next agent makes it live again', async (t) => {
  const { run, record, root, clock } = await setup(t)
  const id = await record('migrate', '--fleet')
  const publish = (store: DirDeployStore) =>
    store.publishBox(
      {
        box: 'web-01',
        version: '0.1.0',
        intent: id,
        mode: 'nested',
        converged: true,
        counts: { nested: 1 },
        held: 0,
        leg: { running: false, pending: false, lastRunAt: null },
        at: new Date(clock.now()).toISOString(),
      },
      live(),
    )
  const first = new DirDeployStore(root, { clock })
  await publish(first)
  await first.close()
  const r = await run('status')
  assert.equal(r.code, 1)
  assert.match(r.out, /\nweb-01 gone since \S+ \(its agent stopped\)/)
  const next = new DirDeployStore(root, { clock })
  t.after(() => next.close())
  await publish(next)
  assert.equal((await run('status')).code, 0)
})

/** A store that keeps rollouts: the directory store with one rollout record, as the active pointer names it. */
function withRollout(store: DeployStore, record: RolloutRecord): DeployStore {
  const port = {
    describe: () => 'rollouts',
    active: () => Promise.resolve({ pointerRev: '1', current: { record, rev: '1' } }),
    progress: () => Promise.resolve(new Map()),
  } as unknown as RolloutPort
  return {
    list: (signal) => store.list(signal),
    record: (intent, signal) => store.record(intent, signal),
    inspect: (signal) => store.inspect?.(signal) ?? Promise.resolve({ records: [], unreadable: [] }),
    listKnownBoxes: (signal) => store.listKnownBoxes?.(signal) ?? Promise.resolve([]),
    listBoxes: (signal) => store.listBoxes?.(signal) ?? Promise.resolve([]),
    describe: () => store.describe(),
    close: () => store.close(),
    rollouts: () => port,
  }
}

void test('fleet status --wait exits 1 naming a paused, frozen or aborted rollout, though every box converged', async (t) => {
  const { box, record, root, clock } = await setup(t)
  const id = await record('migrate', '--fleet')
  await box('web-01')({ intent: id, mode: 'nested', converged: true, counts: { nested: 3 } })
  const config = loadConfig({ CARLOS_DEPLOYMENT_DIR: root, CARLOS_BOX: 'ops-1', CARLOS_DATA_DIR: path.join(root, 'd') })
  const rollout = (
    state: RolloutRecord['state'],
    reason: string,
    at = '29990101T000000.000Z-rollout',
  ): RolloutRecord => ({
    id: at,
    mode: 'flat',
    force: false,
    waves: [['web-01']],
    maxParallel: 1,
    progressDeadlineMs: 600_000,
    onFailure: 'pause',
    maxFailedRows: 0,
    state,
    wave: 0,
    waveOpenedAt: new Date(clock.now()).toISOString(),
    reason,
    recordedAt: new Date(clock.now()).toISOString(),
    by: 'ops@x',
    message: '',
  })
  const status = async (r: RolloutRecord, ...argv: string[]) => {
    const out = sink()
    const err = sink()
    const code = await fleetCommand(['status', ...argv], {
      config,
      store: withRollout(new DirDeployStore(root, { clock }), r),
      stdout: out.stream,
      stderr: err.stream,
      now: () => clock.now(),
      everyMs: 20,
    })
    return { code, out: out.text(), err: err.text() }
  }
  for (const [state, reason] of [
    ['paused', 'wave 1: 1 rows not flat (on web-01), over the threshold of 0'],
    ['frozen', 'wave 1 failed'],
    ['aborted', 'abort by ops@x'],
  ] as const) {
    const start = Date.now()
    const w = await status(rollout(state, reason), '--wait', '--timeout', '600')
    assert.ok(Date.now() - start < 5000, 'not its whole timeout')
    assert.equal(w.code, 1, `${state}: ${w.err}`)
    assert.match(w.err, new RegExp(`rollout 29990101T000000\\.000Z-rollout is ${state}: ${reason.slice(0, 10)}`))
    assert.match(w.out, /^rollout 29990101T000000\.000Z-rollout \(flat\): wave 1\/1, .*/)
  }
  const paused = await status(rollout('paused', 'progress deadline'))
  assert.equal(paused.code, 1, 'a paused rollout: not where the fleet is headed')
  assert.match(paused.out, /; paused: progress deadline; deadline in 10m \(at \S+\)\n/)
  const running = await status(rollout('running', ''), '--wait', '--timeout', '0')
  assert.equal(running.code, 1)
  assert.match(running.err, /rollout \S+ is under way after waiting 0s/)
  // A rollout a newer fleet-wide record superseded is over: the boxes are judged against that record.
  const old = await status(rollout('aborted', 'superseded', '20000101T000000.000Z-old'), '--wait')
  assert.equal(old.code, 0, old.err)
})

void test('fleet status --watch: a new copy on each change elsewhere; on a terminal redrawn in place, cut to fit', async (t) => {
  const { box, record, root, clock } = await setup(t)
  const id = await record('migrate', '--fleet')
  const web1 = box('web-01')
  await web1({
    intent: id,
    mode: 'nested',
    counts: { flat: 3 },
    leg: { running: true, pending: false, lastRunAt: null },
  })
  for (let i = 2; i <= 12; i++)
    await box(`web-${String(i).padStart(2, '0')}`)({ intent: id, converged: true, mode: 'nested' })
  const config = loadConfig({ CARLOS_DEPLOYMENT_DIR: root, CARLOS_BOX: 'ops-1', CARLOS_DATA_DIR: path.join(root, 'd') })
  const watch = (extra: { tty?: boolean; size?: () => { rows: number; columns: number } }) => {
    const out = sink()
    const stop = new AbortController()
    const done = fleetCommand(['status', '--watch'], {
      config,
      store: new DirDeployStore(root, { clock }),
      stdout: out.stream,
      stderr: sink().stream,
      now: () => clock.now(),
      everyMs: 20,
      stop: stop.signal,
      ...extra,
    })
    t.after(() => stop.abort())
    return { out, stop, done }
  }
  const plain = watch({})
  await until('the first copy', () => plain.out.text().includes('11/12 converged'))
  await web1({ intent: id, mode: 'nested', converged: true, counts: { nested: 3 } })
  await until('a copy of the change', () => plain.out.text().includes('12/12 converged'))
  plain.stop.abort()
  assert.equal(await plain.done, 0)
  const copies = plain.out
    .text()
    .split(/^--- \S+\n/m)
    .slice(1)
  assert.equal(copies.length, 2, 'one copy per change, not per read')
  assert.ok(!plain.out.text().includes('\x1b'), 'no escape sequence off a terminal')

  await web1({
    intent: id,
    mode: 'nested',
    counts: { flat: 3 },
    leg: { running: true, pending: false, lastRunAt: null },
  })
  const term = watch({ tty: true, size: () => ({ rows: 10, columns: 60 }) })
  await until('two draws', () => term.out.text().split('\x1b[H\x1b[2J').length > 2)
  term.stop.abort()
  assert.equal(await term.done, 0)
  const screen = term.out.text().split('\x1b[H\x1b[2J').at(-1) ?? ''
  const lines = screen.split('\n').slice(0, -1)
  assert.ok(lines.length <= 10, screen)
  assert.ok(
    lines.every((l) => [...l].length <= 60),
    screen,
  )
  assert.match(screen, /^BOX +INTENT/)
  assert.match(screen, /\nweb-01 .*\n/, 'the box not converged is kept')
  assert.match(screen, /\n… \d+ more boxes/)
  assert.match(screen, /\n11\/12 converged/)
  assert.match(screen, /\(every 0\.02s; Ctrl-C ends\)\n$/)
})

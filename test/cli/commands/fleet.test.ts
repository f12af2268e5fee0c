// `layoutd fleet status` on the directory store (design §7.3, §8): the
// boxes' summaries written as agents write them, the table, --json, the
// exit status, --wait until every box converged or its timeout, a box whose
// time ran out gone from the view, and usage errors.
import assert from 'node:assert/strict'
import path from 'node:path'
import { test, type TestContext } from 'node:test'
import { fleetCommand } from '../../../src/cli/commands/fleet.js'
import { intentCommand } from '../../../src/cli/commands/intent.js'
import { loadConfig } from '../../../src/config.js'
import type { BoxSummary } from '../../../src/domain/box-summary.js'
import type { Clock } from '../../../src/domain/ports.js'
import { DirDeployStore } from '../../../src/infra/deploy-dir.js'
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
  return { run, box, record, advance: (ms: number) => (now += ms) }
}

void test('fleet status: the table, the unconverged first, the summary line; exit 0 only when every live box converged', async (t) => {
  const { run, box, record, advance } = await setup(t)
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
      '  CONVERGED  NESTED  FLAT  FENCED  HELD  LAST RUN\n' +
      `web-02  ${id}  running    1       2     1       1     -\n` +
      `web-01  ${id}  yes        3       0     0       0     30s ago\n` +
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
  assert.match(after.out, new RegExp(`^BOX.*\\nweb-01  ${id2} \\(box read ${id}\\)  no `))
  // A box whose agent stopped renewing is gone once its time runs out.
  await web1({ intent: id2, mode: 'flat', converged: true, counts: { flat: 3 } })
  advance(31_000)
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

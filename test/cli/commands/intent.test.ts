import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test, type TestContext } from 'node:test'
import { intentCommand } from '../../../src/cli/commands/intent.js'
import { loadConfig } from '../../../src/config.js'
import type { IntentRecord, LayoutReport } from '../../../src/domain/schemas.js'
import { selectIntent } from '../../../src/domain/intent.js'
import { DirDeployStore } from '../../../src/infra/deploy-dir.js'
import { tmpDir } from '../../helpers/tmp.js'
import { sink } from '../../helpers/sink.js'

interface Run {
  code: number
  out: string
  err: string
}

/** A CLI on a temp deploy dir, for box kass-1, on a clock the test sets. */
async function setup(t: TestContext) {
  const root = await tmpDir(t)
  const config = loadConfig({
    CARLOS_DEPLOYMENT_DIR: root,
    CARLOS_BOX: 'kass-1',
    CARLOS_DATA_DIR: path.join(root, 'data'),
    CARLOS_ACTIVATOR_URL: 'http://127.0.0.1:9/',
  })
  const store = new DirDeployStore(root)
  const dir = path.join(root, 'layout', 'intents')
  let clock = new Date('2026-11-30T08:00:00.000Z')
  const run = async (...argv: string[]): Promise<Run> => {
    const out = sink()
    const err = sink()
    const code = await intentCommand(argv, {
      config,
      store,
      stdout: out.stream,
      stderr: err.stream,
      now: () => clock,
      by: 'ops@test',
    })
    return { code, out: out.text(), err: err.text() }
  }
  const status = async () => {
    const r = await run('status', '--json')
    return { ...r, json: JSON.parse(r.out) as { intent: IntentRecord | null; mode: string; error?: string } }
  }
  const setClock = (iso: string) => {
    clock = new Date(iso)
  }
  const put = async (r: Partial<IntentRecord> & { id: string }, name = `${r.id}.json`) => {
    await fs.mkdir(dir, { recursive: true })
    await fs.writeFile(
      path.join(dir, name),
      JSON.stringify({ mode: 'nested', force: false, recordedAt: 'x', by: 'hand', ...r }),
    )
  }
  return { root, config, dir, store, run, status, setClock, put }
}

const live = () => new AbortController().signal

void test('migrate --fleet records a fleet-wide nested intent and status reads it', async (t) => {
  const { run, status, store } = await setup(t)
  const r = await run('migrate', '--fleet')
  assert.equal(r.code, 0, r.err)
  const [rec] = await store.list(live())
  assert.ok(rec)
  assert.equal(r.out, `recorded intent ${rec.id}: nested for the whole fleet\n`)
  assert.deepEqual(rec, {
    id: rec.id,
    mode: 'nested',
    force: false,
    recordedAt: '2026-11-30T08:00:00.000Z',
    by: 'ops@test',
  })
  assert.ok(!('box' in rec))
  assert.match(rec.id, /^20261130T080000\.000Z-[0-9a-f]{6}$/)
  const s = await status()
  assert.equal(s.code, 0)
  assert.deepEqual(s.json, { intent: rec, mode: 'nested' })
})

void test('revert --box --force records a forced flat intent for that box', async (t) => {
  const { run, status, store } = await setup(t)
  const r = await run('revert', '--box', 'kass-1', '--force')
  assert.equal(r.code, 0, r.err)
  const [rec] = await store.list(live())
  assert.ok(rec)
  assert.equal(r.out, `recorded intent ${rec.id}: flat for box kass-1 (forced)\n`)
  assert.equal(rec.box, 'kass-1')
  assert.equal(rec.force, true)
  assert.deepEqual((await status()).json, { intent: rec, mode: 'flat' })
})

void test('ids sort by time for many records in one millisecond and after the clock steps back', async (t) => {
  const { run, status, store, setClock } = await setup(t)
  const want: string[] = []
  // Twenty in one millisecond: each must sort after the last, or status would read an older one.
  for (let i = 0; i < 20; i++) {
    const mode = i % 2 === 0 ? 'migrate' : 'revert'
    assert.equal((await run(mode, '--fleet')).code, 0)
    want.push(mode === 'migrate' ? 'nested' : 'flat')
    assert.equal((await status()).json.mode, want.at(-1))
  }
  setClock('2026-11-30T07:00:00.000Z') // an hour back
  for (const mode of ['migrate', 'revert', 'migrate'] as const) {
    assert.equal((await run(mode, '--fleet')).code, 0)
    want.push(mode === 'migrate' ? 'nested' : 'flat')
    assert.equal((await status()).json.mode, want.at(-1))
  }
  const records = await store.list(live())
  assert.deepEqual(
    records.map((r) => r.mode),
    want,
    'the store lists the records in the order they were recorded',
  )
  assert.equal(new Set(records.map((r) => r.id)).size, records.length)
  // The stepped-back records keep the recordedAt the clock gave them.
  assert.equal(records.at(-1)?.recordedAt, '2026-11-30T07:00:00.000Z')
  // Ids carry a counter only while the clock has not passed the newest stamp; they never grow with every record.
  for (const r of records) assert.match(r.id, /^20261130T080000\.000Z-[0-9a-f]{6}(?:\.[0-9]{6})?$/)
  // Once the clock passes the newest stamp, ids are stamped with it again.
  setClock('2026-11-30T08:00:00.001Z')
  const r = await run('revert', '--fleet')
  assert.match(r.out, /^recorded intent 20261130T080000\.001Z-[0-9a-f]{6}: flat/)
  assert.equal((await status()).json.intent?.recordedAt, '2026-11-30T08:00:00.001Z')
})

void test('the newest intent addressing this box wins; another box label is not read', async (t) => {
  const { run, status, setClock } = await setup(t)
  setClock('2026-11-30T08:00:00.000Z')
  await run('migrate', '--fleet')
  setClock('2026-11-30T08:00:01.000Z')
  await run('revert', '--box', 'kass-2')
  let s = await status()
  assert.equal(s.json.mode, 'nested')
  assert.equal(s.json.intent?.box, undefined)
  setClock('2026-11-30T08:00:02.000Z')
  await run('revert', '--box', 'kass-1')
  s = await status()
  assert.equal(s.json.mode, 'flat')
  assert.equal(s.json.intent?.box, 'kass-1')
  setClock('2026-11-30T08:00:03.000Z')
  await run('migrate', '--fleet', '--force')
  s = await status()
  assert.equal(s.json.mode, 'nested')
  assert.equal(s.json.intent?.force, true)
})

void test('status with nothing recorded is none, exit 0', async (t) => {
  const { run, status } = await setup(t)
  const s = await status()
  assert.equal(s.code, 0)
  assert.deepEqual(s.json, { intent: null, mode: 'none' })
  const h = await run('status')
  assert.equal(h.code, 0)
  assert.match(h.out, /^box +kass-1\nmode +none\n/)
})

void test('status prints a short human text', async (t) => {
  const { run, store } = await setup(t)
  await run('migrate', '--box', 'kass-1', '--force')
  const [rec] = await store.list(live())
  assert.ok(rec)
  const h = await run('status')
  assert.equal(h.code, 0)
  assert.equal(
    h.out,
    `box       kass-1\nmode      nested\nintent    ${rec.id} (box kass-1)\n` +
      'recorded  2026-11-30T08:00:00.000Z by ops@test\nforce     yes: awake instances are stopped at once\n',
  )
})

void test('a malformed record, a schema failure, a name/id mismatch or ENOTDIR: status is unreadable, exit 1', async (t) => {
  const cases: Array<[string, (s: Awaited<ReturnType<typeof setup>>) => Promise<string>, RegExp]> = [
    [
      'bad JSON',
      async ({ dir }) => {
        await fs.writeFile(path.join(dir, 'x.json'), '{')
        return path.join(dir, 'x.json')
      },
      /not JSON/,
    ],
    [
      'schema failure',
      async ({ put, dir }) => {
        await put({ id: 'y', force: 'no' as unknown as boolean })
        return path.join(dir, 'y.json')
      },
      /force must be boolean/,
    ],
    [
      'id/name mismatch',
      async ({ put, dir }) => {
        await put({ id: 'zz' }, 'z.json')
        return path.join(dir, 'z.json')
      },
      /must be named zz\.json/,
    ],
    [
      'ENOTDIR',
      async ({ dir }) => {
        await fs.rm(dir, { recursive: true })
        await fs.writeFile(dir, 'a file where the directory should be')
        return dir
      },
      /ENOTDIR/,
    ],
  ]
  for (const [what, spoil, why] of cases) {
    await t.test(what, async (t) => {
      const s = await setup(t)
      assert.equal((await s.run('migrate', '--fleet')).code, 0)
      const file = await spoil(s)
      const st = await s.status()
      assert.equal(st.code, 1)
      assert.equal(st.json.mode, 'unreadable')
      assert.equal(st.json.intent, null)
      assert.ok(st.json.error?.includes(file), st.json.error)
      assert.match(st.json.error ?? '', why)
      assert.ok(st.err.includes(file), st.err)
      const h = await s.run('status')
      assert.equal(h.code, 1)
      assert.match(h.out, /mode +unreadable/)
      // Recording on top of an unreadable store is refused: its id could not be placed after the newest.
      const m = await s.run('revert', '--fleet')
      assert.equal(m.code, 1)
      assert.ok(m.err.includes(file), m.err)
      assert.equal(m.out, '')
    })
  }
})

void test('an unknown mode in the newest record addressing the box is unreadable, exit 1', async (t) => {
  const { status, put } = await setup(t)
  await put({ id: '20261130T080000.000Z-000001', mode: 'nested' })
  await put({ id: '20261130T080000.000Z-000002', mode: 'sideways', box: 'kass-1' })
  const s = await status()
  assert.equal(s.code, 1)
  assert.equal(s.json.mode, 'unreadable')
  assert.equal(s.json.intent?.mode, 'sideways')
  assert.match(s.json.error ?? '', /intent 20261130T080000\.000Z-000002: mode "sideways" is not flat or nested/)
  assert.match(s.err, /sideways/)
})

void test('an unknown mode in an older record superseded by a valid one is not read', async (t) => {
  const { status, put, run } = await setup(t)
  await put({ id: '20261130T070000.000Z-000001', mode: 'sideways' })
  await put({ id: '20261130T070000.000Z-000002', mode: 'hybrid', box: 'kass-2' })
  assert.equal((await run('revert', '--fleet')).code, 0)
  const s = await status()
  assert.equal(s.code, 0, s.err)
  assert.equal(s.json.mode, 'flat')
  assert.equal(s.json.intent?.by, 'ops@test')
})

void test('--box is folded to lower case, as CARLOS_BOX is: an intent for KASS-1 addresses box kass-1', async (t) => {
  const { run, status, store } = await setup(t)
  const r = await run('revert', '--box', 'KASS-1')
  assert.equal(r.code, 0, r.err)
  const [rec] = await store.list(live())
  assert.equal(rec?.box, 'kass-1')
  assert.match(r.out, /flat for box kass-1\n$/)
  assert.equal((await status()).json.mode, 'flat')
})

void test('an invalid --box is refused with the reason, and nothing is written', async (t) => {
  const { run, dir } = await setup(t)
  for (const [box, why] of [
    ['-kass', /not a-z, 0-9 and inner hyphens/],
    ['', /empty/],
    ['../etc', /empty label/],
    ['kass/1', /not a-z/],
  ] as const) {
    // --box=VALUE: parseArgs takes a value starting with '-' only in this form.
    const r = await run('migrate', `--box=${box}`)
    assert.equal(r.code, 1, box)
    assert.match(r.err, why)
    assert.equal(r.out, '')
  }
  await assert.rejects(fs.readdir(dir), { code: 'ENOENT' })
})

void test('usage errors exit 2 with the usage on stderr, and write nothing', async (t) => {
  const { run, dir } = await setup(t)
  for (const argv of [
    [],
    ['frobnicate'],
    ['migrate', '--colour'],
    ['migrate', '--box'],
    ['migrate', 'extra'],
    ['migrate'],
    ['revert'],
    ['revert', '--force'],
    ['revert', '--box', 'kass-1', '--fleet'],
    ['prune'],
    ['prune', '--keep', 'two'],
    ['revert', '--json'],
    ['status', '--box', 'kass-1'],
    ['status', '--force'],
  ]) {
    const r = await run(...argv)
    assert.equal(r.code, 2, argv.join(' '))
    assert.match(r.err, /usage:/)
    assert.equal(r.out, '')
  }
  await assert.rejects(fs.readdir(dir), { code: 'ENOENT' })
})

void test('--box and --fleet: one of the two is required, and the refusal writes nothing', async (t) => {
  const { run, dir } = await setup(t)
  const none = await run('revert')
  assert.equal(none.code, 2)
  assert.match(none.err, /say whom the intent is for: --box LABEL for one box, or --fleet for every box/)
  const both = await run('revert', '--fleet', '--box', 'kass-1')
  assert.equal(both.code, 2)
  assert.match(both.err, /--box and --fleet are two different intents/)
  await assert.rejects(fs.readdir(dir), { code: 'ENOENT' })
})

void test('--force for this box without CARLOS_ACTIVATOR_URL is refused naming the variable; nothing is written', async (t) => {
  const root = await tmpDir(t)
  const config = loadConfig({
    CARLOS_DEPLOYMENT_DIR: root,
    CARLOS_BOX: 'kass-1',
    CARLOS_DATA_DIR: path.join(root, 'data'),
  })
  const store = new DirDeployStore(root)
  const out = sink()
  const err = sink()
  const code = await intentCommand(['migrate', '--box', 'KASS-1', '--force'], {
    config,
    store,
    stdout: out.stream,
    stderr: err.stream,
  })
  assert.equal(code, 1)
  assert.match(err.text(), /--force for box kass-1, which has no CARLOS_ACTIVATOR_URL to stop an awake instance with/)
  assert.deepEqual(await store.list(live()), [])
})

void test('--force for another box is refused when its published summary says it cannot stop an awake instance; --fleet names every such box', async (t) => {
  const { run, store } = await setup(t)
  const summary = (box: string, canStopAwake?: boolean) => ({
    box,
    version: '0.1.0',
    intent: null,
    mode: 'flat',
    converged: false,
    counts: {},
    held: 0,
    leg: { running: false, pending: false, lastRunAt: null },
    ...(canStopAwake === undefined ? {} : { canStopAwake }),
    at: '2026-11-30T08:00:00.000Z',
    expiresAt: '2126-11-30T08:00:00.000Z',
  })
  await store.publishBox(summary('web-02', false), live())
  await store.publishBox(summary('web-03', true), live())
  await store.publishBox(summary('web-04'), live())
  const other = await run('migrate', '--box', 'web-02', '--force')
  assert.equal(other.code, 1)
  assert.match(
    other.err,
    /--force for box web-02, which has no CARLOS_ACTIVATOR_URL to stop an awake instance with; set CARLOS_ACTIVATOR_URL there/,
  )
  const fleet = await run('migrate', '--fleet', '--force')
  assert.equal(fleet.code, 1)
  assert.match(fleet.err, /--force for the whole fleet, but box web-02 has no CARLOS_ACTIVATOR_URL/)
  assert.deepEqual(await store.list(live()), [], 'nothing recorded on a refusal')
  // Without --force, and for a box that can stop (or did not say), the intent is recorded.
  assert.equal((await run('migrate', '--box', 'web-02')).code, 0)
  assert.equal((await run('migrate', '--box', 'web-03', '--force')).code, 0)
  assert.equal((await run('migrate', '--box', 'web-04', '--force')).code, 0)
  assert.equal((await store.list(live())).length, 3)
})

void test('--dry-run prints what this box would do, from its report, and records nothing', async (t) => {
  const { root, config, dir } = await setup(t)
  const store = new DirDeployStore(root)
  const report: LayoutReport = {
    box: 'kass-1',
    mode: 'flat',
    default: false,
    defaultBlocked: '',
    leg: { running: false, pending: false, lastRun: null, retryAt: null },
    warnings: [],
    rows: {
      'a.example.com': { layout: 'flat', code: 'not_managed', reason: 'flat paths', note: '' },
      'b.example.com': { layout: 'nested', code: 'no_activator', reason: 'nested paths', note: '' },
      'c.example.com': {
        layout: 'conflict',
        code: 'dir_claimed',
        reason: 'shares its dir with a.example.com',
        note: '',
      },
      'd.example.com': { layout: 'external', code: 'not_managed', reason: 'not hibernating', note: '' },
    },
  }
  for (const [argv, want] of [
    [
      ['migrate', '--box', 'kass-1', '--dry-run'],
      'dry run: would record nested for box kass-1; nothing recorded\n' +
        'box kass-1 would converge to nested: 1 to move, 1 already nested, 2 withheld\n' +
        '  move      a.example.com\n' +
        '  withheld  c.example.com (conflict): shares its dir with a.example.com\n' +
        '  withheld  d.example.com (external): not hibernating\n',
    ],
    [
      ['revert', '--fleet', '--dry-run'],
      'dry run: would record flat for the whole fleet; nothing recorded\n' +
        'box kass-1 would converge to flat: 1 to move, 1 already flat, 2 withheld\n' +
        '  move      b.example.com\n' +
        '  withheld  c.example.com (conflict): shares its dir with a.example.com\n' +
        '  withheld  d.example.com (external): not hibernating\n',
    ],
    [
      ['revert', '--box', 'kass-2', '--dry-run'],
      'dry run: would record flat for box kass-2; nothing recorded\n' +
        'box kass-2 is not this box (kass-1): run --dry-run there to see its rows\n',
    ],
  ] as const) {
    const out = sink()
    const err = sink()
    const code = await intentCommand([...argv], {
      config,
      store,
      stdout: out.stream,
      stderr: err.stream,
      report: () => Promise.resolve(report),
    })
    assert.equal(code, 0, err.text())
    assert.equal(out.text(), want)
  }
  // Another box that published its summary: what it would do, from its counts; --fleet adds it after this box.
  await store.publishBox(
    {
      box: 'kass-2',
      version: '0.1.0',
      intent: null,
      mode: 'flat',
      converged: false,
      counts: { flat: 5, nested: 2, fenced: 1, external: 3 },
      held: 1,
      leg: { running: false, pending: false, lastRunAt: null },
      at: '2026-11-30T08:00:00.000Z',
      expiresAt: '2126-11-30T08:00:00.000Z',
    },
    live(),
  )
  const other =
    'box kass-2, from the summary it published at 2026-11-30T08:00:00.000Z: up to 5 to move, 2 already nested, 4 withheld (3 external, 1 fenced); run --dry-run there to see its rows\n'
  for (const [argv, want] of [
    [
      ['migrate', '--box', 'kass-2', '--dry-run'],
      'dry run: would record nested for box kass-2; nothing recorded\n' + other,
    ],
    [
      ['migrate', '--fleet', '--dry-run'],
      'dry run: would record nested for the whole fleet; nothing recorded\n' +
        'box kass-1 would converge to nested: 1 to move, 1 already nested, 2 withheld\n' +
        '  move      a.example.com\n' +
        '  withheld  c.example.com (conflict): shares its dir with a.example.com\n' +
        '  withheld  d.example.com (external): not hibernating\n' +
        other,
    ],
  ] as const) {
    const out = sink()
    const code = await intentCommand([...argv], {
      config,
      store,
      stdout: out.stream,
      stderr: sink().stream,
      report: () => Promise.resolve(report),
    })
    assert.equal(code, 0)
    assert.equal(out.text(), want)
  }
  await assert.rejects(fs.readdir(dir), { code: 'ENOENT' })
})

void test('prune --keep N keeps the newest N, the newest addressing each box, and what a live box converges to', async (t) => {
  const { run, store, setClock, root } = await setup(t)
  const ids: string[] = []
  const record = async (iso: string, ...argv: string[]) => {
    setClock(iso)
    const r = await run(...argv)
    assert.equal(r.code, 0, r.err)
    ids.push(/recorded intent (\S+):/.exec(r.out)?.[1] ?? '')
  }
  await record('2026-11-30T08:00:00.000Z', 'revert', '--box', 'kass-2') // 0: superseded by 4 for kass-2
  await record('2026-11-30T08:00:01.000Z', 'migrate', '--fleet') // 1: superseded by 4
  await record('2026-11-30T08:00:02.000Z', 'revert', '--box', 'kass-3') // 2: kass-3 reports converging to it
  await record('2026-11-30T08:00:03.000Z', 'migrate', '--box', 'kass-3') // 3: superseded by 4 for kass-3
  await record('2026-11-30T08:00:04.000Z', 'revert', '--fleet') // 4: the newest fleet-wide
  await record('2026-11-30T08:00:05.000Z', 'migrate', '--box', 'kass-2') // 5: the newest addressing kass-2
  await record('2026-11-30T08:00:06.000Z', 'migrate', '--box', 'kass-1') // 6: the newest
  // A live box (its summary in the directory store) still converging to record 2.
  const boxes = path.join(root, 'layout', 'boxes')
  await fs.mkdir(boxes, { recursive: true })
  await fs.writeFile(
    path.join(boxes, 'kass-3.json'),
    JSON.stringify({
      box: 'kass-3',
      version: '0.1.0',
      intent: ids[2],
      mode: 'nested',
      converged: false,
      counts: {},
      held: 0,
      leg: { running: true, pending: false, lastRunAt: null },
      at: '2026-11-30T08:00:02.000Z',
      expiresAt: '2999-01-01T00:00:00.000Z',
    }),
  )
  const dry = await run('prune', '--keep', '1', '--dry-run')
  assert.equal(dry.code, 0, dry.err)
  assert.match(dry.out, /^would remove 3 of 7 intent records; 4 kept\n/)
  assert.equal((await store.list(live())).length, 7, 'a dry run removes nothing')
  const before = await Promise.all(
    ['kass-1', 'kass-2', 'kass-3', 'kass-9'].map(async (b) => selectIntent(await store.list(live()), b)),
  )
  const r = await run('prune', '--keep', '1')
  assert.equal(r.code, 0, r.err)
  for (const i of [0, 1, 3]) assert.match(r.out, new RegExp(`removed +${ids[i]}\\n`))
  assert.match(r.out, new RegExp(`kept +${ids[6]}: one of the newest 1`))
  assert.match(r.out, new RegExp(`kept +${ids[5]}: the newest addressing box kass-2`))
  assert.match(r.out, new RegExp(`kept +${ids[4]}: the newest addressing the whole fleet`))
  assert.match(r.out, new RegExp(`kept +${ids[2]}: box kass-3 reports it is converging to it`))
  assert.deepEqual(
    (await store.list(live())).map((x) => x.id),
    [ids[2], ids[4], ids[5], ids[6]],
  )
  // Every box, named or not, still reads what it read before.
  const after = await Promise.all(
    ['kass-1', 'kass-2', 'kass-3', 'kass-9'].map(async (b) => selectIntent(await store.list(live()), b)),
  )
  assert.deepEqual(after, before)
})

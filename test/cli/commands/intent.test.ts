import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test, type TestContext } from 'node:test'
import { intentCommand } from '../../../src/cli/commands/intent.js'
import { loadConfig } from '../../../src/config.js'
import type { IntentRecord } from '../../../src/domain/schemas.js'
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
  const config = loadConfig({ CARLOS_DEPLOYMENT_DIR: root, CARLOS_BOX: 'kass-1', CARLOS_DATA_DIR: path.join(root, 'data') })
  const store = new DirDeployStore(root)
  const dir = path.join(root, 'layout', 'intents')
  let clock = new Date('2026-11-30T08:00:00.000Z')
  const run = async (...argv: string[]): Promise<Run> => {
    const out = sink()
    const err = sink()
    const code = await intentCommand(argv, { config, store, stdout: out.stream, stderr: err.stream, now: () => clock, by: 'ops@test' })
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
    await fs.writeFile(path.join(dir, name), JSON.stringify({ mode: 'nested', force: false, recordedAt: 'x', by: 'hand', ...r }))
  }
  return { root, dir, store, run, status, setClock, put }
}

const live = () => new AbortController().signal

void test('migrate records a fleet-wide nested intent and status reads it', async (t) => {
  const { run, status, store } = await setup(t)
  const r = await run('migrate')
  assert.equal(r.code, 0, r.err)
  const [rec] = await store.list(live())
  assert.ok(rec)
  assert.equal(r.out, `recorded intent ${rec.id}: nested for the whole fleet\n`)
  assert.deepEqual(rec, { id: rec.id, mode: 'nested', force: false, recordedAt: '2026-11-30T08:00:00.000Z', by: 'ops@test' })
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
    assert.equal((await run(mode)).code, 0)
    want.push(mode === 'migrate' ? 'nested' : 'flat')
    assert.equal((await status()).json.mode, want.at(-1))
  }
  setClock('2026-11-30T07:00:00.000Z') // an hour back
  for (const mode of ['migrate', 'revert', 'migrate'] as const) {
    assert.equal((await run(mode)).code, 0)
    want.push(mode === 'migrate' ? 'nested' : 'flat')
    assert.equal((await status()).json.mode, want.at(-1))
  }
  const records = await store.list(live())
  assert.deepEqual(records.map((r) => r.mode), want, 'the store lists the records in the order they were recorded')
  assert.equal(new Set(records.map((r) => r.id)).size, records.length)
  // The stepped-back records keep the recordedAt the clock gave them.
  assert.equal(records.at(-1)?.recordedAt, '2026-11-30T07:00:00.000Z')
  // Ids carry a counter only while the clock has not passed the newest stamp; they never grow with every record.
  for (const r of records) assert.match(r.id, /^20261130T080000\.000Z-[0-9a-f]{6}(?:\.[0-9]{6})?$/)
  // Once the clock passes the newest stamp, ids are stamped with it again.
  setClock('2026-11-30T08:00:00.001Z')
  const r = await run('revert')
  assert.match(r.out, /^recorded intent 20261130T080000\.001Z-[0-9a-f]{6}: flat/)
  assert.equal((await status()).json.intent?.recordedAt, '2026-11-30T08:00:00.001Z')
})

void test('the newest intent addressing this box wins; another box label is not read', async (t) => {
  const { run, status, setClock } = await setup(t)
  setClock('2026-11-30T08:00:00.000Z')
  await run('migrate')
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
  await run('migrate', '--force')
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
    ['bad JSON', async ({ dir }) => {
      await fs.writeFile(path.join(dir, 'x.json'), '{')
      return path.join(dir, 'x.json')
    }, /not JSON/],
    ['schema failure', async ({ put, dir }) => {
      await put({ id: 'y', force: 'no' as unknown as boolean })
      return path.join(dir, 'y.json')
    }, /force must be boolean/],
    ['id/name mismatch', async ({ put, dir }) => {
      await put({ id: 'zz' }, 'z.json')
      return path.join(dir, 'z.json')
    }, /must be named zz\.json/],
    ['ENOTDIR', async ({ dir }) => {
      await fs.rm(dir, { recursive: true })
      await fs.writeFile(dir, 'a file where the directory should be')
      return dir
    }, /ENOTDIR/],
  ]
  for (const [what, spoil, why] of cases) {
    await t.test(what, async (t) => {
      const s = await setup(t)
      assert.equal((await s.run('migrate')).code, 0)
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
      const m = await s.run('revert')
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
  assert.equal((await run('revert')).code, 0)
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

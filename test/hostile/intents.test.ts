// Intent records planted in both deploy stores by someone other than
// `layoutd intent`: garbage, records that lie about their id, oversized
// ones, files that are not files. Each makes the intent unreadable (the
// report's mode, with a warning that names the record and what is wrong
// with it), so the box fails closed: the tenants stay where the last good
// intent put them, and nothing in the data root or the registry changes.
// Each planted record would have moved every tenant nested, had it been read.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { after, before, test } from 'node:test'
import type { IntentRecord } from '../../src/domain/schemas.js'
import { EtcdDeployStore } from '../../src/infra/deploy-etcd/store.js'
import { EtcdServer } from '../helpers/etcd.js'
import { assertUnchanged } from '../helpers/fingerprint.js'
import { addFlat, converge, fileScope, hostileBox, intentRecord, recordIntent, report, type HostileBox } from './box.js'

const file = fileScope(after)
let dirBox: HostileBox
let etcdBox: HostileBox
let etcd: EtcdServer
const PREFIX = `/hostile/${process.pid}/intents/`

before(async () => {
  const etcdDir = await fs.mkdtemp(path.join(os.tmpdir(), 'layoutd-hostile-etcd-'))
  etcd = await EtcdServer.start(etcdDir)
  file.after(async () => {
    await etcd.kill()
    await fs.rm(etcdDir, { recursive: true, force: true })
  })
  const tenants = async (b: HostileBox): Promise<void> => {
    await addFlat(b, 'a.example.com')
    await addFlat(b, 'b.example.com')
    await recordIntent(b, 'flat')
  }
  dirBox = await hostileBox(file, { before: tenants })
  const store = new EtcdDeployStore([etcd.url], { prefix: PREFIX })
  file.after(() => store.close())
  etcdBox = await hostileBox(file, { store, before: tenants })
})

/**
 * Plants a record with plant, runs the leg, and asserts the intent is
 * unreadable for the reason given and that nothing changed; then removes it
 * with unplant and asserts the box reads its flat intent again.
 */
async function unreadable(
  b: HostileBox,
  plant: () => Promise<void>,
  unplant: () => Promise<void>,
  why: RegExp,
): Promise<void> {
  const before = b.fp()
  await plant()
  try {
    const run = await converge(b)
    assert.deepEqual(run.results, [], 'nothing converged')
    const r = await report(b)
    assert.equal(r.mode, 'unreadable')
    const warning = r.warnings.find((w) => w.startsWith('the layout intent cannot be read'))
    assert.ok(warning !== undefined, `a warning says why: ${JSON.stringify(r.warnings)}`)
    assert.match(warning, why)
    assert.deepEqual(Object.fromEntries(Object.entries(r.rows).map(([h, row]) => [h, row.layout])), {
      'a.example.com': 'flat',
      'b.example.com': 'flat',
    })
    assertUnchanged(before, b.fp())
  } finally {
    await unplant()
  }
  await converge(b)
  assert.equal((await report(b)).mode, 'flat', 'the good intent reads again once the record is gone')
}

// ---- the directory store ---------------------------------------------------

const intentsDir = () => path.join(dirBox.config.deploymentDir, 'layout', 'intents')

/** Plants a file (or whatever make makes) at <intents>/<name> for one case. */
async function inDir(name: string, make: (file: string) => Promise<void>, why: RegExp): Promise<void> {
  const f = path.join(intentsDir(), name)
  await unreadable(
    dirBox,
    () => make(f),
    () => fs.rm(f, { recursive: true, force: true }),
    why,
  )
}

const text = (data: string | Buffer) => (f: string) => fs.writeFile(f, data)
const nested = (extra: Record<string, unknown> = {}): IntentRecord & Record<string, unknown> => ({
  ...intentRecord('nested'),
  ...extra,
})

void test('dir store: a record that is not JSON', async () => {
  await inDir('zz-garbage.json', text('{"mode": "nested", '), /zz-garbage\.json: not JSON/)
})

void test('dir store: a record missing a field', async () => {
  const r = nested()
  const rest: Record<string, unknown> = { ...r }
  delete rest.force
  await inDir(`${r.id}.json`, text(JSON.stringify(rest)), /not an intent record: .*force/)
})

void test('dir store: a record with a field the format does not name', async () => {
  const r = nested({ exec: 'rm -rf /' })
  await inDir(`${r.id}.json`, text(JSON.stringify(r)), /not an intent record/)
})

void test('dir store: a record whose mode this build does not know', async () => {
  const r = intentRecord('Nested')
  await inDir(`${r.id}.json`, text(JSON.stringify(r)), /names mode "Nested", which is not flat or nested/)
})

void test('dir store: a record whose id is a traversal path', async () => {
  await inDir(
    'zz-traversal.json',
    text(JSON.stringify(nested({ id: '../../../etc/passwd' }))),
    /zz-traversal\.json: not an intent record: .*id/,
  )
})

void test('dir store: a record named for another id than it holds', async () => {
  const r = nested()
  await inDir(
    'zz-copied.json',
    text(JSON.stringify(r)),
    new RegExp(`holds id "${r.id}", so it must be named ${r.id}\\.json`),
  )
})

void test('dir store: a record over the 64 KiB limit', async () => {
  const r = nested({ by: 'x'.repeat(70_000) })
  await inDir(`${r.id}.json`, text(JSON.stringify(r)), /over the 65536-byte limit/)
})

void test('dir store: a FIFO under a record name does not hang the read', async () => {
  await inDir(
    'zz-fifo.json',
    (f) => Promise.resolve(void execFileSync('mkfifo', [f])),
    /zz-fifo\.json: cannot read: is not a regular file/,
  )
})

void test('dir store: a symlink under a record name is not followed', async () => {
  const r = nested()
  const real = path.join(dirBox.dir, 'outside-record.json')
  await fs.writeFile(real, JSON.stringify(r))
  await inDir(`${r.id}.json`, (f) => fs.symlink(real, f), /cannot read: .*ELOOP/)
})

void test('dir store: a directory under a record name', async () => {
  await inDir('zz-dir.json', (f) => fs.mkdir(f), /zz-dir\.json: cannot read: is not a regular file/)
})

void test('dir store: a record that is not UTF-8', async () => {
  await inDir(
    'zz-latin1.json',
    text(Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d])),
    /zz-latin1\.json: not an intent record/,
  )
})

void test('dir store: the intents directory is a file', async () => {
  const dir = intentsDir()
  const aside = `${dir}.aside`
  await unreadable(
    dirBox,
    async () => {
      await fs.rename(dir, aside)
      await fs.writeFile(dir, 'not a directory')
    },
    async () => {
      await fs.rm(dir)
      await fs.rename(aside, dir)
    },
    /cannot list intents: ENOTDIR/,
  )
})

void test("dir store: a nested record for another box is not this box's, and moves nothing", async () => {
  const before = dirBox.fp()
  const r = intentRecord('nested', { box: 'kass-1.evil' })
  const f = path.join(intentsDir(), `${r.id}.json`)
  await fs.writeFile(f, JSON.stringify(r))
  try {
    const run = await converge(dirBox)
    assert.deepEqual(
      run.results.map((x) => x.outcome),
      ['unchanged', 'unchanged'],
    )
    assert.equal((await report(dirBox)).mode, 'flat')
    assertUnchanged(before, dirBox.fp())
  } finally {
    await fs.rm(f)
  }
})

// ---- etcd ----------------------------------------------------------------------

/** Puts value at key (under the store's prefix) for one case. */
async function inEtcd(key: string, value: string | Buffer, why: RegExp): Promise<void> {
  await unreadable(
    etcdBox,
    () => etcd.put(`${PREFIX}${key}`, value),
    () => etcd.del(`${PREFIX}${key}`),
    why,
  )
}

void test('etcd: a value that is not JSON', async () => {
  const r = nested()
  await inEtcd(r.id, '{"mode": ', new RegExp(`${r.id}: not JSON`))
})

void test('etcd: a value that is not UTF-8', async () => {
  const r = nested()
  await inEtcd(r.id, Buffer.from([0xff, 0xfe, 0x7b, 0x7d]), new RegExp(`${r.id}: not JSON`))
})

void test('etcd: a key under the prefix that is not an id', async () => {
  const r = nested()
  await inEtcd(`../../${r.id}`, JSON.stringify(r), /the key is not .*<id>/)
})

void test('etcd: a value holding another id than its key', async () => {
  const r = nested()
  await inEtcd(`${r.id}0`, JSON.stringify(r), new RegExp(`holds id "${r.id}", so its key must be`))
})

void test('etcd: a value over the 64 KiB limit', async () => {
  const r = nested({ by: 'y'.repeat(70_000) })
  await inEtcd(r.id, JSON.stringify(r), /over the 65536-byte limit/)
})

void test('etcd: a record whose mode this build does not know', async () => {
  const r = intentRecord('sideways')
  await inEtcd(r.id, JSON.stringify(r), /names mode "sideways"/)
})

void test('etcd: a record with a field the format does not name', async () => {
  const r = nested({ force: 'yes' })
  await inEtcd(r.id, JSON.stringify(r), /not an intent record: .*force/)
})

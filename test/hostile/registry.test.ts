// Registry rows written by another program, straight into D/registry.db
// (no `layoutd routes add` to refuse them): traversal hosts, paths outside
// the data root, hostnames that are not valid, duplicate and overlapping
// dirs, a symlinked dir. Under a nested intent the pass would move any row
// it recognised; each of these gets the report's word for what it is, the
// run refuses it with the reason, and nothing in the data root, the
// registry or the directory outside it changes. A symlinked dir is the one
// row the pass stops for: it is held, and its hold marker is the one change.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { after, before, test } from 'node:test'
import Database from 'better-sqlite3'
import { dispatch } from '../../src/cli/dispatch.js'
import { flatPaths, nestedPaths } from '../../src/domain/paths.js'
import { assertUnchanged, diffFingerprints, type FingerprintOptions } from '../helpers/fingerprint.js'
import { Sink } from '../helpers/sink.js'
import { converge, fileScope, hostileBox, recordIntent, report, type HostileBox } from './box.js'
import { tmpDir } from '../helpers/tmp.js'

const file = fileScope(after)
let box: HostileBox
let outside: string
let db: Database.Database

interface Row {
  host: string
  kind?: string
  socket?: string
  dir?: string
  db?: string
  hibernate?: 0 | 1
}

before(async () => {
  outside = await tmpDir(file, 'layoutd-hostile-outside-')
  await fs.writeFile(path.join(outside, 'secret.txt'), "not the tenant's")
  box = await hostileBox(file, {
    before: async (b) => {
      await recordIntent(b, 'nested')
      await fs.mkdir(path.join(b.config.dataDir, 'nested'), { recursive: true })
    },
  })
  // Another program's connection to the registry, as sqlite3(1) would open it.
  db = new Database(path.join(box.config.dataDir, 'registry.db'))
  file.after(() => db.close())
})

const also = (): FingerprintOptions => ({ also: { outside } })

function insert(rows: Row[]): void {
  const at = new Date().toISOString()
  const stmt = db.prepare(
    'INSERT INTO routes (host, kind, socket, dir, db, hibernate, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
  )
  for (const r of rows)
    stmt.run(r.host, r.kind ?? 'instance', r.socket ?? '', r.dir ?? '', r.db ?? '', r.hibernate ?? 1, at, at)
}

function remove(rows: Row[]): void {
  for (const r of rows) db.prepare('DELETE FROM routes WHERE host = ?').run(r.host)
}

/**
 * Inserts rows, runs the leg under the nested intent, and asserts each
 * row's word and its refusal, and that nothing changed; removes the rows.
 */
async function judged(rows: Row[], word: string, why: RegExp): Promise<void> {
  insert(rows)
  try {
    const before = box.fp(also())
    const run = await converge(box)
    const r = await report(box)
    for (const row of rows) {
      assert.equal(r.rows[row.host]?.layout, word, `${JSON.stringify(row.host)}: ${JSON.stringify(r.rows[row.host])}`)
      assert.match(r.rows[row.host]?.reason ?? '', why)
      const result = run.results.find((x) => x.host === row.host)
      assert.equal(result?.outcome, 'refused', JSON.stringify(run.results))
      assert.match(result.reason, why)
      // The refusal's code is the row's own: what a script reads, whichever sentence says it.
      assert.notEqual(result.code, '', result.reason)
      assert.equal(result.code, r.rows[row.host]?.code, result.reason)
    }
    assertUnchanged(before, box.fp(also()))
  } finally {
    remove(rows)
  }
}

const D = () => box.config.dataDir
const flat = (host: string) => flatPaths(box.config, host)

void test('a traversal host: foreign, not a valid hostname', async () => {
  await judged(
    [{ host: '../../etc', dir: path.join(D(), 'apps', '../../etc'), socket: path.join(D(), 'run', '../../etc.sock') }],
    'foreign',
    /not a valid hostname/,
  )
})

void test('an upper-case host at the flat paths of its lower-case name: foreign', async () => {
  const p = flat('up.example.com')
  await judged([{ host: 'UP.example.com', dir: p.dir, socket: p.socket }], 'foreign', /lower case/)
})

void test('a host with a newline in it: foreign', async () => {
  await judged(
    [{ host: 'nl.example.com\nx', dir: path.join(D(), 'apps', 'nl'), socket: path.join(D(), 'run', 'nl.sock') }],
    'foreign',
    /not a valid hostname/,
  )
})

void test('a host of 254 bytes: foreign, naming its length', async () => {
  const host = `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(62)}`
  await judged(
    [{ host, dir: path.join(D(), 'apps', 'long'), socket: path.join(D(), 'run', 'long.sock') }],
    'foreign',
    /254 bytes/,
  )
})

void test('a valid host whose dir climbs out of the data root (apps/../../outside): foreign', async () => {
  const host = 'climb.example.com'
  await judged(
    [{ host, dir: path.join(D(), 'apps', '..', '..', path.basename(outside)), socket: flat(host).socket }],
    'foreign',
    /neither the flat nor the nested shape/,
  )
})

void test('a valid host whose dir is outside the data root: foreign', async () => {
  await judged(
    [{ host: 'out.example.com', dir: outside, socket: flat('out.example.com').socket }],
    'foreign',
    /neither the flat nor the nested shape/,
  )
})

void test('a valid host with a relative dir: foreign', async () => {
  await judged(
    [{ host: 'rel.example.com', dir: 'apps/rel.example.com', socket: flat('rel.example.com').socket }],
    'foreign',
    /neither the flat nor the nested shape/,
  )
})

void test('a valid host at the flat paths with its db outside its dir: foreign', async () => {
  const p = flat('db.example.com')
  await judged(
    [{ host: 'db.example.com', dir: p.dir, socket: p.socket, db: path.join(outside, 'secret.txt') }],
    'foreign',
    /neither the flat nor the nested shape/,
  )
})

void test("a hibernating row with no socket is not the activator's: not reported, not moved, not woken", async () => {
  const host = 'nosock.example.com'
  insert([{ host, dir: flat(host).dir }])
  try {
    const before = box.fp(also())
    const run = await converge(box)
    assert.equal(
      run.results.find((x) => x.host === host),
      undefined,
    )
    assert.equal((await report(box)).rows[host], undefined)
    const claim = await box.app.inject({ method: 'POST', url: `/wakes/${host}`, remoteAddress: '127.0.0.1' })
    assert.equal(claim.statusCode, 409)
    assert.match(claim.body, /not activator-managed/)
    assertUnchanged(before, box.fp(also()))
  } finally {
    remove([{ host }])
  }
})

void test('two rows with one dir: both in conflict, naming the other', async () => {
  const p = flat('twin1.example.com')
  await judged(
    [
      { host: 'twin1.example.com', dir: p.dir, socket: p.socket },
      { host: 'twin2.example.com', dir: p.dir, socket: flat('twin2.example.com').socket },
    ],
    'conflict',
    /also claimed by twin[12]\.example\.com/,
  )
})

void test('a row whose dir is the data root itself, beside a flat row: both in conflict', async () => {
  const p = flat('inner.example.com')
  await judged(
    [
      { host: 'inner.example.com', dir: p.dir, socket: p.socket },
      { host: 'root.example.com', dir: D(), socket: flat('root.example.com').socket },
    ],
    'conflict',
    /contains|is inside/,
  )
})

void test('two rows with one socket: both in conflict', async () => {
  const p = flat('sock1.example.com')
  await judged(
    [
      { host: 'sock1.example.com', dir: p.dir, socket: p.socket },
      { host: 'sock2.example.com', dir: flat('sock2.example.com').dir, socket: p.socket },
    ],
    'conflict',
    /socket .* is also/,
  )
})

void test('a row whose flat destination another row claims: refused, destination taken', async () => {
  // nest is nested; squat claims its nested root as a dir: nest's revert is not asked here, but
  // squat's own move to nested would set nest's files aside.
  const n = nestedPaths(box.config, 'squat.example.com')
  const p = flat('squat.example.com')
  insert([
    { host: 'squat.example.com', dir: p.dir, socket: p.socket },
    { host: 'other.example.com', kind: 'static', dir: path.dirname(n.dir) },
  ])
  try {
    const before = box.fp(also())
    const run = await converge(box)
    const result = run.results.find((x) => x.host === 'squat.example.com')
    assert.equal(result?.outcome, 'refused', JSON.stringify(run.results))
    assert.match(result.reason, /destination taken: .*other\.example\.com/)
    assertUnchanged(before, box.fp(also()))
  } finally {
    remove([{ host: 'squat.example.com' }, { host: 'other.example.com' }])
  }
})

void test('routes list prints hostile rows as data, and changes nothing', async () => {
  const rows: Row[] = [{ host: '../../etc\n--json', dir: '/etc', socket: '/run/x.sock' }]
  insert(rows)
  try {
    const before = box.fp(also())
    const out = new Sink()
    const err = new Sink()
    const env = { CARLOS_DATA_DIR: D(), CARLOS_DEPLOYMENT_DIR: box.config.deploymentDir, CARLOS_BOX: 'kass-1' }
    assert.equal(await dispatch(['routes', 'list', '--json'], { environ: env, stdout: out, stderr: err }), 0, err.text)
    const listed = JSON.parse(out.text) as Array<{ host: string }>
    assert.ok(listed.some((r) => r.host === '../../etc\n--json'))
    assertUnchanged(before, box.fp(also()))
  } finally {
    remove(rows)
  }
})

void test('a row at the flat paths whose dir is a symlink out of the data root is held; its marker is the one change', async () => {
  const host = 'link.example.com'
  const p = flat(host)
  await fs.mkdir(path.dirname(p.dir), { recursive: true })
  await fs.symlink(outside, p.dir)
  insert([{ host, dir: p.dir, socket: p.socket }])
  const before = box.fp(also())
  const run = await converge(box)
  const result = run.results.find((x) => x.host === host)
  assert.equal(result?.outcome, 'held', JSON.stringify(run.results))
  assert.match(result.reason, /link\.example\.com is a symlink/)
  const r = await report(box)
  assert.equal(r.rows[host]?.layout, 'fenced')
  assert.match(r.rows[host]?.reason ?? '', /is a symlink/)
  const d = diffFingerprints(before, box.fp(also()))
  // D/layout is made for it when this is the box's first marker.
  assert.deepEqual(
    d.added.filter((l) => !l.startsWith('meta ') && !/^layout dir /.test(l)).map((l) => l.split(' ')[0]),
    [`layout/${host}.hold`],
  )
  assert.deepEqual(
    d.removed.filter((l) => !l.startsWith('meta ')),
    [],
  )
  const claim = await box.app.inject({ method: 'POST', url: `/wakes/${host}`, remoteAddress: '127.0.0.1' })
  assert.equal(claim.statusCode, 409, 'a held host does not wake')
})

void test("no instance key is written into a foreign row's dir outside the data root", async (t) => {
  const away = await tmpDir(t, 'layoutd-hostile-away-')
  await fs.writeFile(path.join(away, 'data.txt'), "someone else's")
  // Started, and its first leg run over: the key backfill ends before that run.
  const b = await hostileBox(t, {
    before: (x) => {
      x.registry.add({
        host: 'away.example.com',
        kind: 'instance',
        hibernate: true,
        dir: away,
        socket: flatPaths(x.config, 'away.example.com').socket,
        db: '',
      })
    },
  })
  assert.equal((await report(b)).rows['away.example.com']?.layout, 'foreign')
  assert.deepEqual(await fs.readdir(away), ['data.txt'], 'nothing written outside the data root')
})

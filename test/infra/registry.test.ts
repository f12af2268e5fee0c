import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test, type TestContext } from 'node:test'
import Database from 'better-sqlite3'
import { AppError } from '../../src/errors.js'
import type { Route } from '../../src/domain/schemas.js'
import { MIGRATIONS, migrate, type Migration } from '../../src/infra/migrations.js'
import { Registry, REGISTRY_FILE } from '../../src/infra/registry.js'
import { tmpDir } from '../helpers/tmp.js'

function openIn(t: TestContext, dataDir: string, now?: () => Date): Registry {
  const reg = Registry.open(dataDir, now ? { now } : {})
  t.after(() => reg.close())
  return reg
}

/** A second, raw connection: what the file holds, not what the Registry says. */
function raw(t: TestContext, dataDir: string): Database.Database {
  const db = new Database(path.join(dataDir, REGISTRY_FILE))
  t.after(() => db.close())
  return db
}

function route(host: string, over: Partial<Route> = {}): Route {
  const dir = `/data/apps/${host}`
  return { host, kind: 'instance', socket: `/data/run/${host}.sock`, dir, db: '', hibernate: true, ...over }
}

function code(err: unknown): string {
  assert.ok(err instanceof AppError, `expected an AppError, got ${String(err)}`)
  return err.code
}

void test('open creates the data dir, migrates, and reopens cleanly', async (t) => {
  const dataDir = path.join(await tmpDir(t), 'nested', 'data')
  const reg = Registry.open(dataDir)
  reg.add(route('a.example.com'))
  reg.close()
  const again = openIn(t, dataDir)
  assert.deepEqual(
    again.list().map((r) => r.host),
    ['a.example.com'],
  )
  const db = raw(t, dataDir)
  assert.equal(db.pragma('user_version', { simple: true }), MIGRATIONS.length)
  assert.equal(db.pragma('journal_mode', { simple: true }), 'wal')
  const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").pluck().all()
  assert.deepEqual(tables, ['meta', 'routes', 'wakes'])
})

void test('a registry migrated by a newer build is refused', async (t) => {
  const dataDir = await tmpDir(t)
  Registry.open(dataDir).close()
  const db = new Database(path.join(dataDir, REGISTRY_FILE))
  db.pragma(`user_version = ${MIGRATIONS.length + 1}`)
  db.close()
  assert.throws(() => Registry.open(dataDir), /schema version 2, newer than this build knows \(1\)/)
})

void test('migrate applies each step once, and a failed step leaves the version at the step before', async (t) => {
  const db = raw(t, await tmpDir(t))
  const ran: string[] = []
  const step = (name: string, fail = false): Migration => ({
    name,
    up(d) {
      ran.push(name)
      d.exec(`CREATE TABLE ${name} (x INTEGER)`)
      if (fail) throw new Error('boom')
    },
  })
  assert.throws(() => migrate(db, [step('one'), step('two', true)]), /migration 2 \(two\) failed: boom/)
  assert.equal(db.pragma('user_version', { simple: true }), 1)
  assert.equal(db.prepare("SELECT count(*) FROM sqlite_master WHERE name = 'two'").pluck().get(), 0)
  assert.equal(migrate(db, [step('one'), step('two')]), 2)
  assert.deepEqual(ran, ['one', 'two', 'two'])
  assert.equal(migrate(db, [step('one'), step('two')]), 2)
  assert.equal(ran.length, 3)
})

void test('add, get, list sorted by host, remove', async (t) => {
  const reg = openIn(t, await tmpDir(t))
  const b = route('b.example.com', { db: '/data/apps/b.example.com/app.db' })
  const a = route('a.example.com', { kind: 'static', hibernate: false, socket: '', dir: '' })
  reg.add(b)
  reg.add(a)
  assert.deepEqual(reg.get('b.example.com'), b)
  assert.equal(reg.get('c.example.com'), undefined)
  assert.deepEqual(reg.list(), [a, b])
  assert.equal(reg.remove('a.example.com'), true)
  assert.equal(reg.remove('a.example.com'), false)
  assert.deepEqual(reg.list(), [b])
})

void test('invalid hosts are refused and nothing is stored', async (t) => {
  const reg = openIn(t, await tmpDir(t))
  const bad = [
    'A.example.com',
    '..',
    'a..example.com',
    'a/b',
    '-a.example.com',
    `${'a'.repeat(64)}.example.com`,
    `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(62)}`,
    '',
  ]
  assert.equal(Buffer.byteLength(bad[6] ?? ''), 254)
  for (const host of bad) {
    assert.throws(
      () => reg.add(route(host, { dir: '/data/x', socket: '' })),
      (err) => code(err) === 'invalid_host',
      host,
    )
  }
  assert.deepEqual(reg.list(), [])
})

void test('a duplicate host is refused and the first row stands', async (t) => {
  const reg = openIn(t, await tmpDir(t))
  const first = route('a.example.com')
  reg.add(first)
  assert.throws(
    () => reg.add(route('a.example.com', { dir: '/elsewhere' })),
    (err) => code(err) === 'host_exists',
  )
  assert.deepEqual(reg.list(), [first])
})

void test('paths must be absolute and db must lie inside dir', async (t) => {
  const reg = openIn(t, await tmpDir(t))
  const cases: Array<[Partial<Route>, RegExp]> = [
    [{ dir: 'apps/a' }, /dir "apps\/a" is not an absolute path/],
    [{ socket: 'run/a.sock' }, /socket "run\/a.sock" is not an absolute path/],
    [{ db: 'app.db' }, /db "app.db" is not an absolute path/],
    [{ db: '/data/other/app.db' }, /db "\/data\/other\/app.db" is not inside dir/],
    [{ db: '/data/apps/a.example.com/../b/app.db' }, /is not inside dir/],
    [{ db: '/data/apps/a.example.com' }, /is not inside dir/],
    [{ dir: '', db: '/data/apps/a.example.com/app.db' }, /is not inside dir ""/],
    [{ db: '/data/apps/a.example.com.evil/app.db' }, /is not inside dir/],
    [{ db: '/data/apps/a.example.com/x/..' }, /is not inside dir/],
    [{ db: '/data/apps/a.example.com/.' }, /is not inside dir/],
    [{ dir: '/data/apps/a.example.com/', db: '/data/apps/a.example.com' }, /is not inside dir/],
    [{ dir: '/', db: '/' }, /is not inside dir/],
  ]
  for (const [over, msg] of cases) {
    assert.throws(
      () => reg.add(route('a.example.com', over)),
      (err) => code(err) === 'bad_request' && msg.test((err as Error).message),
    )
  }
  assert.deepEqual(reg.list(), [])
})

void test('a db inside its dir is stored however its path is written', async (t) => {
  const reg = openIn(t, await tmpDir(t))
  // [dir, db] of each row: normal paths, and paths path.normalize would change.
  const inside: Array<[string, string]> = [
    ['/data/apps/h0', '/data/apps/h0/app.db'],
    ['/data/apps/h1', '/data/apps/h1//app.db'],
    ['/data/apps/h2', '/data/apps/h2/./app.db'],
    ['/data/apps/h3', '/data/apps/h3/x/../app.db'],
    ['/data/apps/h4/', '/data/apps/h4/app.db'],
    ['/data//apps/h5', '/data/apps/h5/db/app.db'],
    ['/', '/app.db'],
  ]
  for (const [i, [dir, db]] of inside.entries())
    reg.add(route(`h${i}.example.com`, { dir, db, socket: `/run/h${i}.sock` }))
  assert.deepEqual(
    reg.list().map((r) => [r.dir, r.db]),
    inside,
  )
})

void test('setPaths rewrites many rows in one transaction and bumps updated_at', async (t) => {
  const dataDir = await tmpDir(t)
  let now = new Date('2026-01-01T00:00:00.000Z')
  const reg = openIn(t, dataDir, () => now)
  reg.add(route('a.example.com', { db: '/data/apps/a.example.com/app.db' }))
  reg.add(route('b.example.com'))
  now = new Date('2026-01-02T00:00:00.000Z')
  reg.setPaths([
    {
      host: 'a.example.com',
      dir: '/data/nested/a.example.com/data',
      socket: '/data/nested/a.example.com/run/app.sock',
      db: '/data/nested/a.example.com/data/app.db',
    },
    {
      host: 'b.example.com',
      dir: '/data/nested/b.example.com/data',
      socket: '/data/nested/b.example.com/run/app.sock',
      db: '',
    },
  ])
  assert.equal(reg.get('a.example.com')?.db, '/data/nested/a.example.com/data/app.db')
  assert.equal(reg.get('b.example.com')?.socket, '/data/nested/b.example.com/run/app.sock')
  const stamps = raw(t, dataDir)
    .prepare('SELECT created_at, updated_at FROM routes WHERE host = ?')
    .get('a.example.com')
  assert.deepEqual(stamps, { created_at: '2026-01-01T00:00:00.000Z', updated_at: '2026-01-02T00:00:00.000Z' })
})

void test('setPaths with one unknown host changes nothing', async (t) => {
  const reg = openIn(t, await tmpDir(t))
  reg.add(route('a.example.com'))
  const before = reg.list()
  assert.throws(
    () =>
      reg.setPaths([
        {
          host: 'a.example.com',
          dir: '/data/nested/a.example.com/data',
          socket: '/data/nested/a.example.com/run/app.sock',
          db: '',
        },
        { host: 'gone.example.com', dir: '/data/nested/gone.example.com/data', socket: '', db: '' },
      ]),
    (err) => code(err) === 'not_found' && /gone\.example\.com/.test((err as Error).message),
  )
  assert.deepEqual(reg.list(), before)
  assert.throws(
    () => reg.setPaths([{ host: 'a.example.com', dir: 'relative', socket: '', db: '' }]),
    (err) => code(err) === 'bad_request',
  )
  assert.deepEqual(reg.list(), before)
})

void test('the generation is strictly increasing across close and reopen', async (t) => {
  const dataDir = await tmpDir(t)
  const reg = Registry.open(dataDir)
  const first = [reg.nextGeneration(), reg.nextGeneration(), reg.nextGeneration()]
  reg.close()
  assert.deepEqual(first, [1, 2, 3])
  const again = openIn(t, dataDir)
  assert.equal(again.nextGeneration(), 4)
})

void test('snapshot lists the rows once, and again only after a commit: its own row rewrite, or another connection’s', async (t) => {
  const dataDir = await tmpDir(t)
  const reg = openIn(t, dataDir)
  reg.add(route('a.example.com'))
  const first = reg.snapshot()
  assert.deepEqual(
    first.routes.map((r) => r.host),
    ['a.example.com'],
  )
  assert.equal(first.byHost.get('a.example.com')?.dir, '/data/apps/a.example.com')
  assert.equal(reg.snapshot(), first, 'nothing committed: the same snapshot, not a new list')

  // A move's row rewrite on the registry's own connection is seen.
  reg.setPaths([
    {
      host: 'a.example.com',
      dir: '/data/nested/a.example.com/app',
      socket: '/data/nested/a.example.com/run/s.sock',
      db: '',
    },
  ])
  const moved = reg.snapshot()
  assert.notEqual(moved, first)
  assert.equal(moved.byHost.get('a.example.com')?.dir, '/data/nested/a.example.com/app')

  // So is a row the CLI adds through a connection of its own.
  const cli = Registry.open(dataDir)
  cli.add(route('b.example.com'))
  cli.close()
  assert.deepEqual(
    reg.snapshot().routes.map((r) => r.host),
    ['a.example.com', 'b.example.com'],
  )
})

void test('a row rewrite and a new generation carry the snapshot over, unless someone else committed first', async (t) => {
  const dataDir = await tmpDir(t)
  const reg = openIn(t, dataDir)
  for (const h of ['a.example.com', 'b.example.com', 'c.example.com']) reg.add(route(h))
  const first = reg.snapshot()
  reg.nextGeneration()
  const afterGeneration = reg.snapshot()
  assert.deepEqual(afterGeneration.routes, reg.list())
  assert.equal(afterGeneration, first, 'a new generation changes no row: the same snapshot')

  reg.setPaths([
    {
      host: 'b.example.com',
      dir: '/data/nested/b.example.com/data',
      socket: '/data/nested/b.example.com/run/app.sock',
      db: '',
    },
  ])
  const carried = reg.snapshot()
  assert.deepEqual(carried.routes, reg.list(), 'the carried rows are the rows')
  assert.equal(carried.byHost.get('b.example.com')?.dir, '/data/nested/b.example.com/data')
  assert.equal(
    carried.byHost.get('c.example.com'),
    first.byHost.get('c.example.com'),
    'an unchanged row is the same object',
  )
  assert.equal(reg.snapshot(), carried, 'nothing committed since: the same snapshot')

  // The CLI adds a row before the next rewrite: the snapshot is behind, so
  // nothing is carried and the next look lists the rows, the new one too.
  const cli = Registry.open(dataDir)
  cli.add(route('d.example.com'))
  cli.close()
  reg.setPaths([
    {
      host: 'c.example.com',
      dir: '/data/nested/c.example.com/data',
      socket: '/data/nested/c.example.com/run/app.sock',
      db: '',
    },
  ])
  const listed = reg.snapshot()
  assert.deepEqual(listed.routes, reg.list())
  assert.deepEqual(
    listed.routes.map((r) => r.host),
    ['a.example.com', 'b.example.com', 'c.example.com', 'd.example.com'],
  )
  assert.notEqual(listed.byHost.get('a.example.com'), first.byHost.get('a.example.com'), 'listed again, not carried')
})

void test('a claim committed through the registry’s claim store does not make the next snapshot list the rows again', async (t) => {
  const reg = openIn(t, await tmpDir(t))
  reg.add(route('a.example.com'))
  const before = reg.snapshot()
  reg.claimStore().claimWake('a.example.com', new Date())
  assert.equal(reg.snapshot(), before)
  assert.deepEqual(reg.claimStore().wakes(), ['a.example.com'])
})

/** The POSIX locks this process holds on file, as the kernel lists them (/proc/locks). */
async function locksHeldOn(file: string): Promise<string[]> {
  const { ino } = await fs.stat(file)
  const lines = (await fs.readFile('/proc/locks', 'utf8')).split('\n')
  return lines.filter((l) => l.split(/\s+/).includes(String(process.pid)) && l.includes(`:${ino} `))
}

/** This process's descriptors open on file. */
async function descriptorsOn(file: string): Promise<number> {
  const fds = await fs.readdir('/proc/self/fd')
  const targets = await Promise.all(fds.map((fd) => fs.readlink(`/proc/self/fd/${fd}`).catch(() => '')))
  return targets.filter((target) => target === file).length
}

void test('the health check keeps SQLite’s lock on the registry file, and its descriptor goes at close', async (t) => {
  const reg = openIn(t, await tmpDir(t), undefined)
  reg.add(route('a.example.com'))
  assert.equal(reg.list().length, 1)
  // SQLite holds a read lock on the database file while a WAL connection is open.
  const before = await locksHeldOn(reg.file)
  assert.ok(before.length > 0, 'an open connection holds a lock on the database file')
  // A look that opened and closed the file would drop every lock this process holds on it.
  reg.health()
  reg.health()
  assert.deepEqual(await locksHeldOn(reg.file), before)
  reg.close()
  assert.equal(await descriptorsOn(reg.file), 0, 'no descriptor of the file is left open')
})

void test('ping asks the database: it answers while open and throws once closed', async (t) => {
  const reg = openIn(t, await tmpDir(t))
  reg.ping()
  reg.close()
  assert.throws(() => reg.ping(), /not open/)
})

void test('after its caches are given back the registry reads, writes and claims as before; closed, the release is a no-op', async (t) => {
  const dataDir = await tmpDir(t)
  const reg = Registry.open(dataDir)
  reg.addMany(['a.example.com', 'b.example.com'].map((h) => route(h)))
  reg.claimStore().claimWake('a.example.com', new Date())
  const before = reg.snapshot().routes
  reg.releaseCaches()
  assert.deepEqual(reg.list(), before)
  reg.setPaths([{ host: 'b.example.com', dir: '/data/nested/b/data', socket: '/data/nested/b/run/app.sock', db: '' }])
  assert.equal(reg.get('b.example.com')?.dir, '/data/nested/b/data')
  assert.deepEqual(reg.claimStore().wakes(), ['a.example.com'])
  reg.close()
  reg.releaseCaches()
})

void test('ping fails on a registry whose file is gone, though its open connection still answers: registry_removed', async (t) => {
  const reg = openIn(t, await tmpDir(t))
  // The rows' connection keeps the unlinked file open and still answers;
  // the file at the path is what the agent must be serving from.
  await fs.unlink(reg.file)
  assert.throws(() => reg.ping(), { code: 'registry_removed', statusCode: 503 })
})

void test('an unopenable registry is refused naming its path; a command beside a running agent never creates one', async (t) => {
  const dir = await tmpDir(t)
  // A directory where the file should be: what a chmod 000 file is to a non-root user, as root too.
  await fs.mkdir(path.join(dir, 'registry.db'))
  assert.throws(
    () => Registry.open(dir),
    (err: AppError) =>
      err.code === 'registry_unopenable' && err.message.startsWith(`cannot open the registry ${dir}/registry.db: `),
  )
  const empty = await tmpDir(t)
  assert.throws(() => Registry.open(empty, { create: false }), { code: 'registry_gone' })
  await assert.rejects(fs.stat(path.join(empty, 'registry.db')), { code: 'ENOENT' }, 'nothing was created')
})

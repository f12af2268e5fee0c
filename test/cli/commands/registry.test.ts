// `layoutd registry backup|restore FILE` (design §8): a backup taken while
// the agent runs and rows are being written is one moment of the registry,
// whole and openable; restore is refused while an agent runs and for a
// file that is not a layoutd registry, changing nothing; and a restore over
// a live registry with a WAL left by a killed agent shows the restored rows
// on the next open, not the old WAL replayed onto them.
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import fs from 'node:fs'
import { createRequire } from 'node:module'
import path from 'node:path'
import { test } from 'node:test'
import Database from 'better-sqlite3'
import { flatPaths } from '../../../src/domain/paths.js'
import type { Route } from '../../../src/domain/schemas.js'
import { checkRegistry } from '../../../src/infra/registry-copy.js'
import { Registry } from '../../../src/infra/registry.js'
import { AgentProcess, makeSandbox, runCli, type Sandbox } from '../../helpers/agent-process.js'
import { ended, spawnFor } from '../../helpers/child.js'
import { tmpDir } from '../../helpers/tmp.js'

/** Rows are written in batches of this many, each one transaction: a consistent copy holds whole batches. */
const BATCH = 50

function rows(sb: Sandbox, prefix: string, from: number, n: number): Route[] {
  const dirs = { dataDir: sb.dataDir, runDir: path.join(sb.dataDir, 'run') }
  return Array.from({ length: n }, (_, i): Route => {
    const host = `${prefix}${from + i}.example.com`
    return { host, kind: 'instance', hibernate: true, ...flatPaths(dirs, host) }
  })
}

function hostsIn(file: string): string[] {
  const db = new Database(file, { readonly: true, fileMustExist: true })
  try {
    checkRegistry(db, file)
    return db.prepare<[], string>('SELECT host FROM routes ORDER BY host').pluck().all()
  } finally {
    db.close()
  }
}

/** What the data root's registry is on disk: each of its files' bytes, hashed. */
function registryOnDisk(sb: Sandbox): Record<string, string> {
  const out: Record<string, string> = {}
  for (const name of fs.readdirSync(sb.dataDir).sort()) {
    if (!name.startsWith('registry.db')) continue
    out[name] = createHash('sha256')
      .update(fs.readFileSync(path.join(sb.dataDir, name)))
      .digest('hex')
  }
  return out
}

void test(
  'backup while the agent runs and rows are written: a whole, consistent, openable copy',
  { timeout: 120_000 },
  async (t) => {
    const sb = await makeSandbox(await tmpDir(t, 'layoutd-backup-'), 'kass-1')
    const agent = await AgentProcess.start(sb, { listenTimeoutMs: 60_000 })
    t.after(() => agent.kill())
    const registry = Registry.open(sb.dataDir, { create: false })
    t.after(() => registry.close())
    let written = 0
    registry.addMany(rows(sb, 'w', written, BATCH))
    written += BATCH
    let writing = true
    const writer = (async () => {
      while (writing) {
        registry.addMany(rows(sb, 'w', written, BATCH))
        written += BATCH
        await new Promise((resolve) => setImmediate(resolve))
      }
    })()
    const file = path.join(sb.root, 'registry.backup')
    const r = await runCli(sb, ['registry', 'backup', file])
    writing = false
    await writer
    assert.equal(r.exit.code, 0, r.stderr)
    const hosts = hostsIn(file)
    assert.ok(hosts.length >= BATCH, `the rows written before the backup began are in it (${hosts.length})`)
    assert.equal(hosts.length % BATCH, 0, `whole transactions only: ${hosts.length} rows`)
    const all = new Set(rows(sb, 'w', 0, written).map((row) => row.host))
    assert.deepEqual(
      hosts.filter((h) => !all.has(h)),
      [],
    )
    assert.match(r.stdout, new RegExp(`backed up .* to ${file}: ${hosts.length} rows`))
    assert.deepEqual(
      fs.readdirSync(sb.root).filter((n) => n.includes('registry.backup')),
      ['registry.backup'],
      'a single file, no -wal beside it, no temporary file left',
    )
    const again = await runCli(sb, ['registry', 'backup', file])
    assert.equal(again.exit.code, 1)
    assert.match(again.stderr, /exists; name a new file/)
  },
)

void test(
  'restore while an agent runs on the data root is refused, naming why, and changes nothing',
  { timeout: 120_000 },
  async (t) => {
    const sb = await makeSandbox(await tmpDir(t, 'layoutd-restore-agent-'), 'kass-1')
    const registry = Registry.open(sb.dataDir)
    registry.addMany(rows(sb, 'live', 0, 3))
    registry.close()
    const file = path.join(sb.root, 'other.backup')
    const other = await makeSandbox(path.join(sb.root, 'other'))
    const theirs = Registry.open(other.dataDir)
    theirs.addMany(rows(other, 'old', 0, 2))
    theirs.close()
    assert.equal((await runCli(other, ['registry', 'backup', file])).exit.code, 0)

    const agent = await AgentProcess.start(sb, { listenTimeoutMs: 60_000 })
    t.after(() => agent.kill())
    // The agent writes its own WAL meanwhile: the file it has open is what must stay.
    const live = path.join(sb.dataDir, 'registry.db')
    const inode = fs.statSync(live).ino
    const r = await runCli(sb, ['registry', 'restore', file])
    assert.equal(r.exit.code, 1)
    assert.match(r.stderr, /refused: an agent serves .* \(pid \d+, listening on 127\.0\.0\.1:\d+\).*stop it first/)
    assert.match(r.stderr, /nothing was changed/)
    assert.equal(fs.statSync(live).ino, inode, 'the registry is the file the agent opened')
    assert.equal(fs.existsSync(`${live}.restoring`), false, 'no copy was begun')
    await agent.stop()
    assert.deepEqual(
      hostsIn(live),
      [0, 1, 2].map((i) => `live${i}.example.com`),
    )
  },
)

void test('restore of a file that is not a layoutd registry is refused, naming why, and changes nothing', async (t) => {
  const sb = await makeSandbox(await tmpDir(t, 'layoutd-restore-bad-'), 'kass-1')
  const registry = Registry.open(sb.dataDir)
  registry.addMany(rows(sb, 'live', 0, 3))
  registry.close()
  const text = path.join(sb.root, 'notes.txt')
  fs.writeFileSync(text, 'not a database\n'.repeat(100))
  const foreign = path.join(sb.root, 'foreign.db')
  const db = new Database(foreign)
  db.exec('CREATE TABLE routes (host TEXT PRIMARY KEY); PRAGMA user_version = 1')
  db.close()
  const before = registryOnDisk(sb)
  for (const [file, why] of [
    [text, /is not a layoutd registry: SQLite cannot read it/],
    [foreign, /is not a layoutd registry: its tables are not a layoutd registry's at version 1/],
    [sb.root, /is not a layoutd registry: it is not a regular file/],
  ] as const) {
    const r = await runCli(sb, ['registry', 'restore', file])
    assert.equal(r.exit.code, 1, file)
    assert.match(r.stderr, why)
    assert.match(r.stderr, /nothing was changed/)
    assert.deepEqual(registryOnDisk(sb), before, `${file}: the registry's files are as they were`)
  }
})

void test('restore over a registry whose killed agent left a WAL: the next open shows the restored rows', async (t) => {
  const sb = await makeSandbox(await tmpDir(t, 'layoutd-restore-wal-'), 'kass-1')
  const live = path.join(sb.dataDir, 'registry.db')
  const registry = Registry.open(sb.dataDir)
  registry.addMany(rows(sb, 'kept', 0, 3))
  registry.close()
  const file = path.join(sb.root, 'registry.backup')
  assert.equal((await runCli(sb, ['registry', 'backup', file])).exit.code, 0)

  // Later writes, still in the WAL when their writer is killed (as an agent killed -9 leaves them).
  const sqlite = createRequire(import.meta.url).resolve('better-sqlite3')
  const later = rows(sb, 'later', 0, 5)
  const script = `
    const Database = (await import(${JSON.stringify(sqlite)})).default
    const db = new Database(${JSON.stringify(live)})
    db.pragma('journal_mode = WAL')
    db.pragma('wal_autocheckpoint = 0')
    db.transaction(() => {
      db.prepare('DELETE FROM routes').run()
      const add = db.prepare("INSERT INTO routes (host, kind, socket, dir, db, hibernate, created_at, updated_at) VALUES (?, 'instance', ?, ?, '', 1, 'x', 'x')")
      for (const r of ${JSON.stringify(later)}) add.run(r.host, r.socket, r.dir)
    })()
    process.kill(process.pid, 'SIGKILL')
  `
  const child = spawnFor(t, process.execPath, ['--input-type=module', '-e', script], { stdio: 'inherit' })
  await ended(child, 'the writer that kills itself')
  assert.ok(fs.statSync(`${live}-wal`).size > 0, 'the killed writer left its WAL')
  assert.deepEqual(
    hostsIn(live).slice(0, 1),
    ['later0.example.com'],
    'opened as it is, the live registry is the WAL’s rows',
  )
  // Once more, so the WAL is one no reader has looked at since.
  const again = spawnFor(t, process.execPath, ['--input-type=module', '-e', script], { stdio: 'inherit' })
  await ended(again, 'the writer that kills itself')
  assert.ok(fs.statSync(`${live}-wal`).size > 0, 'a WAL is beside the live registry')

  const r = await runCli(sb, ['registry', 'restore', file])
  assert.equal(r.exit.code, 0, r.stderr)
  assert.match(r.stdout, /restored .* 3 rows/)
  const reopened = Registry.open(sb.dataDir, { create: false })
  t.after(() => reopened.close())
  assert.deepEqual(
    reopened.list().map((row) => row.host),
    [0, 1, 2].map((i) => `kept${i}.example.com`),
  )
  reopened.verify()
  assert.equal(fs.existsSync(`${live}.restoring`), false, 'no temporary file left')
})

// The registry underneath a running agent (design §2.2): removed, replaced
// by another file, overwritten with garbage, write-locked by another
// process, on a full disk. Each turns /ready 503 with its code (but a lock,
// which only the claim meets) and refuses claims with a coded 503 counted
// as an error, says so on the log once, and never grants from rows it can
// no longer trust. Real files, a real second connection, a real tmpfs.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { once } from 'node:events'
import fs from 'node:fs/promises'
import { createRequire } from 'node:module'
import os from 'node:os'
import path from 'node:path'
import { test, type TestContext } from 'node:test'
import { flatPaths, nestedPaths } from '../../src/domain/paths.js'
import { addFlat, agentBox, recordIntent, type AgentBox } from '../helpers/agent.js'
import { FakeLogger } from '../domain/fakes.js'
import { ended, spawnFor } from '../helpers/child.js'

interface Answer {
  status: number
  code: string
  headers: Record<string, unknown>
}

async function claim(b: AgentBox, host: string): Promise<Answer> {
  const res = await b.app.inject({ method: 'POST', url: `/wakes/${host}`, remoteAddress: '127.0.0.1' })
  const body = res.json<{ error?: { code: string } }>()
  return { status: res.statusCode, code: body.error?.code ?? '', headers: res.headers }
}

async function ready(b: AgentBox): Promise<{ status: number; code: string | undefined; detail: string }> {
  const res = await b.app.inject({ method: 'GET', url: '/ready' })
  const check = res.json<{ checks: Array<{ name: string; code?: string; detail: string }> }>().checks[0]
  return { status: res.statusCode, code: check?.code, detail: check?.detail ?? '' }
}

async function claimErrors(b: AgentBox): Promise<number> {
  const m = /^carlos_layout_wake_claims_total\{result="error"\} (\d+)$/m.exec(await b.metrics.text())
  return Number(m?.[1] ?? 0)
}

/** A started agent with two flat hosts, a claim for the first granted. */
async function servingBox(t: TestContext, dir?: string): Promise<{ b: AgentBox; log: FakeLogger }> {
  const log = new FakeLogger()
  const b = await agentBox(t, { logger: log, env: { CARLOS_LAYOUT_DEFAULT: 'flat' }, ...(dir ? { dir } : {}) })
  await addFlat(b, 'a.example.com')
  await addFlat(b, 'b.example.com')
  await b.agent.start()
  assert.equal((await claim(b, 'a.example.com')).status, 200)
  assert.equal((await ready(b)).status, 200)
  return { b, log }
}

/** Claims and readiness refuse with code, one error line names the file, and nothing is granted. */
async function assertRefused(b: AgentBox, log: FakeLogger, code: string): Promise<void> {
  const before = await claimErrors(b)
  for (const host of ['b.example.com', 'a.example.com', 'b.example.com']) {
    const answer = await claim(b, host)
    assert.deepEqual([answer.status, answer.code], [503, code], `POST /wakes/${host}`)
  }
  assert.equal(await claimErrors(b), before + 3, 'each refused claim counts as an error')
  const r = await ready(b)
  assert.deepEqual([r.status, r.code], [503, code])
  assert.ok(r.detail.includes(b.registry.file), r.detail)
  const peek = await b.app.inject({ method: 'GET', url: '/ready/b.example.com' })
  assert.equal(peek.statusCode, 503, 'GET /ready/:host grants nothing either')
  const said = log.lines.filter((l) => l.level === 'error' && l.fields.code === code)
  assert.equal(said.length, 1, 'said once, not per request')
  assert.ok(said[0]?.msg.includes(b.registry.file), said[0]?.msg)
}

void test('a registry removed under the agent: /ready 503 registry_removed, claims refused and counted', async (t) => {
  const { b, log } = await servingBox(t)
  await fs.rm(b.registry.file)
  await assertRefused(b, log, 'registry_removed')
  assert.match(log.lines.find((l) => l.fields.code === 'registry_removed')?.msg ?? '', /put the file back/)
})

void test('a registry replaced by another file at its path: registry_replaced, the old rows never granted from', async (t) => {
  const { b, log } = await servingBox(t)
  const other = `${b.registry.file}.new`
  await fs.copyFile(b.registry.file, other)
  await fs.rename(other, b.registry.file)
  await assertRefused(b, log, 'registry_replaced')
  assert.match(log.lines.find((l) => l.fields.code === 'registry_replaced')?.msg ?? '', /restart layoutd/)
})

void test('a registry overwritten with garbage in place (same inode): registry_corrupt', async (t) => {
  const { b, log } = await servingBox(t)
  const ino = (await fs.stat(b.registry.file)).ino
  await fs.writeFile(b.registry.file, Buffer.alloc(8192, 0x5a))
  assert.equal((await fs.stat(b.registry.file)).ino, ino)
  await assertRefused(b, log, 'registry_corrupt')
})

void test('a corrupt registry stops the start, naming the file', async (t) => {
  const b = await agentBox(t, { start: false })
  const file = b.registry.file
  await b.close()
  await fs.writeFile(file, Buffer.alloc(8192, 0x5a))
  await fs.rm(`${file}-wal`, { force: true })
  await fs.rm(`${file}-shm`, { force: true })
  await assert.rejects(agentBox(t, { dir: b.dir }), (err: Error) => {
    assert.ok(err.message.includes(file), err.message)
    return true
  })
})

/** A second process holding the registry's write lock (`BEGIN EXCLUSIVE`) until release() is called. */
async function foreignLock(t: TestContext, file: string): Promise<{ release: () => Promise<void> }> {
  const sqlite = createRequire(import.meta.url).resolve('better-sqlite3')
  const script =
    `const db = new (require(${JSON.stringify(sqlite)}))(${JSON.stringify(file)});` +
    `db.exec('BEGIN EXCLUSIVE'); process.stdout.write('locked\\n');` +
    `process.stdin.resume(); process.stdin.on('end', () => { db.exec('ROLLBACK'); db.close() })`
  const child = spawnFor(t, process.execPath, ['-e', script], { stdio: ['pipe', 'pipe', 'inherit'] })
  const { stdin, stdout } = child
  assert.ok(stdin !== null && stdout !== null)
  const [chunk] = (await once(stdout, 'data', { signal: AbortSignal.timeout(30_000) })) as [Buffer]
  assert.equal(chunk.toString().trim(), 'locked')
  return {
    release: async () => {
      stdin.end()
      await ended(child, 'the lock holder')
    },
  }
}

void test('another process holding BEGIN EXCLUSIVE: a claim is 503 registry_busy with Retry-After at once, /ready and /livez do not wait', async (t) => {
  const { b } = await servingBox(t)
  const lock = await foreignLock(t, b.registry.file)
  t.after(() => lock.release())
  const before = await claimErrors(b)
  // The lock is held for as long as the test says: a claim that waited on it would wait it out.
  const busy = await claim(b, 'b.example.com')
  assert.deepEqual([busy.status, busy.code, busy.headers['retry-after']], [503, 'registry_busy', '1'])
  assert.equal(await claimErrors(b), before + 1)
  assert.equal((await ready(b)).status, 200, 'the rows still read: /ready answers, and says ready')
  assert.equal((await b.app.inject({ method: 'GET', url: '/livez' })).statusCode, 200)
  const release = await b.app.inject({ method: 'DELETE', url: '/wakes/a.example.com', remoteAddress: '127.0.0.1' })
  assert.deepEqual([release.statusCode, release.headers['retry-after']], [503, '1'])
  assert.deepEqual(b.agent.wakes().awake, ['a.example.com'], 'nothing recorded while locked')
  await lock.release()
  assert.equal((await claim(b, 'b.example.com')).status, 200, 'granted once the lock is gone')
})

void test('a registry on a full disk: claims 503 registry_full (no stack, said once), /ready says so, and both clear once there is room', async (t) => {
  const root = await fs.mkdtemp(path.join(os.tmpdir(), 'layoutd-full-'))
  const held: { box?: AgentBox } = {}
  // One hook, in order: the agent stops, the tmpfs goes, then its mount point.
  t.after(async () => {
    await held.box?.close()
    spawnSync('umount', [root])
    await fs.rm(root, { recursive: true, force: true })
  })
  const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=8m', 'tmpfs', root])
  assert.equal(mounted.status, 0, `mount a tmpfs (the suite runs as root): ${String(mounted.stderr)}`)
  const { b, log } = await servingBox(t, root)
  held.box = b
  const hosts = Array.from({ length: 100 }, (_, i) => `h${i}.example.com`)
  for (const host of hosts) await addFlat(b, host)
  // Fill the disk: chunks until ENOSPC, then single pages.
  const filler = path.join(root, 'filler')
  const fh = await fs.open(filler, 'w')
  for (const size of [1 << 20, 4096, 512]) {
    for (;;) {
      const wrote = await fh.write(Buffer.alloc(size)).then(
        () => true,
        (err: NodeJS.ErrnoException) => (err.code === 'ENOSPC' ? false : Promise.reject(err)),
      )
      if (!wrote) break
    }
  }
  await fh.close()
  // Claims of new hosts until one needs a page the disk has not got.
  let full: Answer | undefined
  for (const host of hosts) {
    const answer = await claim(b, host)
    if (answer.status !== 200) {
      full = answer
      break
    }
  }
  assert.deepEqual([full?.status, full?.code], [503, 'registry_full'])
  assert.deepEqual([(await claim(b, 'b.example.com')).status, (await ready(b)).code], [503, 'registry_full'])
  assert.equal(log.lines.filter((l) => l.fields.code === 'registry_full' && l.level === 'error').length, 1)
  await fs.rm(filler)
  assert.equal((await ready(b)).status, 200, 'room again: ready')
  assert.equal((await claim(b, 'b.example.com')).status, 200)
})

void test('a registry removed before a converge: nothing moves, the files stay where the rows say', async (t) => {
  const b = await agentBox(t)
  await addFlat(b, 'a.example.com')
  await recordIntent(b, 'flat')
  await b.agent.start()
  await b.agent.converge(10_000)
  await fs.rm(b.registry.file)
  await recordIntent(b, 'nested')
  const run = await b.agent.converge(10_000)
  assert.ok(
    !(run?.results ?? []).some((r) => r.outcome === 'moved'),
    `no move committed into a file that is gone: ${JSON.stringify(run?.results)}`,
  )
  await fs.stat(path.join(flatPaths(b.config, 'a.example.com').dir, 'host.txt'))
  await assert.rejects(fs.stat(nestedPaths(b.config, 'a.example.com').dir), { code: 'ENOENT' })
})

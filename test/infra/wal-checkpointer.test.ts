import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import { statSync } from 'node:fs'
import path from 'node:path'
import { test, type TestContext } from 'node:test'
import { pathToFileURL } from 'node:url'
import type { Route } from '../../src/domain/schemas.js'
import { Registry, REGISTRY_FILE, type RegistryOptions } from '../../src/infra/registry.js'
import { CHECKPOINT_PAGES } from '../../src/infra/wal-checkpointer.js'
import { assertEndsOnItsOwn, srcModule } from '../helpers/left-open.js'
import { tmpDir } from '../helpers/tmp.js'
import { until } from '../helpers/until.js'

const ROWS = 2000
const PAGE = 4096

function route(host: string): Route {
  return { host, kind: 'instance', socket: '', dir: `/data/apps/${host}`, db: '', hibernate: true }
}

async function opened(t: TestContext, opts: RegistryOptions = {}): Promise<{ reg: Registry; wal: string }> {
  const dataDir = await tmpDir(t)
  const reg = Registry.open(dataDir, opts)
  t.after(() => reg.close())
  reg.addMany(Array.from({ length: ROWS }, (_, i) => route(`t${i}.example.com`)))
  return { reg, wal: path.join(dataDir, `${REGISTRY_FILE}-wal`) }
}

/** Rewrites every row's paths `times` times, one transaction each (some 50 pages of WAL each); the WAL's largest size. */
function rewrite(reg: Registry, wal: string, times: number): number {
  let largest = 0
  for (let n = 0; n < times; n++) {
    const dir = (host: string): string => `/data/nested/${host}/round-${n}-${'x'.repeat(40)}`
    reg.setPaths(
      Array.from({ length: ROWS }, (_, i) => `t${i}.example.com`).map((host) => ({
        host,
        dir: dir(host),
        socket: '',
        db: '',
      })),
    )
    largest = Math.max(largest, statSync(wal).size)
  }
  return largest
}

void test("the agent's connections never checkpoint; its thread does, once the WAL passes 1,000 pages", async (t) => {
  const { reg, wal } = await opened(t, { durableAt: 'sync' })
  const largest = rewrite(reg, wal, 40)
  assert.ok(largest > 1.5 * CHECKPOINT_PAGES * PAGE, `the WAL grew to ${largest} bytes without a checkpoint`)
  assert.deepEqual(reg.checkpoints, { asked: 0, done: 0, failed: false })

  await reg.sync()
  await until('the checkpoint thread', () => (reg.checkpoints?.done ?? 0) > 0)
  assert.deepEqual(reg.checkpoints, { asked: 1, done: 1, failed: false })

  // The WAL starts again from its beginning at the next commit: it grows no
  // further, and a few pages since the checkpoint ask for none.
  const after = rewrite(reg, wal, 5)
  assert.ok(after <= largest, `${after} > ${largest}`)
  // (A checkpoint is asked before sync() answers, or not at all.)
  await reg.sync()
  assert.deepEqual(reg.checkpoints, { asked: 1, done: 1, failed: false })
  assert.equal(reg.list().length, ROWS)
})

void test("the agent's registry, left open, keeps no process alive (its checkpoint thread is unref'd)", async (t) => {
  const dataDir = await tmpDir(t)
  await assertEndsOnItsOwn(
    t,
    `const { Registry } = await import(${JSON.stringify(srcModule('infra/registry.js'))})\n` +
      `const reg = Registry.open(${JSON.stringify(dataDir)}, { durableAt: 'sync' })\n` +
      'reg.claimStore()\nawait reg.sync()',
  )
})

void test("a command's connection checkpoints as SQLite does: its WAL stays near 1,000 pages", async (t) => {
  const { reg, wal } = await opened(t)
  const largest = rewrite(reg, wal, 40)
  assert.ok(largest < 1.5 * CHECKPOINT_PAGES * PAGE, `the WAL grew to ${largest} bytes`)
  assert.equal(reg.checkpoints, undefined)
})

void test('should the checkpoint thread fail, the connections checkpoint themselves again, and the agent says so', async (t) => {
  const dir = await tmpDir(t)
  const script = path.join(dir, 'failing-checkpoint-worker.mjs')
  await fs.writeFile(script, "throw new Error('no database here')\n")
  const { reg, wal } = await opened(t, { durableAt: 'sync', checkpointThread: pathToFileURL(script) })
  const said: Array<{ fields: unknown; line: string }> = []
  const log = (fields: unknown, line: string): void => void said.push({ fields, line })
  reg.logFaultsTo({ error: log, warn: log, info: log })
  reg.claimStore()

  // The thread starts with the first checkpoint asked, and fails there.
  const before = rewrite(reg, wal, 40)
  await reg.sync()
  await until('the thread to fail', () => reg.checkpoints?.failed === true)
  assert.equal(said.length, 1)
  assert.match(said[0]?.line ?? '', /the checkpoint thread failed: no database here/)
  assert.match(said[0]?.line ?? '', /checkpoints are made on the loop's thread again/)

  // The connections checkpoint again: the WAL starts over from its
  // beginning, and twice the writes that grew it to `before` (some 4,000
  // pages) grow it by less than one threshold's worth more.
  const after = rewrite(reg, wal, 80)
  assert.ok(after < before + CHECKPOINT_PAGES * PAGE, `the WAL grew from ${before} to ${after} bytes`)
})

void test('the checkpoint thread lives only from a checkpoint asked until it has been idle a while', async (t) => {
  const { reg, wal } = await opened(t, { durableAt: 'sync', checkpointThreadIdleMs: 200 })
  reg.claimStore()
  await reg.sync()
  assert.deepEqual(reg.checkpointThread, { started: 0, running: false }, 'no checkpoint asked, no thread')

  rewrite(reg, wal, 40)
  await reg.sync()
  await until('the first checkpoint', () => (reg.checkpoints?.done ?? 0) === 1)
  assert.equal(reg.checkpointThread?.started, 1)
  await until('the idle thread to end', () => reg.checkpointThread?.running === false)
  assert.equal(reg.checkpoints?.failed, false, 'an idle end is no failure: the connections still never checkpoint')

  // The next checkpoint starts a thread again, and the WAL stays bounded.
  const largest = rewrite(reg, wal, 40)
  assert.ok(
    largest > 1.5 * CHECKPOINT_PAGES * PAGE,
    `the connections checkpointed: the WAL grew only to ${largest} bytes`,
  )
  await reg.sync()
  await until('the second checkpoint', () => (reg.checkpoints?.done ?? 0) === 2)
  assert.equal(reg.checkpointThread?.started, 2)
  assert.equal(reg.list().length, ROWS)
})

void test('after a large run the checkpoint thread ends at once, not after its idle wait', async (t) => {
  const { reg, wal } = await opened(t, { durableAt: 'sync', checkpointThreadIdleMs: 600_000 })
  rewrite(reg, wal, 40)
  await reg.sync()
  await until('the first checkpoint', () => (reg.checkpoints?.done ?? 0) === 1)
  assert.equal(reg.checkpointThread?.running, true, 'kept for the next checkpoint')

  reg.releaseCheckpointThread()
  await until('the released thread to end', () => reg.checkpointThread?.running === false)
  assert.equal(reg.checkpoints?.failed, false, 'a release is no failure')

  // Released while a checkpoint is under way (asked by the sync, its answer a message not yet delivered):
  // the thread ends once it is answered.
  rewrite(reg, wal, 40)
  await reg.sync()
  reg.releaseCheckpointThread()
  await until('the second checkpoint', () => (reg.checkpoints?.done ?? 0) === 2)
  await until('the thread to end after it', () => reg.checkpointThread?.running === false)
  assert.equal(reg.checkpointThread?.started, 2)
  assert.equal(reg.checkpoints?.failed, false)
})

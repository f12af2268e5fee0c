import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { test } from 'node:test'
import { execFileSync } from 'node:child_process'
import {
  atomicWrite,
  atomicWriteMany,
  ensureDir,
  fsyncDir,
  mapLimit,
  readNoFollow,
  setDirMode,
  threadPoolSize,
  unlinkMany,
  writeDurable,
} from '../../src/infra/fsutil.js'
import { tmpDir } from '../helpers/tmp.js'

void test('atomicWriteMany writes whole files under their names and leaves no temporary', async (t) => {
  const dir = await tmpDir(t)
  await atomicWriteMany(dir, [
    { name: 'a.journal', data: 'A' },
    { name: 'b.journal', data: 'B' },
  ])
  assert.deepEqual(fs.readdirSync(dir).sort(), ['a.journal', 'b.journal'])
  assert.equal(fs.readFileSync(path.join(dir, 'b.journal'), 'utf8'), 'B')
  assert.equal(fs.statSync(path.join(dir, 'a.journal')).mode & 0o777, 0o600)
  await atomicWrite(path.join(dir, 'a.journal'), 'A2')
  assert.equal(fs.readFileSync(path.join(dir, 'a.journal'), 'utf8'), 'A2')
})

void test('nothing follows a symlink', async (t) => {
  const dir = await tmpDir(t)
  const target = path.join(dir, 'target')
  fs.writeFileSync(target, 'precious')
  fs.mkdirSync(path.join(dir, 'realdir'))
  fs.chmodSync(path.join(dir, 'realdir'), 0o755)
  fs.symlinkSync(target, path.join(dir, 'link'))
  fs.symlinkSync(path.join(dir, 'realdir'), path.join(dir, 'dirlink'))
  // A planted symlink at a file's temporary name or real name is never written through.
  await assert.rejects(writeDurable(path.join(dir, 'link'), 'overwritten'), { code: 'ELOOP' })
  await assert.rejects(readNoFollow(path.join(dir, 'link')), { code: 'ELOOP' })
  fs.symlinkSync(target, path.join(dir, 'x.tmp'))
  await assert.rejects(atomicWrite(path.join(dir, 'x'), 'overwritten'), { code: 'ELOOP' })
  assert.equal(fs.readFileSync(target, 'utf8'), 'precious')
  // O_NOFOLLOW|O_DIRECTORY on a symlink: Linux answers ENOTDIR (or ELOOP).
  const refused = (err: NodeJS.ErrnoException) => err.code === 'ENOTDIR' || err.code === 'ELOOP'
  await assert.rejects(setDirMode(path.join(dir, 'dirlink'), 0o700), refused)
  assert.equal(fs.statSync(path.join(dir, 'realdir')).mode & 0o777, 0o755)
  await assert.rejects(fsyncDir(path.join(dir, 'dirlink')), refused)
  await assert.rejects(ensureDir(path.join(dir, 'dirlink'), 0o700), /is a symlink; refusing to use it/)
})

void test('ensureDir answers whether it made the directory', async (t) => {
  const dir = await tmpDir(t)
  assert.equal(await ensureDir(path.join(dir, 'd'), 0o750), true)
  assert.equal(await ensureDir(path.join(dir, 'd'), 0o750), false)
  fs.writeFileSync(path.join(dir, 'f'), '')
  await assert.rejects(ensureDir(path.join(dir, 'f'), 0o750), /is not a directory/)
})

void test('unlinkMany tolerates what is already gone', async (t) => {
  const dir = await tmpDir(t)
  fs.writeFileSync(path.join(dir, 'a'), '')
  await unlinkMany(dir, ['a', 'b'])
  assert.deepEqual(fs.readdirSync(dir), [])
})

void test('mapLimit keeps order and the limit', async () => {
  let running = 0
  let peak = 0
  const out = await mapLimit([5, 1, 4, 2, 3], 2, async (n) => {
    running++
    peak = Math.max(peak, running)
    await new Promise((r) => setImmediate(r))
    running--
    return n * 10
  })
  assert.deepEqual(out, [50, 10, 40, 20, 30])
  assert.equal(peak, 2)
})

void test('mapLimit throws the first error only after every call in flight has ended, and starts no new one', async () => {
  const ended: number[] = []
  const started: number[] = []
  await assert.rejects(
    mapLimit([0, 1, 2, 3, 4, 5, 6, 7], 3, async (n) => {
      started.push(n)
      if (n === 0) throw new Error('boom')
      await new Promise((r) => setTimeout(r, 30))
      ended.push(n)
    }),
    /boom/,
  )
  assert.deepEqual(ended.sort(), [1, 2], 'the two calls in flight finished before the rejection')
  assert.deepEqual(started.sort(), [0, 1, 2], 'nothing started after the failure')
})

void test('threadPoolSize reads UV_THREADPOOL_SIZE as libuv itself does', () => {
  // The threads of a node whose pool has started, less those of one whose
  // pool is a single thread: the pool libuv made, for each value.
  const threads = (value: string | undefined): number => {
    const env = { ...process.env }
    delete env.UV_THREADPOOL_SIZE
    if (value !== undefined) env.UV_THREADPOOL_SIZE = value
    const script =
      "require('node:fs').stat('.', () => console.log(require('node:fs').readdirSync('/proc/self/task').length))"
    return Number(
      execFileSync(process.execPath, ['-e', script], {
        env,
        encoding: 'utf8',
        timeout: 60_000,
        killSignal: 'SIGKILL',
      }).trim(),
    )
  }
  const one = threads('1')
  for (const value of [undefined, '8', ' 8', '12x', '0', '', 'many', '1', '2000', '-3']) {
    assert.equal(
      threadPoolSize(value === undefined ? {} : { UV_THREADPOOL_SIZE: value }),
      threads(value) - one + 1,
      `UV_THREADPOOL_SIZE=${String(value)}`,
    )
  }
})

import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { test } from 'node:test'
import {
  ensureDirOffLoop,
  ensureDirSync,
  renameDirSync,
  setDirModeSync,
  unlinkSyncIfPresent,
} from '../../../src/infra/pass/sliced-fs.js'
import { Slicer } from '../../../src/domain/loop-turns.js'
import { rmdirIfEmpty } from '../../../src/infra/fsutil.js'
import { preflight } from '../../../src/infra/pass/preflight.js'
import { tmpDir } from '../../helpers/tmp.js'

void test('a slicer gives the event loop a turn once its budget is spent, and not before', async () => {
  const ticks: string[] = []
  const spent = new Slicer(0)
  setImmediate(() => ticks.push('loop'))
  await spent.pause()
  assert.deepEqual(ticks, ['loop'], 'a spent budget yields to what waits on the loop')
  const fresh = new Slicer(60_000)
  setImmediate(() => ticks.push('again'))
  await fresh.pause()
  assert.deepEqual(ticks, ['loop'], 'an unspent budget goes straight on')
})

void test('a walk of many files in slices lets timers run between them', async (t) => {
  const dir = path.join(await tmpDir(t), 'tree')
  fs.mkdirSync(dir)
  for (let i = 0; i < 3000; i++) fs.writeFileSync(path.join(dir, `f${i}`), '')
  let turns = 0
  const timer = setInterval(() => turns++, 0)
  try {
    // The walk in JavaScript (null), with a zero budget: every entry is a slice of its own.
    assert.equal((await preflight(dir, new Slicer(0), null)).kind, 'ok')
  } finally {
    clearInterval(timer)
  }
  assert.ok(turns > 0, 'the loop ran timers while the walk went on')
})

void test('a directory made off the loop: made once among many asking at once, never through a symlink or over a file', async (t) => {
  const root = await tmpDir(t)
  const a = path.join(root, 'a')
  const made = await Promise.all(Array.from({ length: 8 }, () => ensureDirOffLoop(a, 0o700)))
  assert.deepEqual(made.filter(Boolean).length, 1, 'one of them made it; the others found it there')
  assert.ok(fs.statSync(a).isDirectory())
  assert.equal(await ensureDirOffLoop(a, 0o700), false)
  fs.symlinkSync(a, path.join(root, 'link'))
  await assert.rejects(ensureDirOffLoop(path.join(root, 'link'), 0o700), /is a symlink; refusing to use it/)
  fs.writeFileSync(path.join(root, 'file'), '')
  await assert.rejects(ensureDirOffLoop(path.join(root, 'file'), 0o700), /is not a directory; refusing to use it/)
  await assert.rejects(ensureDirOffLoop(path.join(root, 'file', 'under'), 0o700), /ENOTDIR/)
})

void test('the synchronous calls: a directory made once, a mode set, a rename never over something, unlink of what is absent, rmdir of what is absent or kept', async (t) => {
  const root = await tmpDir(t)
  const a = path.join(root, 'a')
  assert.equal(ensureDirSync(a, 0o700), true)
  assert.equal(ensureDirSync(a, 0o700), false)
  fs.symlinkSync(a, path.join(root, 'link'))
  assert.throws(() => ensureDirSync(path.join(root, 'link'), 0o700), /is a symlink; refusing to use it/)
  setDirModeSync(a, 0o2750)
  assert.equal(fs.statSync(a).mode & 0o7777, 0o2750)
  assert.throws(() => setDirModeSync(path.join(root, 'link'), 0o700), /ELOOP|ENOTDIR/, 'a symlink is never followed')
  fs.mkdirSync(path.join(root, 'b'))
  assert.throws(() => renameDirSync(a, path.join(root, 'b')), /appeared after it was cleared/)
  renameDirSync(a, path.join(root, 'c'))
  assert.equal(unlinkSyncIfPresent(path.join(root, 'nothing')), false)
  assert.equal(unlinkSyncIfPresent(path.join(root, 'link')), true)
  fs.writeFileSync(path.join(root, 'c', 'f'), '')
  assert.equal(await rmdirIfEmpty(path.join(root, 'c')), false, 'something keeps it')
  assert.equal(await rmdirIfEmpty(path.join(root, 'b')), true)
  assert.equal(await rmdirIfEmpty(path.join(root, 'b')), true, 'gone already')
})

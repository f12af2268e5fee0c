import assert from 'node:assert/strict'
import { test } from 'node:test'
import { armSkippedFsyncs, failpointFrom, fsyncSkipped, FSYNC_NAMES } from '../../src/infra/failpoint.js'

void test('a failpoint fires at its step, its host, or its nth arrival', () => {
  assert.equal(failpointFrom(''), undefined)
  const killed: string[] = []
  const fp = failpointFrom('after-rename:b.example.com, after-journal@2', (s) => killed.push(s))
  assert.ok(fp)
  for (const s of [
    'after-journal',
    'after-rename:a.example.com',
    'after-rename',
    'after-rename:b.example.com',
    'after-journal',
    'after-journal',
  ])
    fp(s)
  assert.deepEqual(killed, ['after-rename:b.example.com', 'after-journal'])
})

void test('a failpoint naming an errno throws it at its step, once, with the code; the kill form beside it still kills', () => {
  const killed: string[] = []
  const fp = failpointFrom('after-journal=ENOSPC, after-rename@2=EIO, after-row', (s) => killed.push(s))
  assert.ok(fp)
  assert.throws(
    () => fp('after-journal'),
    (err: NodeJS.ErrnoException) => err.code === 'ENOSPC' && /after-journal/.test(err.message) && err.errno === -28,
  )
  fp('after-journal')
  fp('after-rename')
  assert.throws(() => fp('after-rename'), { code: 'EIO' })
  fp('after-row')
  assert.deepEqual(killed, ['after-row'])
  assert.throws(() => failpointFrom('after-journal=ENOTANERRNO'), /ENOTANERRNO is not an errno/)
})

void test('skip-fsync takes out the named fsyncs only, refuses a name that is none of them, and is no failpoint', (t) => {
  t.after(() => armSkippedFsyncs(''))
  assert.equal(fsyncSkipped('journal-data'), false)
  armSkippedFsyncs('after-row, skip-fsync:journal-data,skip-fsync:rename-dest-parent')
  assert.deepEqual(
    FSYNC_NAMES.filter((n) => fsyncSkipped(n)),
    ['journal-data', 'rename-dest-parent'],
  )
  assert.equal(fsyncSkipped(undefined), false, 'an unnamed fsync is never skipped')
  assert.equal(failpointFrom('skip-fsync:journal-data'), undefined, 'a skip alone arms no failpoint')
  const killed: string[] = []
  failpointFrom('skip-fsync:journal-data,after-row', (s) => killed.push(s))?.('after-row')
  assert.deepEqual(killed, ['after-row'])
  assert.throws(
    () => armSkippedFsyncs('skip-fsync:journal'),
    /skip-fsync:journal.*journal is not one of the move's fsyncs \(layout-dir, journal-data/,
  )
  armSkippedFsyncs('')
  assert.equal(fsyncSkipped('journal-data'), false)
})

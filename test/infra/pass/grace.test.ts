import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { test } from 'node:test'
import { GRACE_FILE, GraceBook } from '../../../src/infra/pass/grace.js'
import { FakeClock } from '../../domain/fakes.js'
import { tmpDir } from '../../helpers/tmp.js'
import { captureLogger } from './pass-harness.js'

const HOUR = 3_600_000

void test('the grace clock starts at the first ask and survives a reload', async (t) => {
  const dataDir = await tmpDir(t)
  const dirs = { dataDir, runDir: '' }
  const logger = captureLogger()
  // A clock without a monotonic side: the wall times given are the durations.
  const clock = { now: () => 61_000 }
  const book = await GraceBook.load(dirs, logger, clock)
  assert.equal(book.left('a.example.com', 'nested', 1000, HOUR), HOUR)
  assert.equal(book.left('a.example.com', 'nested', 61_000, HOUR), HOUR - 60_000)
  await book.save()
  const again = await GraceBook.load(dirs, logger, clock)
  assert.equal(again.left('a.example.com', 'nested', 61_000, HOUR), HOUR - 60_000)
  // Toward another mode, the clock starts again.
  assert.equal(again.left('a.example.com', 'flat', 61_000, HOUR), HOUR)
  again.retain('nested', new Set(['a.example.com']))
  assert.equal(again.since('a.example.com', 'flat'), undefined)
  await again.save()
  const body = JSON.parse(fs.readFileSync(path.join(dataDir, 'layout', GRACE_FILE), 'utf8')) as unknown
  assert.deepEqual(body, { v: 1, hosts: {} })
})

void test('a book that cannot be read starts empty and says so', async (t) => {
  const dataDir = await tmpDir(t)
  fs.mkdirSync(path.join(dataDir, 'layout'))
  fs.writeFileSync(path.join(dataDir, 'layout', GRACE_FILE), '{"v":1,"hosts":{"a.example.com":{"mode":"up"}}}')
  const logger = captureLogger()
  const book = await GraceBook.load({ dataDir, runDir: '' }, logger, new FakeClock())
  assert.equal(book.since('a.example.com', 'nested'), undefined)
  assert.match(logger.lines[0]?.msg ?? '', /is not a grace book; every awake host's grace starts again/)
})

void test('the clock stepped back two hours neither stretches a grace under way nor one read back: durations are monotonic, a future stamp is clamped', async (t) => {
  const dataDir = await tmpDir(t)
  const dirs = { dataDir, runDir: '' }
  const logger = captureLogger()
  const clock = new FakeClock()
  const book = await GraceBook.load(dirs, logger, clock)
  const left = () => book.left('a.example.com', 'nested', clock.now(), HOUR)
  assert.equal(left(), HOUR)
  clock.advance(10 * 60_000)
  assert.equal(left(), 50 * 60_000)
  clock.step(-2 * HOUR)
  assert.equal(left(), 50 * 60_000, 'not 170m: the wall clock went back, the time gone did not')
  clock.advance(50 * 60_000)
  assert.equal(left(), 0)
  await book.save()

  // Read back by a process whose clock is now two hours behind the stamp: clamped to now, said once.
  const later = new FakeClock(Date.parse('2026-11-30T08:00:00Z') - 2 * HOUR)
  const again = await GraceBook.load(dirs, logger, later)
  assert.equal(again.left('a.example.com', 'nested', later.now(), HOUR), HOUR, 'at most the grace, never 180m')
  const warned = logger.lines.filter((l) => /awake grace started \d+m in the future/.test(l.msg))
  assert.equal(warned.length, 1, JSON.stringify(logger.lines))
  assert.match(warned[0]?.msg ?? '', /a\.example\.com's awake grace started 120m in the future/)
  // A stamp a little ahead (within the tolerance) is taken as it is.
  const near = new FakeClock(Date.parse('2026-11-30T08:00:00Z') - 30_000)
  await GraceBook.load(dirs, captureLogger(), near).then((b) =>
    assert.equal(b.left('a.example.com', 'nested', near.now(), HOUR), HOUR),
  )
})

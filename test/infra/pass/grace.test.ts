import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { test } from 'node:test'
import { GRACE_FILE, GraceBook } from '../../../src/infra/pass/grace.js'
import { tmpDir } from '../../helpers/tmp.js'
import { captureLogger } from './pass-harness.js'

const HOUR = 3_600_000

void test('the grace clock starts at the first ask and survives a reload', async (t) => {
  const dataDir = await tmpDir(t)
  const dirs = { dataDir, runDir: '' }
  const logger = captureLogger()
  const book = await GraceBook.load(dirs, logger)
  assert.equal(book.left('a.example.com', 'nested', 1000, HOUR), HOUR)
  assert.equal(book.left('a.example.com', 'nested', 61_000, HOUR), HOUR - 60_000)
  await book.save()
  const again = await GraceBook.load(dirs, logger)
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
  const book = await GraceBook.load({ dataDir, runDir: '' }, logger)
  assert.equal(book.since('a.example.com', 'nested'), undefined)
  assert.match(logger.lines[0]?.msg ?? '', /is not a grace book; every awake host's grace starts again/)
})

import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { test } from 'node:test'
import {
  asideNote,
  asideStamp,
  loadAsideNotes,
  readHold,
  removeHolds,
  writeHolds,
} from '../../../src/infra/pass/holds.js'
import { tmpDir } from '../../helpers/tmp.js'

void test('hold markers carry their reason across a read', async (t) => {
  const dataDir = await tmpDir(t)
  const dirs = { dataDir, runDir: '' }
  await writeHolds(dirs, [
    {
      v: 1,
      host: 'a.example.com',
      to: 'nested',
      code: 'symlink_source',
      reason: '/data/apps/a is a symlink',
      heldAt: '2026-11-30T08:00:00.000Z',
    },
  ])
  assert.deepEqual(await readHold(dirs, 'a.example.com'), {
    host: 'a.example.com',
    to: 'nested',
    code: 'symlink_source',
    reason: '/data/apps/a is a symlink',
    corrupt: false,
  })
  assert.equal(await readHold(dirs, 'b.example.com'), undefined)
  fs.writeFileSync(path.join(dataDir, 'layout', 'b.example.com.hold'), 'nonsense')
  const bad = await readHold(dirs, 'b.example.com')
  assert.equal(bad?.corrupt, true)
  assert.equal(bad?.code, 'hold_corrupt')
  assert.match(bad?.reason ?? '', /is not JSON/)
  await removeHolds(dirs, ['a.example.com', 'b.example.com'])
  assert.deepEqual(fs.readdirSync(path.join(dataDir, 'layout')), [])
})

void test('aside notes are rebuilt from aside/, newest stamp first', async (t) => {
  const dataDir = await tmpDir(t)
  const host = path.join(dataDir, 'layout', 'aside', 'a.example.com')
  const older = asideStamp(Date.UTC(2026, 0, 1))
  const newer = asideStamp(Date.UTC(2026, 10, 30, 8, 1, 2, 123))
  assert.equal(newer, '20261130T080102.123Z')
  fs.mkdirSync(path.join(host, older), { recursive: true })
  fs.mkdirSync(path.join(host, newer, 'data'), { recursive: true })
  fs.writeFileSync(path.join(host, newer, 'app.sock'), '')
  const notes = await loadAsideNotes({ dataDir, runDir: '' })
  assert.deepEqual([...notes], [['a.example.com', asideNote(path.join(host, newer), ['data', 'app.sock'], newer)]])
  assert.equal(
    notes.get('a.example.com'),
    `set aside at 2026-11-30T08:01:02.123Z: app.sock, data (in ${path.join(host, newer)})`,
  )
})

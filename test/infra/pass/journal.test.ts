import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { test } from 'node:test'
import { flatPaths, nestedPaths, type Dirs } from '../../../src/domain/paths.js'
import { listLayout, readJournal, removeJournals, writeJournals, type Journal } from '../../../src/infra/pass/journal.js'
import { tmpDir } from '../../helpers/tmp.js'

function journal(dirs: Dirs, host: string): Journal {
  return { v: 1, host, to: 'nested', from: flatPaths(dirs, host), dest: nestedPaths(dirs, host), generation: 3, startedAt: '2026-11-30T08:00:00.000Z' }
}

void test('journals are written together, read back whole, and removed together', async (t) => {
  const dataDir = await tmpDir(t)
  const dirs = { dataDir, runDir: path.join(dataDir, 'run') }
  const js = ['a.example.com', 'b.example.com', 'c.example.com'].map((h) => journal(dirs, h))
  await writeJournals(dirs, js)
  const layout = path.join(dataDir, 'layout')
  assert.equal(fs.statSync(layout).mode & 0o777, 0o700)
  assert.deepEqual(await listLayout(dirs), { journals: ['a.example.com', 'b.example.com', 'c.example.com'], holds: [], temps: [], strays: [] })
  assert.deepEqual(await readJournal(dirs, 'b.example.com'), { ok: true, journal: js[1] })
  await removeJournals(dirs, ['a.example.com', 'c.example.com'])
  assert.deepEqual(fs.readdirSync(layout), ['b.example.com.journal'])
})

void test('a journal that does not read back whole is reported with its reason', async (t) => {
  const dataDir = await tmpDir(t)
  const dirs = { dataDir, runDir: path.join(dataDir, 'run') }
  const good = journal(dirs, 'a.example.com')
  await writeJournals(dirs, [good])
  const file = path.join(dataDir, 'layout', 'a.example.com.journal')
  const cases: Array<[string, RegExp]> = [
    ['', /is not JSON/],
    ['[]', /^not a journal: /],
    [JSON.stringify({ ...good, v: 2 }), /^not a journal: \/v: /],
    [JSON.stringify({ ...good, extra: 1 }), /^not a journal: /],
    [JSON.stringify({ ...good, to: 'sideways' }), /^not a journal: \/to/],
    [JSON.stringify({ ...good, dest: { ...good.dest, dir: '/tmp/x' } }), /^dest is not the nested paths/],
  ]
  for (const [body, want] of cases) {
    fs.writeFileSync(file, body)
    const r = await readJournal(dirs, 'a.example.com')
    assert.equal(r.ok, false, body)
    if (!r.ok) assert.match(r.reason, want, body)
  }
  fs.unlinkSync(file)
  fs.symlinkSync('/etc/hostname', file)
  const r = await readJournal(dirs, 'a.example.com')
  assert.equal(r.ok, false)
  if (!r.ok) assert.match(r.reason, /^cannot be read: .*ELOOP/)
  await assert.rejects(readJournal(dirs, 'b.example.com'), { code: 'ENOENT' })
})

void test('listLayout sorts what it finds', async (t) => {
  const dataDir = await tmpDir(t)
  const layout = path.join(dataDir, 'layout')
  fs.mkdirSync(layout)
  for (const n of ['a.example.com.journal', 'a.example.com.hold', 'b.example.com.journal.tmp', 'B_AD.hold', 'grace.json', 'aside']) {
    fs.writeFileSync(path.join(layout, n), '')
  }
  assert.deepEqual(await listLayout({ dataDir, runDir: '' }), {
    journals: ['a.example.com'],
    holds: ['a.example.com'],
    temps: ['b.example.com.journal.tmp'],
    strays: ['B_AD.hold'],
  })
})

import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { test } from 'node:test'
import { flatPaths, nestedPaths, type Dirs } from '../../../src/domain/paths.js'
import { validHost, NOT_A_HOST_PREFIX } from '../../../src/domain/hostname.js'
import { checkBatch, readBatchSync, writeBatchJournal } from '../../../src/infra/pass/batch-journal.js'
import {
  batchJournalName,
  isBatchJournalName,
  listLayout,
  readJournal,
  removeJournals,
  writeJournals,
  type Journal,
} from '../../../src/infra/pass/journal.js'
import { tmpDir } from '../../helpers/tmp.js'

function journal(dirs: Dirs, host: string): Journal {
  return {
    v: 1,
    host,
    to: 'nested',
    from: flatPaths(dirs, host),
    dest: nestedPaths(dirs, host),
    generation: 3,
    startedAt: '2026-11-30T08:00:00.000Z',
  }
}

void test('journals are written together, read back whole, and removed together', async (t) => {
  const dataDir = await tmpDir(t)
  const dirs = { dataDir, runDir: path.join(dataDir, 'run') }
  const js = ['a.example.com', 'b.example.com', 'c.example.com'].map((h) => journal(dirs, h))
  await writeJournals(dirs, js)
  const layout = path.join(dataDir, 'layout')
  assert.equal(fs.statSync(layout).mode & 0o777, 0o700)
  assert.deepEqual(await listLayout(dirs), {
    journals: ['a.example.com', 'b.example.com', 'c.example.com'],
    batches: [],
    holds: [],
    temps: [],
    strays: [],
  })
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
  for (const n of [
    'a.example.com.journal',
    'a.example.com.hold',
    'b.example.com.journal.tmp',
    'B_AD.hold',
    'grace.json',
    'aside',
    '_batch-12.journal',
    '_batch-13.journal.tmp',
    '_batch-x.journal',
  ]) {
    fs.writeFileSync(path.join(layout, n), '')
  }
  assert.deepEqual(await listLayout({ dataDir, runDir: '' }), {
    journals: ['a.example.com'],
    batches: ['_batch-12.journal'],
    holds: ['a.example.com'],
    temps: ['_batch-13.journal.tmp', 'b.example.com.journal.tmp'],
    strays: ['B_AD.hold', '_batch-x.journal'],
  })
})

void test("a batch journal's name is one no host can take", () => {
  for (const g of [0, 7, 123456789]) {
    const name = batchJournalName(g)
    assert.ok(isBatchJournalName(name))
    assert.equal(validHost(name.slice(0, -'.journal'.length)), false, `${name} is not a host's journal`)
    assert.ok(name.startsWith(NOT_A_HOST_PREFIX))
  }
  // A host called batch-7 has its own journal, never taken for a batch's.
  assert.ok(validHost('batch-7'))
  assert.equal(isBatchJournalName('batch-7.journal'), false)
})

void test('a batch journal is written whole in one file and checked move by move; one bad move keeps every host it names', async (t) => {
  const dataDir = await tmpDir(t)
  const dirs = { dataDir, runDir: path.join(dataDir, 'run') }
  const js = ['a.example.com', 'b.example.com'].map((host): Journal => ({
    v: 1,
    host,
    to: 'nested',
    from: flatPaths(dirs, host),
    dest: nestedPaths(dirs, host),
    generation: 9,
    startedAt: '2026-11-30T08:00:00.000Z',
  }))
  await writeBatchJournal(dirs, batchJournalName(9), js)
  assert.deepEqual(fs.readdirSync(path.join(dataDir, 'layout')), ['_batch-9.journal'])
  assert.deepEqual(readBatchSync(dirs, '_batch-9.journal'), { ok: true, journals: js })
  const raw = JSON.parse(fs.readFileSync(path.join(dataDir, 'layout', '_batch-9.journal'), 'utf8')) as {
    moves: Array<Record<string, unknown>>
  }
  const bad = (moves: unknown[]) => checkBatch({ ...raw, moves }, dirs)
  const [a, b] = raw.moves
  assert.deepEqual(bad([a, { ...b, dest: { ...(b?.dest as object), dir: '/elsewhere' } }]), {
    ok: false,
    reason: 'move 1 (b.example.com) dest is not the nested paths of b.example.com',
    hosts: ['a.example.com', 'b.example.com'],
  })
  assert.deepEqual(bad([a, a]), {
    ok: false,
    reason: 'move 1 names a.example.com a second time',
    hosts: ['a.example.com'],
  })
  assert.deepEqual(bad([a, { ...b, host: 'B_AD' }]), {
    ok: false,
    reason: 'move 1 names "B_AD", not a valid host',
    hosts: ['a.example.com'],
  })
  const notBatch = checkBatch({ v: 2, moves: [a] }, dirs)
  assert.equal(notBatch.ok, false)
  if (!notBatch.ok) assert.deepEqual(notBatch.hosts, ['a.example.com'], 'the hosts a bad file names stay fenced')
  fs.writeFileSync(path.join(dataDir, 'layout', '_batch-10.journal'), '{"v":2,')
  const r = readBatchSync(dirs, '_batch-10.journal')
  assert.equal(r.ok, false)
  if (!r.ok) assert.match(r.reason, /^is not JSON/)
})

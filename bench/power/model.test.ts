// The weak persistence model (design §3.5), on small hand-made traces: what
// each barrier makes durable, which crash states a trace allows, and what
// replaying a subset of its operations leaves.
//   node --test dist/bench/power/model.test.js
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { rng } from '../crash.js'
import { durableAt, enumerate, imageHash, lookup, replay, type FsImage, type OpBody } from './model.js'

/** root (1) holds layout/ (2) and apps/ (3), apps/t (4) a tenant's directory with one file f (5). */
function world(): FsImage {
  return {
    root: 1,
    nodes: new Map([
      [
        1,
        {
          kind: 'dir',
          mode: 0o755,
          entries: new Map([
            ['layout', 2],
            ['apps', 3],
          ]),
        },
      ],
      [2, { kind: 'dir', mode: 0o755, entries: new Map() }],
      [3, { kind: 'dir', mode: 0o755, entries: new Map([['t', 4]]) }],
      [4, { kind: 'dir', mode: 0o750, entries: new Map([['f', 5]]) }],
      [5, { kind: 'file', mode: 0o640, data: Buffer.from('tenant') }],
    ]),
  }
}

/** The journal protocol of design §3 step 4: temp file, data, fsync, rename into place, fsync the directory. */
const journal: OpBody[] = [
  { op: 'create', dir: 2, name: 't.journal.tmp', ino: 9, node: 'file', mode: 0o644 },
  { op: 'write', ino: 9, offset: 0, data: Buffer.from('{"to":"nested"}') },
  { op: 'fsync', ino: 9 },
  { op: 'rename', fromDir: 2, fromName: 't.journal.tmp', toDir: 2, toName: 't.journal', ino: 9 },
  { op: 'fsync', ino: 2 },
]

void test('an entry is durable only at its directory fsync, data only at its file fsync', () => {
  assert.deepEqual(durableAt(journal), [4, 2, 2, 4, 4])
  // Without the directory fsync, neither the create nor the rename is ever durable.
  assert.deepEqual(durableAt(journal.slice(0, 4)), [Infinity, 2, 2, Infinity])
})

void test('a rename across two directories is durable once both are fsynced, not one', () => {
  const ops: OpBody[] = [
    { op: 'rename', fromDir: 3, fromName: 't', toDir: 2, toName: 't', ino: 4 },
    { op: 'fsync', ino: 3 },
    { op: 'fsync', ino: 2 },
  ]
  assert.deepEqual(durableAt(ops), [2, 1, 2])
  assert.deepEqual(durableAt(ops.slice(0, 2)), [Infinity, 1])
})

void test('the journal protocol never leaves a journal with lost data: every crash state has it whole or not at all', () => {
  const en = enumerate(journal, { random: rng(1) })
  assert.equal(en.points, 3)
  for (const s of en.states) {
    const img = replay(world(), journal, s.persisted)
    const ino = lookup(img, ['layout', 't.journal'])
    if (ino === undefined) continue
    const n = img.nodes.get(ino)
    assert.equal(n?.kind === 'file' && n.data.toString(), '{"to":"nested"}', `state ${JSON.stringify(s)}`)
  }
})

void test('without the file fsync, a crash may keep the journal renamed into place and empty', () => {
  const broken = journal.filter((o) => !(o.op === 'fsync' && o.ino === 9))
  const en = enumerate(broken, { random: rng(1) })
  const empty = en.states.some((s) => {
    const img = replay(world(), broken, s.persisted)
    const ino = lookup(img, ['layout', 't.journal'])
    const n = ino === undefined ? undefined : img.nodes.get(ino)
    return n?.kind === 'file' && n.data.length === 0
  })
  assert.ok(empty, 'a state with the rename kept and the write lost')
})

void test('a write to a file whose create a crash lost lands in an orphan; a later rename brings it back with its data', () => {
  const lostCreate = replay(world(), journal, [1, 2])
  assert.equal(lookup(lostCreate, ['layout', 't.journal.tmp']), undefined)
  assert.equal(lookup(lostCreate, ['layout', 't.journal']), undefined)
  const renamed = replay(world(), journal, [1, 2, 3])
  const n = renamed.nodes.get(lookup(renamed, ['layout', 't.journal']) ?? -1)
  assert.equal(n?.kind === 'file' && n.data.toString(), '{"to":"nested"}')
})

void test('the in-flight ops are enumerated whole when few, and the possible count is the sum of 2^n over crash points', () => {
  const ops: OpBody[] = [
    { op: 'create', dir: 2, name: 'a', ino: 9, node: 'file', mode: 0o644 },
    { op: 'create', dir: 2, name: 'b', ino: 10, node: 'file', mode: 0o644 },
    { op: 'fsync', ino: 2 },
  ]
  const en = enumerate(ops, { random: rng(1) })
  // Before the fsync: 2 in flight, 4 subsets; after it: none in flight, 1.
  assert.equal(en.possible, '5')
  assert.equal(en.states.length, 5)
  const images = new Set(en.states.map((s) => imageHash(replay(world(), ops, s.persisted))))
  assert.equal(images.size, 4)
})

void test('ops taken as of their last fsync are never left in flight', () => {
  const ops: OpBody[] = [
    { op: 'write', ino: 5, offset: 0, data: Buffer.from('wal') },
    { op: 'create', dir: 2, name: 'a', ino: 9, node: 'file', mode: 0o644 },
  ]
  const en = enumerate(ops, { random: rng(1), asOfLastFsync: (o) => o.op === 'write' })
  assert.equal(en.possible, '2')
  for (const s of en.states) assert.ok(!s.persisted.includes(0))
})

void test('past the exhaustive bound a point is sampled, and the same seed samples the same states', () => {
  const ops: OpBody[] = Array.from(
    { length: 10 },
    (_, i) => ({ op: 'create', dir: 2, name: `n${i}`, ino: 20 + i, node: 'file', mode: 0o644 }) as const,
  )
  const a = enumerate(ops, { random: rng(7), exhaustiveUpTo: 16, samplesPerPoint: 8 })
  const b = enumerate(ops, { random: rng(7), exhaustiveUpTo: 16, samplesPerPoint: 8 })
  assert.equal(a.possible, String(2 ** 10))
  assert.ok(a.states.length < 2 ** 10)
  assert.deepEqual(a.states, b.states)
  assert.ok(
    a.states.some((s) => s.how === 'all-but-one') &&
      a.states.some((s) => s.how === 'none') &&
      a.states.some((s) => s.how === 'all'),
  )
})

/** The token protocol of agent-token.ts: an O_EXCL 0600 temp file, fchmod, data, fsync, linked into place, the temp unlinked, the directory fsynced. */
const token: OpBody[] = [
  { op: 'create', dir: 1, name: 'agent.token.7.tmp', ino: 9, node: 'file', mode: 0o600 },
  { op: 'chmod', ino: 9, mode: 0o600 },
  { op: 'write', ino: 9, offset: 0, data: Buffer.from('secret\n') },
  { op: 'fsync', ino: 9 },
  { op: 'link', dir: 1, name: 'agent.token', ino: 9 },
  { op: 'unlink', dir: 1, name: 'agent.token.7.tmp', ino: 9 },
  { op: 'fsync', ino: 1 },
]

void test('a file whose create a crash lost keeps the mode its create gave it: no crash state has the token readable by others', () => {
  const en = enumerate(token, { random: rng(1) })
  let linked = 0
  for (const s of en.states) {
    const img = replay(world(), token, s.persisted)
    const ino = lookup(img, ['agent.token'])
    if (ino === undefined) continue
    linked++
    const n = img.nodes.get(ino)
    assert.equal(n?.kind, 'file', `state ${JSON.stringify(s)}`)
    assert.equal(n.mode.toString(8), '600', `state ${JSON.stringify(s)}`)
  }
  assert.ok(linked > 0, 'some state has the token linked into place')
  // Only the link and the fsynced data kept: the inode is the one the create made, with its mode.
  const lost = replay(world(), token, [2, 3, 4])
  const n = lost.nodes.get(lookup(lost, ['agent.token']) ?? -1)
  assert.deepEqual(n?.kind === 'file' && { mode: n.mode.toString(8), data: n.data.toString() }, {
    mode: '600',
    data: 'secret\n',
  })
})

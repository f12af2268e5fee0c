// The power-loss audit's rules (bench/power/audit.ts, design §3.5) on a
// hand-made trace of a batch moved the way a group commit would: one
// journal file naming two hosts, one fsync per distinct directory, one
// registry commit for both. The rules are per host, so the batch keeps
// them all, and taking out one host's parent fsync breaks that host alone.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { audit } from '../../bench/power/audit.js'
import type { FsImage, FsNode, Op, OpBody } from '../../bench/power/model.js'

const D = '/D'

/** D (1): layout/ (2), apps/ (3) with a (10) and b (11), nested/ (4) with a's root (20, run 21) and b's (22, run 23), the WAL (5). */
function world(): FsImage {
  const dir = (entries: Array<[string, number]>) => ({ kind: 'dir' as const, mode: 0o755, entries: new Map(entries) })
  return {
    root: 1,
    nodes: new Map<number, FsNode>([
      [
        1,
        dir([
          ['layout', 2],
          ['apps', 3],
          ['nested', 4],
          ['registry.db-wal', 5],
        ]),
      ],
      [2, dir([])],
      [
        3,
        dir([
          ['a', 10],
          ['b', 11],
        ]),
      ],
      [
        4,
        dir([
          ['a', 20],
          ['b', 22],
        ]),
      ],
      [5, { kind: 'file', mode: 0o644, data: Buffer.alloc(0) }],
      [10, dir([])],
      [11, dir([])],
      [20, dir([['run', 21]])],
      [21, dir([])],
      [22, dir([['run', 23]])],
      [23, dir([])],
    ]),
  }
}

const move = (h: string) => ({
  host: h,
  to: 'nested',
  from: { dir: `${D}/apps/${h}` },
  dest: { dir: `${D}/nested/${h}/data`, socket: `${D}/nested/${h}/run/app.sock` },
})

/** The batch: its journal, both renames, each parent fsynced once, one commit, the journal removed. */
function batch(): Op[] {
  const bodies: Array<[OpBody, string]> = [
    [{ op: 'create', dir: 2, name: 'batch.journal.tmp', ino: 30, node: 'file', mode: 0o600 }, 'create journal'],
    [
      { op: 'write', ino: 30, offset: 0, data: Buffer.from(JSON.stringify({ moves: [move('a'), move('b')] })) },
      'write journal',
    ],
    [{ op: 'fsync', ino: 30 }, 'fsync journal'],
    [
      { op: 'rename', fromDir: 2, fromName: 'batch.journal.tmp', toDir: 2, toName: 'batch.journal', ino: 30 },
      'name journal',
    ],
    [{ op: 'fsync', ino: 2 }, 'fsync layout'],
    [{ op: 'rename', fromDir: 3, fromName: 'a', toDir: 20, toName: 'data', ino: 10 }, 'rename a'],
    [{ op: 'rename', fromDir: 3, fromName: 'b', toDir: 22, toName: 'data', ino: 11 }, 'rename b'],
    [{ op: 'fsync', ino: 3 }, 'fsync apps'],
    [{ op: 'fsync', ino: 20 }, "fsync a's root"],
    [{ op: 'fsync', ino: 22 }, "fsync b's root"],
    [
      { op: 'write', ino: 5, offset: 0, data: Buffer.from(`rows ${move('a').dest.dir} ${move('b').dest.dir}`) },
      'commit',
    ],
    [{ op: 'fsync', ino: 5 }, 'fsync wal'],
    [{ op: 'unlink', dir: 2, name: 'batch.journal', ino: 30 }, 'remove journal'],
    [{ op: 'fsync', ino: 2 }, 'fsync layout'],
  ]
  return bodies.map(([b, what], i) => ({ ...b, what, t: i }))
}

void test('a batch under one journal, one fsync per directory and one commit keeps every rule for each host', () => {
  const r = audit(batch(), world(), D)
  assert.deepEqual(r.violations, [])
  assert.deepEqual(
    r.moves.map((m) => [m.host, m.journal, m.rename, m.commit, m.unlink]),
    [
      ['a', 3, 5, 10, 12],
      ['b', 3, 6, 10, 12],
    ],
  )
})

void test("without one host's destination fsync, that host alone breaks parents-before-commit", () => {
  const ops = batch().filter((o) => o.what !== "fsync a's root")
  const r = audit(ops, world(), D)
  assert.deepEqual(
    r.violations.map((v) => [v.rule, v.host]),
    [['parents-before-commit', 'a']],
  )
  assert.match(
    r.violations[0]?.message ?? '',
    /destination parent is not fsynced between the rename #5 \(rename a\) and the registry commit/,
  )
})

void test("without the layout fsync after the journal's rename, every host it names breaks journal-before-rename", () => {
  const ops = batch()
  const r = audit(
    ops.filter((o, i) => !(i === 4 && o.what === 'fsync layout')),
    world(),
    D,
  )
  assert.deepEqual(
    r.violations.map((v) => [v.rule, v.host]),
    [
      ['journal-before-rename', 'a'],
      ['journal-before-rename', 'b'],
    ],
  )
})

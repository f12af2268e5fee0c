// The crash state the power-loss explorer found in the aside (design §3.5):
// the move set a file in its way aside (mkdir `aside/`, `aside/<host>/`,
// `aside/<host>/<stamp>/`, then the rename into it) and fsynced the new
// directories only with the rename's own parents, after it. A power cut
// before those fsyncs may keep the rename and lose the mkdir of
// `aside/<host>`: the file set aside is then in no place. Kept here twice:
// the two orders as hand-made traces, every crash state of each written out
// and looked at (the old order has that state, the new one none); and the
// real agent's own trace, where every name on the way to an aside's
// directory is durable before anything is renamed into it.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { test } from 'node:test'
import { rng, type World } from '../../bench/crash.js'
import { strayProblems } from '../../bench/power/check.js'
import {
  durableAt,
  enumerate,
  replay,
  type FsImage,
  type FsNode,
  type Op,
  type OpBody,
} from '../../bench/power/model.js'
import { record, STRACE } from '../../bench/power/record.js'
import { materialise } from '../../bench/power/trace.js'
import { tmpDir } from '../helpers/tmp.js'

const HOST = 'a.example.com'
const STRAY = Buffer.from('left where the run/ goes\n')

/** D (1): layout/ (2), nested/ (3) holding the host's root (4), where a file `run` (5) is in the way. */
function before(): FsImage {
  const dir = (entries: Array<[string, number]>): FsNode => ({ kind: 'dir', mode: 0o755, entries: new Map(entries) })
  return {
    root: 1,
    nodes: new Map<number, FsNode>([
      [
        1,
        dir([
          ['layout', 2],
          ['nested', 3],
        ]),
      ],
      [2, dir([])],
      [3, dir([[HOST, 4]])],
      [4, dir([['run', 5]])],
      [5, { kind: 'file', mode: 0o644, data: STRAY }],
    ]),
  }
}

const mkdir = (dir: number, name: string, ino: number): OpBody => ({
  op: 'create',
  dir,
  name,
  ino,
  node: 'dir',
  mode: 0o700,
})
const fsync = (ino: number): OpBody => ({ op: 'fsync', ino })
const MKDIRS = [mkdir(2, 'aside', 10), mkdir(10, HOST, 11), mkdir(11, '20260101T000000.000Z', 12)]
const RENAME: OpBody = { op: 'rename', fromDir: 4, fromName: 'run', toDir: 12, toName: 'run', ino: 5 }

/** The aside as it was: the new directories fsynced with the rename's parents, after it. */
const OLD_ORDER = [...MKDIRS, RENAME, fsync(2), fsync(10), fsync(11), fsync(12), fsync(4)]
/** As it is: the way to the stamp directory durable first, then the rename and its parents. */
const NEW_ORDER = [...MKDIRS, fsync(2), fsync(10), fsync(11), RENAME, fsync(12), fsync(4)]

/** Every crash state of the trace (all subsets: few are in flight), each written out and checked; answers the problems found. */
function explore(root: string, bodies: OpBody[]): { states: number; lost: string[] } {
  const ops: Op[] = bodies.map((b, i) => ({ ...b, what: `#${i} ${b.op}`, t: i }))
  const en = enumerate(ops, { random: rng(1), exhaustiveUpTo: 1 << 10 })
  const lost: string[] = []
  fs.mkdirSync(root, { recursive: true })
  for (const [n, s] of en.states.entries()) {
    const data = path.join(root, String(n))
    materialise(replay(before(), ops, s.persisted), data)
    const world = { dirs: { dataDir: data, runDir: path.join(data, 'run') } } as unknown as World
    const problems = strayProblems({
      world,
      stray: { host: HOST, path: path.join(data, 'nested', HOST, 'run'), data: STRAY },
    })
    if (problems.length > 0)
      lost.push(
        `crash before op ${s.at}, kept [${s.kept.join(',')}] of [${s.inFlight.join(',')}]: ${problems.join('; ')}`,
      )
  }
  return { states: en.states.length, lost }
}

void test('the old order of the aside has a crash state that loses what was set aside; the new order has none', async (t) => {
  const root = await tmpDir(t, 'layoutd-power-aside-')
  const old = explore(path.join(root, 'old'), OLD_ORDER)
  // The state the explorer found: the crash before the first fsync keeps the rename and the stamp's mkdir, and loses aside/<host>.
  assert.ok(
    old.lost.includes(`crash before op 4, kept [0,2,3] of [0,1,2,3]: ${HOST}: what was set aside is in no place`),
    `the found state is among the old order's: ${old.lost.join('\n')}`,
  )
  const now = explore(path.join(root, 'new'), NEW_ORDER)
  assert.ok(now.states >= 8, `the new order was explored (${now.states} states)`)
  assert.deepEqual(now.lost, [])
})

void test("the real agent's aside: every name on the way to the aside's directory is durable before the rename into it", async (t) => {
  assert.ok(
    fs.existsSync(STRACE),
    `${STRACE} is missing: the test records the agent under strace (scripts/test.sh installs it)`,
  )
  const rec = await record({
    hosts: 3,
    seed: 1,
    root: await tmpDir(t, 'layoutd-power-aside-'),
    log: () => {},
    scenario: { aside: true },
  })
  assert.deepEqual(rec.lowered.skipped, [], 'every call under the data root was lowered')
  const ops = rec.lowered.ops
  const dur = durableAt(ops)
  const shown = (i: number): string => `#${i} ${ops[i]?.what.replaceAll(rec.world.sb.dataDir, 'D') ?? ''}`
  const asideDir = path.join(rec.world.sb.dataDir, 'layout', 'aside')
  const renames = [...ops.entries()].filter(([, o]) => o.op === 'rename' && o.what.includes(` -> ${asideDir}/`))
  assert.equal(renames.length, 1, 'one item set aside')
  for (const [r, o] of renames) {
    if (o.op !== 'rename') continue
    // The mkdirs of the trace on the way down to the rename's new parent: each durable before it.
    const made = [...ops.entries()].filter(
      ([i, m]) =>
        i < r &&
        m.op === 'create' &&
        m.what.startsWith(`mkdir ${asideDir}`) &&
        o.what.includes(` -> ${m.what.slice('mkdir '.length)}/`),
    )
    assert.equal(made.length, 3, `aside/, aside/<host>/ and the stamp made before ${shown(r)}`)
    for (const [m] of made)
      assert.ok((dur[m] ?? Infinity) < r, `${shown(m)} is durable only at ${dur[m]}, after the rename ${shown(r)}`)
  }
})

// Preflight on worker threads answers what the walk on the loop's thread
// answers, source by source and in order; a walk that fails fails alone; a
// pool ended mid-walk fails that walk and starts again after; idle threads
// end. A batch's looks (steps 4 and 6) on a thread answer what they answer
// on the loop.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { test } from 'node:test'
import { setTimeout as delay } from 'node:timers/promises'
import { flatPaths, nestedPaths, nestedRoot, type Dirs } from '../../../src/domain/paths.js'
import type { LookRequest } from '../../../src/infra/pass/mover.js'
import { PreflightPool, SlicedPreflight, WALK_NICE, walkThreads } from '../../../src/infra/pass/preflight-pool.js'
import { preflight, type Preflight } from '../../../src/infra/pass/preflight.js'
import { Slicer } from '../../../src/infra/pass/sliced-fs.js'
import { tmpDir } from '../../helpers/tmp.js'

/** Sources of every kind preflight tells apart, and what the loop's walk answers for each. */
function sources(root: string): string[] {
  const tree = (name: string): string => {
    const dir = path.join(root, name)
    fs.mkdirSync(path.join(dir, 'sub', 'deep'), { recursive: true })
    fs.writeFileSync(path.join(dir, 'sub', 'deep', 'f'), 'x')
    fs.writeFileSync(path.join(dir, 'g'), 'y')
    return dir
  }
  const out: string[] = []
  for (let i = 0; i < 40; i++) out.push(tree(`ok-${i}`))
  const linked = tree('linked')
  fs.linkSync(path.join(linked, 'sub', 'deep', 'f'), path.join(root, 'neighbour-name'))
  const odd = tree('odd')
  fs.writeFileSync(Buffer.concat([Buffer.from(`${odd}/`), Buffer.from([0xff, 0xfe])]), 'z')
  fs.linkSync(Buffer.concat([Buffer.from(`${odd}/`), Buffer.from([0xff, 0xfe])]), path.join(root, 'odd-second'))
  fs.symlinkSync(tree('target'), path.join(root, 'link'))
  fs.writeFileSync(path.join(root, 'file'), '')
  out.splice(
    3,
    0,
    linked,
    path.join(root, 'link'),
    path.join(root, 'file'),
    path.join(root, 'missing'),
    odd,
    path.join(root, 'file', 'below'),
  )
  return out
}

void test('the pool answers what the walk on the loop answers, source by source, in order', async (t) => {
  const root = await tmpDir(t)
  const dirs = sources(root)
  const pool = new PreflightPool({ size: 2 })
  t.after(() => pool.close())
  const onThreads = await pool.check(dirs)
  const onLoop = await new SlicedPreflight(new Slicer()).check(dirs)
  assert.equal(onThreads.length, dirs.length)
  // An error as its message: the loop's keeps its errno fields, a thread's is rebuilt from the message.
  const shown = (a: Preflight | Error | undefined) => (a instanceof Error ? { kind: 'error', reason: a.message } : a)
  const answers = onThreads.map(shown)
  assert.deepEqual(answers, onLoop.map(shown))
  assert.deepEqual(
    answers.slice(3, 9).map((a) => a?.kind),
    ['held', 'held', 'held', 'missing', 'held', 'error'],
  )
  assert.equal(answers.filter((a) => a?.kind === 'ok').length, 40)
  const reason = (a: ReturnType<typeof shown>) => (a !== undefined && 'reason' in a ? a.reason : '')
  assert.match(reason(answers[3]), /a file of its has a second name: sub\/deep\/f has 2 links/)
  assert.match(reason(answers[7]), /\\xff\\xfe has 2 links/, 'a name that is not UTF-8 is walked as its bytes')
  assert.match(reason(answers[8]), /ENOTDIR/, 'the error names what failed')
  const st = fs.lstatSync(dirs[0] as string, { bigint: true })
  assert.deepEqual(answers[0], { kind: 'ok', seen: { dev: st.dev, ino: st.ino } })
  assert.deepEqual(await preflight(dirs[1] as string), onThreads[1])
})

void test('a batch looked at on a thread: each move’s source and what is in its way, as the loop sees them, in order', async (t) => {
  const root = await tmpDir(t)
  const d: Dirs = { dataDir: path.join(root, 'data'), runDir: path.join(root, 'data', 'run') }
  fs.mkdirSync(path.join(d.dataDir, 'apps'), { recursive: true })
  const looks: LookRequest[] = []
  const host = (i: number): string => `h${i}.example.com`
  // h0: a source, nothing in the way of nested.
  fs.mkdirSync(flatPaths(d, host(0)).dir)
  looks.push({ host: host(0), to: 'nested', from: flatPaths(d, host(0)).dir, dest: nestedPaths(d, host(0)) })
  // h1: no source.
  looks.push({ host: host(1), to: 'nested', from: flatPaths(d, host(1)).dir, dest: nestedPaths(d, host(1)) })
  // h2: the nested root is a file.
  fs.mkdirSync(flatPaths(d, host(2)).dir)
  fs.mkdirSync(path.join(d.dataDir, 'nested'), { recursive: true })
  fs.writeFileSync(nestedRoot(d, host(2)), 'planted')
  looks.push({ host: host(2), to: 'nested', from: flatPaths(d, host(2)).dir, dest: nestedPaths(d, host(2)) })
  // h3: a revert whose flat directory and socket path are taken; asked without its source (step 6).
  fs.mkdirSync(flatPaths(d, host(3)).dir)
  fs.mkdirSync(path.dirname(flatPaths(d, host(3)).socket), { recursive: true })
  fs.writeFileSync(flatPaths(d, host(3)).socket, '')
  looks.push({ host: host(3), to: 'flat', dest: flatPaths(d, host(3)) })
  // h4: the run directory where a socket's parent should be is a file: an error the move fails with alone.
  fs.mkdirSync(nestedRoot(d, host(4)), { recursive: true })
  fs.writeFileSync(path.join(nestedRoot(d, host(4)), 'run'), '')
  looks.push({ host: host(4), to: 'nested', dest: nestedPaths(d, host(4)) })
  const pool = new PreflightPool({ size: 1 })
  t.after(() => pool.close())
  const onThread = await pool.look(d, looks)
  const onLoop = await new SlicedPreflight(new Slicer()).look(d, looks)
  const shown = (a: unknown) => (a instanceof Error ? { kind: 'error', reason: a.message } : a)
  assert.deepEqual(onThread.map(shown), onLoop.map(shown))
  assert.deepEqual(onThread.map(shown), [
    { kind: 'found', aside: [], staleSockets: [] },
    { kind: 'missing' },
    { kind: 'found', aside: [nestedRoot(d, host(2))], staleSockets: [] },
    { kind: 'found', aside: [flatPaths(d, host(3)).dir, flatPaths(d, host(3)).socket], staleSockets: [] },
    { kind: 'found', aside: [path.join(nestedRoot(d, host(4)), 'run')], staleSockets: [] },
  ])
  assert.equal(fs.readFileSync(nestedRoot(d, host(2)), 'utf8'), 'planted', 'a look changes nothing')
})

void test('a pool ended mid-walk fails that walk, and the next walk starts a thread again', async (t) => {
  const root = await tmpDir(t)
  const big = path.join(root, 'big')
  fs.mkdirSync(big)
  for (let i = 0; i < 20_000; i++) fs.writeFileSync(path.join(big, `f${i}`), '')
  const pool = new PreflightPool({ size: 1 })
  t.after(() => pool.close())
  const walking = pool.check(Array.from({ length: 8 }, () => big))
  assert.equal(pool.threads, 1)
  pool.close()
  assert.equal(pool.threads, 0)
  await assert.rejects(walking, /the walking thread was ended/)
  const again = await pool.check([big])
  assert.equal(again[0] instanceof Error ? 'error' : again[0]?.kind, 'ok')
})

void test('a thread idle for idleMs ends; the pool keeps none while nothing walks', async (t) => {
  const root = await tmpDir(t)
  // Long enough that the thread that answered first is still there when the other answers, on a loaded machine.
  const pool = new PreflightPool({ size: 2, idleMs: 1000 })
  t.after(() => pool.close())
  await pool.check(Array.from({ length: 40 }, () => root))
  assert.equal(pool.threads, 2)
  for (let i = 0; i < 250 && pool.threads > 0; i++) await delay(20)
  assert.equal(pool.threads, 0)
})

void test('walkThreads: one a core, at most 4 (niced below the loop, next test)', () => {
  assert.deepEqual(
    [1, 2, 3, 4, 8, 64].map((cores) => walkThreads(cores)),
    [1, 2, 3, 4, 4, 4],
  )
})

void test("a walking thread is niced below the loop's thread, and the loop's thread is not", async (t) => {
  const pool = new PreflightPool({ size: 1 })
  t.after(() => pool.close())
  await pool.check([await tmpDir(t)])
  /** The nice of each thread of this process (field 19 of /proc/<tid>/stat). */
  const nices = fs
    .readdirSync('/proc/self/task')
    .map((tid) => Number(fs.readFileSync(`/proc/self/task/${tid}/stat`, 'utf8').split(') ')[1]?.split(' ')[16]))
  assert.equal(nices.filter((n) => n === WALK_NICE).length, 1, `one thread at nice ${WALK_NICE}: ${nices.join(' ')}`)
  assert.equal(
    fs.readFileSync('/proc/self/stat', 'utf8').split(') ')[1]?.split(' ')[16],
    '0',
    "the loop's thread keeps its nice",
  )
})

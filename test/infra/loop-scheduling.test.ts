// How the loop's thread is scheduled, as the agent says it at start
// (design §3.6): read from proc(5)'s stat lines, from a made /proc and from
// node processes the kernel really scheduled under `chrt`, with and
// without reset-on-fork (the unit's CPUSchedulingResetOnFork=).
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import {
  describeLoopScheduling,
  parseTaskStat,
  readLoopScheduling,
  type LoopScheduling,
} from '../../src/infra/loop-scheduling.js'
import { tmpDir } from '../helpers/tmp.js'
import { run } from '../helpers/child.js'

const MODULE = fileURLToPath(new URL('../../src/infra/loop-scheduling.js', import.meta.url))

/** A stat line of proc(5) with the fields this reads set, every other one 0. */
function statLine(tid: number, name: string, { nice = 0, rtPriority = 0, policy = 0 } = {}): string {
  const fields = Array.from({ length: 52 - 2 }, () => '0')
  fields[0] = 'S'
  fields[19 - 3] = String(nice)
  fields[40 - 3] = String(rtPriority)
  fields[41 - 3] = String(policy)
  return `${String(tid)} (${name}) ${fields.join(' ')}\n`
}

void test('a stat line gives the name, nice, real-time priority and policy, a name with parentheses included', () => {
  assert.deepEqual(parseTaskStat(statLine(7, 'a) (b', { nice: 10 })), {
    name: 'a) (b',
    policy: 'SCHED_OTHER',
    rtPriority: 0,
    nice: 10,
  })
  assert.deepEqual(parseTaskStat(statLine(7, 'node', { rtPriority: 10, policy: 2 })), {
    name: 'node',
    policy: 'SCHED_RR',
    rtPriority: 10,
    nice: 0,
  })
  assert.equal(parseTaskStat('7 (node) S 1 2'), undefined, 'too short to hold the policy')
  assert.equal(parseTaskStat('no name here'), undefined)
})

void test('a made /proc: the loop real-time alone, with threads that inherited it, and ordinary', async (t) => {
  const proc = path.join(await tmpDir(t), 'proc')
  const make = (threads: Array<[number, string, { rtPriority?: number; policy?: number; nice?: number }]>) => {
    fs.rmSync(proc, { recursive: true, force: true })
    for (const [tid, name, s] of threads) {
      fs.mkdirSync(path.join(proc, 'task', String(tid)), { recursive: true })
      fs.writeFileSync(path.join(proc, 'task', String(tid), 'stat'), statLine(tid, name, s))
    }
    fs.writeFileSync(path.join(proc, 'stat'), statLine(threads[0]?.[0] ?? 0, threads[0]?.[1] ?? '', {}))
  }
  const rr = { rtPriority: 10, policy: 2 }
  make([
    [100, 'node', rr],
    [101, 'node-V8Worker', {}],
    [102, 'layoutd-checkpoint', { nice: 5 }],
  ])
  const alone = readLoopScheduling(proc)
  assert.ok(alone !== undefined)
  assert.deepEqual(alone.inheritedBy, [])
  assert.equal(alone.loop.policy, 'SCHED_RR')
  assert.equal(describeLoopScheduling(alone).level, 'info')

  make([
    [100, 'node', rr],
    [101, 'node-V8Worker', rr],
    [102, 'node-V8Worker', rr],
    [103, 'libuv-worker', {}],
  ])
  const leaked = readLoopScheduling(proc) as LoopScheduling
  assert.deepEqual(leaked.inheritedBy, ['node-V8Worker', 'node-V8Worker'])
  const said = describeLoopScheduling(leaked)
  assert.equal(said.level, 'warn')
  assert.match(said.message, /so do 2 threads it started \(node-V8Worker\)/)
  assert.match(said.message, /CPUSchedulingResetOnFork=yes/)

  make([
    [100, 'node', { nice: 0 }],
    [101, 'node-V8Worker', rr],
  ])
  const ordinary = readLoopScheduling(proc) as LoopScheduling
  assert.deepEqual(ordinary.inheritedBy, [], "another thread's policy matters only under a real-time loop")
  assert.match(describeLoopScheduling(ordinary).message, /SCHED_OTHER nice 0.*CPUSchedulingPolicy=rr/)
  assert.equal(describeLoopScheduling(ordinary).level, 'debug', 'an ordinary start stays quiet')

  assert.equal(readLoopScheduling(path.join(proc, 'missing')), undefined, 'no /proc: nothing said')
})

/** What a node process started by `chrt` with these flags reads of itself. */
async function underChrt(flags: string[]): Promise<LoopScheduling> {
  const probe =
    `import { readLoopScheduling } from ${JSON.stringify(MODULE)}\n` +
    `process.stdout.write(JSON.stringify(readLoopScheduling()))`
  const { stdout } = await run('chrt', [...flags, process.execPath, '--input-type=module', '-e', probe])
  return JSON.parse(stdout) as LoopScheduling
}

void test("the kernel's own answer: SCHED_RR on the loop alone with reset-on-fork, on every thread without", async (t) => {
  // Raising a policy takes CAP_SYS_NICE (or an RLIMIT_RTPRIO): the suite runs as root, a developer may not.
  const allowed = spawnSync('chrt', ['--rr', '10', 'true'])
  if (allowed.error !== undefined || allowed.status !== 0) {
    t.skip(`chrt --rr 10 refused here: ${allowed.error?.message ?? allowed.stderr.toString().trim()}`)
    return
  }
  const reset = await underChrt(['--reset-on-fork', '--rr', '10'])
  assert.deepEqual(reset.loop, { ...reset.loop, policy: 'SCHED_RR', rtPriority: 10 })
  assert.deepEqual(reset.inheritedBy, [], "node's own threads (V8's, libuv's) start ordinary")

  const inherited = await underChrt(['--rr', '10'])
  assert.equal(inherited.loop.policy, 'SCHED_RR')
  assert.ok(inherited.inheritedBy.length > 0, "without the flag node's threads run real-time too")
  assert.equal(describeLoopScheduling(inherited).level, 'warn')

  const ordinary = await underChrt(['--other', '0'])
  assert.equal(ordinary.loop.policy, 'SCHED_OTHER')
})

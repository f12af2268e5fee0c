// The isolation gate under a D/nested the self-check cannot write (a
// read-only bind mount: EROFS; a full tmpfs: ENOSPC): the gate's answer is
// a verdict, so a fault that stays the same is one change, one log line and
// one kick, and the leg runs a bounded handful of times however long it
// lasts (design §5.4). Needs root for mount(8), as the suite has.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test, type TestContext } from 'node:test'
import type { DeployStore } from '../../src/domain/ports.js'
import { FakeLogger } from '../domain/fakes.js'
import { agentBox, withReads } from '../helpers/agent.js'
import { tmpDir } from '../helpers/tmp.js'
import { until } from '../helpers/until.js'

/** A deploy store that counts its reads: the poller's, every 50 ms, are the test's clock. */
function counting(store: DeployStore, reads: { n: number }): DeployStore {
  return withReads(store, (signal) => {
    reads.n++
    return store.list(signal)
  })
}

type Fault = 'EROFS' | 'ENOSPC'

/** Makes nested unwritable with fault; answers the undo, which the test's end runs too. */
function breakNested(t: TestContext, nested: string, fault: Fault): () => void {
  if (fault === 'EROFS') {
    execFileSync('mount', ['--bind', nested, nested])
  } else {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k,nr_inodes=8', 'tmpfs', nested])
  }
  let mounted = true
  const undo = (): void => {
    if (!mounted) return
    mounted = false
    execFileSync('umount', ['-l', nested])
  }
  t.after(undo)
  if (fault === 'EROFS') execFileSync('mount', ['-o', 'remount,bind,ro', nested])
  return undo
}

/** Fills the tmpfs at dir until no inode is left: mkdir then fails with ENOSPC. */
async function fill(dir: string): Promise<void> {
  for (let i = 0; ; i++) {
    try {
      await fs.writeFile(path.join(dir, `fill-${i}`), '')
    } catch (err) {
      assert.equal((err as NodeJS.ErrnoException).code, 'ENOSPC')
      return
    }
  }
}

async function legRuns(b: { metrics: { text(): Promise<string> } }): Promise<number> {
  return Number(/^carlos_layout_leg_runs_total (\d+)$/m.exec(await b.metrics.text())?.[1] ?? 'NaN')
}

for (const [fault, layoutDefault] of [
  ['EROFS', ''],
  ['ENOSPC', 'flat'],
] as const) {
  void test(`a D/nested that fails the self-check with ${fault} (default ${layoutDefault || 'nested'}) shuts the gate once: a handful of leg runs and log lines, not a loop`, async (t) => {
    const dir = await tmpDir(t)
    const nested = path.join(dir, 'data', 'nested')
    await fs.mkdir(nested, { recursive: true })
    const undo = breakNested(t, nested, fault)
    if (fault === 'ENOSPC') await fill(nested)
    const logger = new FakeLogger()
    const reads = { n: 0 }
    const b = await agentBox(t, {
      dir,
      logger,
      env: { CARLOS_LAYOUT_DEFAULT: layoutDefault },
      wrapStore: (s) => counting(s, reads),
    })
    try {
      await b.agent.start()
      await until(
        'the gate to name the fault',
        () => b.agent.readiness().isolation?.[0]?.ok === false && b.agent.readiness().isolation?.[0]?.code === fault,
      )
      // Sixty of the poller's reads: about three seconds of the fault.
      await until('sixty poller reads', () => reads.n >= 60, 30_000)
      const runs = await legRuns(b)
      t.diagnostic(`${runs} leg runs, ${logger.lines.length} log lines in ${reads.n} store reads`)
      assert.ok(runs <= 5, `the leg ran ${runs} times in ${reads.n} poller reads`)
      assert.ok(
        logger.lines.length <= 10,
        `${logger.lines.length} log lines:\n${logger.msgs().slice(0, 20).join('\n')}`,
      )
      const reason = b.agent.readiness().nested.reason
      assert.doesNotMatch(reason, /\.selfcheck-/, 'the reason names no probe directory')
      assert.equal(logger.msgs().filter((m) => m.startsWith('layout: isolation gate shut')).length, 1)
      // The detail, with the errno's own words, is kept for a person.
      const verbose = await b.app.inject({ method: 'GET', url: '/ready?verbose' })
      assert.match(verbose.body, new RegExp(`^\\[-\\]isolation/selfcheck failed: .*${fault}`, 'm'))
    } finally {
      await b.close()
      undo()
    }
  })
}

// The random kill -9 harness, small (bench/crash.ts has the logic; the
// script runs it large): 20 flat tenants migrated and reverted by the real
// agent under 6 SIGKILLs at random moments, every invariant checked after
// each kill and at the end.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { runCrash } from '../../bench/crash.js'
import { tmpDir } from '../helpers/tmp.js'

void test('random kill -9: 20 tenants migrate and revert through 6 kills with every tree intact', async (t) => {
  const root = await tmpDir(t, 'layoutd-crash-')
  // A fixed seed: the choices repeat (hosts, trees, delays); the moments the kills land do not quite.
  const seed = Number(process.env.CRASH_SEED ?? 20261130)
  const lines: string[] = []
  const summary = await runCrash({ hosts: 20, kills: 6, seed, root, log: (l) => lines.push(l) })
  t.diagnostic(`seed ${seed}, ${summary.seconds.toFixed(1)} s; ${JSON.stringify(summary.phases)}`)
  assert.deepEqual(summary.problems, [], `seed ${seed}:\n${lines.join('\n')}`)
  assert.equal(summary.phases.length, 2, 'both directions ran to the end')
  assert.deepEqual(
    summary.phases.map((p) => [p.mode, p.kills]),
    [
      ['nested', 3],
      ['flat', 3],
    ],
  )
})

// The random kill -9 harness, small (bench/crash.ts has the logic; the
// script runs it large): 20 flat tenants migrated and reverted by the real
// agent under 6 SIGKILLs, every invariant checked after each kill and at
// the end. The first kill of each direction is placed by a failpoint at a
// step that leaves a journal, so each direction cuts a move however loaded
// the machine; the others land at random moments, and the summary says
// where every kill landed (killsByStep), so a run that missed shows it.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { KILL_STEPS, runCrash } from '../../bench/crash.js'
import { tmpDir } from '../helpers/tmp.js'

void test('random kill -9: 20 tenants migrate and revert through 6 kills with every tree intact', async (t) => {
  const root = await tmpDir(t, 'layoutd-crash-')
  // A fixed seed: the choices repeat (hosts, trees, delays, the targeted steps); the moments the kills land do not quite.
  const seed = Number(process.env.CRASH_SEED ?? 20261130)
  const lines: string[] = []
  const summary = await runCrash({ hosts: 20, kills: 6, seed, root, log: (l) => lines.push(l) })
  t.diagnostic(`seed ${seed}, ${summary.seconds.toFixed(1)} s; ${JSON.stringify(summary.phases)}`)
  for (const l of lines) t.diagnostic(l)
  assert.deepEqual(summary.problems, [], `seed ${seed}:\n${lines.join('\n')}`)
  assert.equal(summary.phases.length, 2, 'both directions ran to the end')
  assert.deepEqual(
    summary.phases.map((p) => [p.mode, p.kills]),
    [
      ['nested', 3],
      ['flat', 3],
    ],
  )
  for (const p of summary.phases) {
    // Every kill is counted at one step, and some cut a move: a journal on disk, read back by the next life's recovery.
    assert.equal(
      KILL_STEPS.reduce((n, s) => n + p.killsByStep[s], 0),
      p.kills,
      `${p.mode}: every kill counted once by step: ${JSON.stringify(p.killsByStep)}`,
    )
    assert.equal(p.killsTargeted, 1, `${p.mode}: the first life is killed at a failpoint`)
    assert.ok(p.killsMidMove >= 1, `${p.mode}: no kill landed mid-move: ${JSON.stringify(p)}\n${lines.join('\n')}`)
    assert.equal(
      p.killsByStep.journaled + p.killsByStep.renamed + p.killsByStep.committed,
      p.killsMidMove,
      `${p.mode}: the steps that hold a journal are the kills mid-move`,
    )
  }
})

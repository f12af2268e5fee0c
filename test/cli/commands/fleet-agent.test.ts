// `layoutd fleet status --wait` with a real agent publishing (design §7.3):
// under a nested intent with the isolation gate shut, every flat row is
// refused and nothing will move until a person opens the gate, so --wait
// returns at once, naming the box and why, instead of waiting out its timeout.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { fleetCommand } from '../../../src/cli/commands/fleet.js'
import { DirDeployStore } from '../../../src/infra/deploy-dir.js'
import { addFlat, agentBox, recordIntent } from '../../helpers/agent.js'
import { sink } from '../../helpers/sink.js'
import { until } from '../../helpers/until.js'

void test('a real agent refused by a shut gate: fleet status --wait says the box needs a person, at once', async (t) => {
  const b = await agentBox(t, { probe: 'ready: false\n' })
  await addFlat(b, 'a.example.com')
  await addFlat(b, 'b.example.com')
  await recordIntent(b, 'nested')
  await b.agent.start()
  const reader = new DirDeployStore(b.config.deploymentDir)
  await until('the summary says what the run refused', async () => {
    const [s] = await reader.listBoxes(AbortSignal.timeout(5000))
    return s?.leg.withheld?.refused === 2 && !s.leg.running && !s.leg.pending
  })
  const out = sink()
  const err = sink()
  const start = Date.now()
  const code = await fleetCommand(['status', '--wait', '--timeout', '600'], {
    config: b.config,
    store: reader,
    stdout: out.stream,
    stderr: err.stream,
    everyMs: 50,
  })
  assert.ok(Date.now() - start < 10_000, 'not its whole timeout')
  assert.equal(code, 1, out.text())
  assert.match(err.text(), /box kass-1 needs a person: 2 refused/)
  assert.match(out.text(), /^kass-1 +\S+ +nested +needs you +0 +2 +0 +0 +0 +2 /m)
})

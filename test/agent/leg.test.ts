// The agent's leg through a real agent: what a run leaves in the report
// and in the row gauges.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test } from 'node:test'
import { flatPaths } from '../../src/domain/paths.js'
import { addFlat, agentBox, recordIntent } from '../helpers/agent.js'
import { until } from '../helpers/until.js'

void test('a host held for a second name on one of its files is counted in held_hosts and reported fenced', async (t) => {
  const b = await agentBox(t, { env: { CARLOS_LAYOUT_DEFAULT: 'flat' } })
  await addFlat(b, 'a.example.com')
  await addFlat(b, 'b.example.com')
  const dir = flatPaths(b.config, 'a.example.com').dir
  await fs.link(path.join(dir, 'host.txt'), path.join(dir, 'second-name'))
  await b.agent.start()
  await until('the isolation gate to open', () => b.agent.readiness().nested.allowed)
  await recordIntent(b, 'nested', { id: '20261130T090000.000Z-eeeeee' })
  const run = await b.agent.converge(10_000)
  assert.ok(run)
  assert.equal(run.results.find((r) => r.host === 'a.example.com')?.outcome, 'held')
  assert.equal(b.agent.report().rows['a.example.com']?.layout, 'fenced')
  assert.equal(b.agent.report().rows['b.example.com']?.layout, 'nested')
  // The row gauges follow a run's end from a report built in slices, a few turns after the run (design §6.2).
  await until('held_hosts to count it', async () => /^carlos_layout_held_hosts 1$/m.test(await b.metrics.text()))
})

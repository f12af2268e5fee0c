// The row gauges read what the agent knows at the scrape (design §9), not
// what the last run left: a row the CLI adds (its own connection to the
// registry) shows at the next scrape on an idle box with no retry timer.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import { test } from 'node:test'
import { Registry } from '../../src/infra/registry.js'
import { addFlat, agentBox } from '../helpers/agent.js'
import { until } from '../helpers/until.js'

async function gauge(b: { metrics: { text(): Promise<string> } }, series: string): Promise<number> {
  const text = await b.metrics.text()
  const line = text.split('\n').find((l) => l.startsWith(`carlos_layout_${series} `))
  return Number(line?.split(' ')[1] ?? 'NaN')
}

void test('a foreign row added by another connection shows in rows at the next scrape, with no run in between', async (t) => {
  const b = await agentBox(t, { env: { CARLOS_LAYOUT_DEFAULT: 'flat' } })
  await addFlat(b, 'a.example.com')
  await b.agent.start()
  await until('the first run to end, leaving no retry', () => {
    const leg = b.agent.legState()
    return leg.lastRun !== null && !leg.running && !leg.pending && leg.retryAt === null ? true : undefined
  })
  assert.equal(await gauge(b, 'rows{layout="flat"}'), 1)
  assert.equal(await gauge(b, 'rows{layout="foreign"}'), 0)
  const runs = b.agent.legState().lastRun?.startedAt
  // As `layoutd routes add` does: its own connection, beside the agent's.
  const cli = Registry.open(b.config.dataDir)
  t.after(() => cli.close())
  cli.add({ host: 'f.example.com', kind: 'instance', hibernate: true, dir: '/srv/f', socket: '/run/f.sock', db: '' })
  assert.equal(await gauge(b, 'rows{layout="foreign"}'), 1, 'the next scrape counts it')
  assert.equal(await gauge(b, 'held_hosts'), 0)
  assert.equal(await gauge(b, 'deferred_hosts'), 0)
  cli.remove('f.example.com')
  assert.equal(await gauge(b, 'rows{layout="foreign"}'), 0, 'and its removal')
  assert.equal(b.agent.legState().lastRun?.startedAt, runs, 'no run of the leg in between')
})

void test('a box with no activator armed counts its rows at the scrape too', async (t) => {
  const b = await agentBox(t, { env: { CARLOS_ACTIVATOR: 'none' } })
  await b.agent.start()
  assert.equal(await gauge(b, 'rows{layout="flat"}'), 0)
  await addFlat(b, 'a.example.com')
  assert.equal(await gauge(b, 'rows{layout="flat"}'), 1)
})

void test('default_blocked{by="gate"} is 1 while the nested default waits on a shut gate, and 0 once it is in force', async (t) => {
  const b = await agentBox(t, { probe: 'ready: false\n', env: { CARLOS_PROBE_EVERY: '50ms' } })
  await b.agent.start()
  await until('the default to be blocked by the gate', async () =>
    (await gauge(b, 'default_blocked{by="gate"}')) === 1 ? true : undefined,
  )
  assert.equal(await gauge(b, 'default_blocked{by="floor"}'), 0)
  assert.equal(await gauge(b, 'default_applied'), 0)
  await fs.writeFile(b.probe, 'ready: true\n')
  await until('the default to be in force', async () => ((await gauge(b, 'default_applied')) === 1 ? true : undefined))
  assert.equal(await gauge(b, 'default_blocked{by="gate"}'), 0)
})

void test('default_blocked says the floor, not the gate, on a build below the floor whose gate is shut too', async (t) => {
  const b = await agentBox(t, { probe: 'ready: false\n', env: { CARLOS_PROBE_EVERY: '50ms', CARLOS_BUILD: 'v0.24.9' } })
  await b.agent.start()
  await until('the default to be blocked by the floor', async () =>
    (await gauge(b, 'default_blocked{by="floor"}')) === 1 ? true : undefined,
  )
  assert.equal(await gauge(b, 'default_blocked{by="gate"}'), 0, 'the gate is not what holds nested back')
  assert.equal(await gauge(b, 'gate_check{check="probe"}'), 0, 'though it is shut')
})

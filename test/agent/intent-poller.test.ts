// The intent poller through a real agent: a new intent is a serial move
// that converges the box without a restart, and an unreadable one moves
// nothing. Its read rules on their own are in intent-poller-reads.test.ts.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test } from 'node:test'
import { nestedPaths } from '../../src/domain/paths.js'
import { addFlat, agentBox, recordIntent } from '../helpers/agent.js'
import { FakeLogger } from '../domain/fakes.js'
import { until } from '../helpers/until.js'

void test('a newly recorded intent converges the box without a restart', async (t) => {
  const b = await agentBox(t, { env: { CARLOS_LAYOUT_DEFAULT: 'flat' } })
  await addFlat(b, 'a.example.com')
  await addFlat(b, 'b.example.com')
  await b.agent.start()
  await until('the first run', () => b.agent.legState().lastRun?.finishedAt != null)
  assert.equal(b.agent.report().mode, 'none')
  assert.equal(b.agent.report().rows['a.example.com']?.layout, 'flat')

  await recordIntent(b, 'nested', { id: '20261130T090000.000Z-aaaaaa', box: 'kass-1' })
  await until('the poller to converge nested', () => b.agent.report().mode === 'nested' && !b.agent.legState().running)
  const report = b.agent.report()
  assert.equal(report.rows['a.example.com']?.layout, 'nested')
  assert.equal(report.rows['b.example.com']?.layout, 'nested')
  assert.equal(
    await fs.readFile(path.join(nestedPaths(b.config, 'a.example.com').dir, 'host.txt'), 'utf8'),
    'a.example.com',
  )

  // An intent for another box is not this box's: nothing changes.
  await recordIntent(b, 'flat', { id: '20261130T090001.000Z-bbbbbb', box: 'kass-2' })
  const run = await b.agent.converge(10_000)
  assert.ok(run)
  assert.equal(b.agent.report().mode, 'nested')
  assert.ok(run.results.every((r) => r.outcome === 'unchanged'))
})

void test('a malformed intent record makes the intent unreadable: nothing moves', async (t) => {
  const b = await agentBox(t, { env: { CARLOS_LAYOUT_DEFAULT: 'flat' } })
  await addFlat(b, 'a.example.com')
  await b.agent.start()
  const dir = path.join(b.config.deploymentDir, 'layout', 'intents')
  await fs.mkdir(dir, { recursive: true })
  await fs.writeFile(
    path.join(dir, '20261130T090000.000Z-cccccc.json'),
    '{"id": "20261130T090000.000Z-cccccc", "mode": ',
  )
  const run = await b.agent.converge(10_000)
  assert.ok(run)
  assert.deepEqual(run.results, [])
  const report = b.agent.report()
  assert.equal(report.mode, 'unreadable')
  assert.equal(report.rows['a.example.com']?.layout, 'flat')
  assert.ok(
    report.warnings.some((w) => w.includes('cannot be read')),
    report.warnings.join('; '),
  )
})

void test('the summary the agent publishes says whether it can stop an awake instance (CARLOS_ACTIVATOR_URL set)', async (t) => {
  const published = async (env: Record<string, string>) => {
    const b = await agentBox(t, { env: { CARLOS_LAYOUT_DEFAULT: 'flat', ...env } })
    await b.agent.start()
    await until(
      'the summary published',
      async () => ((await b.store.listBoxes?.(AbortSignal.timeout(5_000))) ?? []).length > 0,
    )
    const [summary] = (await b.store.listBoxes?.(AbortSignal.timeout(5_000))) ?? []
    await b.close()
    return summary
  }
  assert.equal((await published({}))?.canStopAwake, false)
  assert.equal((await published({ CARLOS_ACTIVATOR_URL: 'http://127.0.0.1:9/' }))?.canStopAwake, true)
})

void test('start-up with an intent recorded and no journal logs that there was nothing to recover, not "intent none"', async (t) => {
  const logger = new FakeLogger()
  const b = await agentBox(t, { logger })
  await recordIntent(b, 'nested', { id: '20261130T090000.000Z-aaaaaa', box: 'kass-1' })
  await b.agent.start()
  await until('ready', () => b.agent.readiness().ready)
  const line = logger.lines.find((l) => l.msg.startsWith('layout: start-up recovery done'))
  assert.equal(
    line?.msg,
    'layout: start-up recovery done: nothing to recover (no journal, no hold marker; the first run reads the intent)',
  )
  // Its fields say so too: no `intent: "none"` for a log query to read as nothing recorded.
  assert.equal(line?.fields.intent, undefined)
  assert.equal(line?.fields.intentRead, false)
})

for (const how of ['removed', 'emptied'] as const) {
  void test(`a deploy directory ${how} after the box read its flat intent is unreadable, not "none": the nested default does not move the box`, async (t) => {
    const b = await agentBox(t)
    await addFlat(b, 'a.example.com')
    await recordIntent(b, 'flat', { box: 'kass-1' })
    await b.agent.start()
    await until('the first run', () => b.agent.legState().lastRun?.finishedAt != null)
    assert.equal(b.agent.report().mode, 'flat')

    const intents = path.join(b.config.deploymentDir, 'layout', 'intents')
    if (how === 'removed') {
      // Renamed away first, in one step: the agent renews its summary under it meanwhile, which a recursive
      // removal could race (ENOTEMPTY).
      const gone = `${b.config.deploymentDir}.gone`
      await fs.rename(b.config.deploymentDir, gone)
      await fs.rm(gone, { recursive: true })
    } else for (const name of await fs.readdir(intents)) await fs.rm(path.join(intents, name))
    await until('the poller to read the store lost', () => b.agent.report().mode === 'unreadable')
    const run = await b.agent.converge(10_000)
    assert.ok(run)
    assert.deepEqual(run.results, [])
    const report = b.agent.report()
    assert.equal(report.mode, 'unreadable')
    assert.equal(report.rows['a.example.com']?.layout, 'flat')
    const code = how === 'removed' ? 'deploy_store_vanished' : 'deploy_store_emptied'
    assert.ok(
      report.warnings.some((w) => w.includes(code)),
      report.warnings.join('; '),
    )
  })
}

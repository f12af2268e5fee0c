import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Metrics } from '../../src/metrics/metrics.js'
import { ended, spawnGroup } from '../helpers/child.js'
import { build, HOST } from '../helpers/fake-agent.js'

const NAMES = [
  'rows',
  'intent_mode',
  'default_applied',
  'leg_runs_total',
  'leg_run_seconds',
  'leg_running',
  'moves_total',
  'move_seconds',
  'deferred_hosts',
  'held_hosts',
  'intent_reads_total',
  'wake_claims_total',
  'recovered_journals_total',
  'http_request_duration_seconds',
].map((n) => `carlos_layout_${n}`)

async function promtoolCheck(text: string): Promise<{ code: number | null; output: string }> {
  const child = spawnGroup('promtool', ['check', 'metrics'], { stdio: ['pipe', 'pipe', 'pipe'] })
  let output = ''
  child.stdout?.on('data', (d: Buffer) => (output += d.toString()))
  child.stderr?.on('data', (d: Buffer) => (output += d.toString()))
  // A child that failed to start has no stdin to end.
  child.stdin?.on('error', () => undefined).end(text)
  const { code } = await ended(child, 'promtool check metrics').catch((err: NodeJS.ErrnoException) => {
    throw err.code === 'ENOENT' ? new Error('promtool is not on PATH: install it (Prometheus) to run this test') : err
  })
  return { code, output }
}

function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `))
  return line === undefined ? undefined : Number(line.slice(series.length + 1))
}

void test('GET /metrics serves every metric of design §9 with the registry content type', async (t) => {
  const { app } = await build(t)
  const res = await app.inject({ method: 'GET', url: '/metrics' })
  assert.equal(res.statusCode, 200)
  assert.match(String(res.headers['content-type']), /^text\/plain; version=0\.0\.4/)
  for (const name of NAMES) assert.match(res.body, new RegExp(`^# TYPE ${name} `, 'm'), name)
  assert.match(res.body, /^process_cpu_seconds_total /m, 'default process metrics')
})

void test('the HTTP histogram is labelled by route pattern, "unmatched" for 404s, and no label carries a hostname', async (t) => {
  const { app, anonymous, metrics } = await build(t)
  assert.equal((await app.inject({ method: 'GET', url: '/layout/status' })).statusCode, 200)
  assert.equal((await app.inject({ method: 'GET', url: `/nowhere/${HOST}` })).statusCode, 404)
  assert.equal(
    (await anonymous({ method: 'POST', url: '/layout/converge', remoteAddress: '192.0.2.1' })).statusCode,
    401,
  )
  const text = await metrics.text()
  assert.equal(
    sample(text, 'carlos_layout_http_request_duration_seconds_count{method="GET",route="/layout/status",status="200"}'),
    1,
  )
  assert.equal(
    sample(text, 'carlos_layout_http_request_duration_seconds_count{method="GET",route="unmatched",status="404"}'),
    1,
  )
  assert.equal(
    sample(
      text,
      'carlos_layout_http_request_duration_seconds_count{method="POST",route="/layout/converge",status="401"}',
    ),
    1,
  )
  assert.ok(!text.includes('example.com'), 'no hostname anywhere in the exposition')
  assert.doesNotMatch(text, /\{[^}]*\bhost=/, 'no label named host')
})

void test('the agent-facing methods set the series they name', async () => {
  const m = new Metrics()
  m.setRows({ nested: 3, flat: 1 })
  m.setIntentMode('nested')
  m.setDefaultApplied(true)
  m.setLegRunning(true)
  m.legRun(2.5)
  m.observeMove('nested', 'moved', 0.2)
  m.observeMove('nested', 'deferred')
  m.setDeferredHosts(4)
  m.setHeldHosts(1)
  m.intentRead('unreadable')
  m.wakeClaim('fenced')
  m.recoveredJournal('rolled_back')
  const text = await m.text()
  const expect: Array<[string, number]> = [
    ['carlos_layout_rows{layout="nested"}', 3],
    ['carlos_layout_rows{layout="flat"}', 1],
    ['carlos_layout_rows{layout="fenced"}', 0],
    ['carlos_layout_intent_mode{mode="nested"}', 1],
    ['carlos_layout_intent_mode{mode="flat"}', 0],
    ['carlos_layout_intent_mode{mode="unmanaged"}', 0],
    ['carlos_layout_default_applied', 1],
    ['carlos_layout_leg_running', 1],
    ['carlos_layout_leg_runs_total', 1],
    ['carlos_layout_leg_run_seconds_sum', 2.5],
    ['carlos_layout_moves_total{to="nested",outcome="moved"}', 1],
    ['carlos_layout_moves_total{to="nested",outcome="deferred"}', 1],
    ['carlos_layout_moves_total{to="flat",outcome="moved"}', 0],
    ['carlos_layout_move_seconds_count', 1],
    ['carlos_layout_deferred_hosts', 4],
    ['carlos_layout_held_hosts', 1],
    ['carlos_layout_intent_reads_total{result="unreadable"}', 1],
    ['carlos_layout_intent_reads_total{result="recorded"}', 0],
    ['carlos_layout_wake_claims_total{result="fenced"}', 1],
    ['carlos_layout_recovered_journals_total{action="rolled_back"}', 1],
  ]
  for (const [series, value] of expect) assert.equal(sample(text, series), value, series)

  m.setIntentMode('unreadable')
  const after = await m.text()
  assert.equal(sample(after, 'carlos_layout_intent_mode{mode="nested"}'), 0)
  assert.equal(sample(after, 'carlos_layout_intent_mode{mode="unreadable"}'), 1)
})

void test('two Metrics never share a series: each owns its registry', async () => {
  const a = new Metrics()
  const b = new Metrics()
  a.legRun(1)
  assert.equal(sample(await a.text(), 'carlos_layout_leg_runs_total'), 1)
  assert.equal(sample(await b.text(), 'carlos_layout_leg_runs_total'), 0)
})

void test('the exposition passes promtool check metrics', async (t) => {
  const { app } = await build(t)
  await app.inject({ method: 'GET', url: '/livez' })
  const res = await app.inject({ method: 'GET', url: '/metrics' })
  const { code, output } = await promtoolCheck(res.body)
  assert.equal(code, 0, `promtool check metrics:\n${output}`)
})

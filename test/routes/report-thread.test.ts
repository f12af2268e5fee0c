// The status report and the console's rows made on the report thread
// (design §6.2) by a real agent: the loop's thread builds no report for
// them, and what the thread sends is the very report the agent itself
// judges, in the bytes the status route's schema makes, through a
// converge that fences, moves and commits.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test } from 'node:test'
import Fastify from 'fastify'
import type { AgentApi } from '../../src/agent-api.js'
import { buildApp } from '../../src/app.js'
import { createLogger } from '../../src/logger.js'
import type { LayoutReport, Route } from '../../src/domain/schemas.js'
import type { ReportInputs, SummaryAsk } from '../../src/report/report-feed.js'
import { why } from '../../src/domain/reason-codes.js'
import { ReportThread } from '../../src/routes/report-thread.js'
import { StatusBody } from '../../src/report/report-json.js'
import type { BoxSummary } from '../../src/domain/box-summary.js'
import { addFlat, agentBox, recordIntent } from '../helpers/agent.js'
import { until } from '../helpers/until.js'

/** The bytes the status route's schema makes of report in one piece. */
async function schemaBytes(report: LayoutReport): Promise<string> {
  const app = Fastify()
  app.get('/', { schema: { response: { 200: StatusBody } } }, () => report)
  const res = await app.inject({ method: 'GET', url: '/' })
  await app.close()
  return res.body
}

void test('the status report and the console rows come from the report thread, as the agent judges them, through a converge', async (t) => {
  const box = await agentBox(t)
  const hosts = Array.from({ length: 600 }, (_, i) => `t${String(i).padStart(3, '0')}.example.com`)
  for (const host of hosts) await addFlat(box, host)
  await recordIntent(box, 'flat')
  await box.agent.start()
  const settled = (): boolean => {
    const leg = box.agent.legState()
    return box.agent.readiness().ready && !leg.running && !leg.pending && leg.lastRun?.finishedAt != null
  }
  await until('the agent ready and its first run over', settled, 120_000)

  // The app again, over the agent with its report builds counted: a route that
  // served from the report thread asked the loop for no report.
  let loopBuilds = 0
  const counted = new Proxy(box.agent, {
    get(target, key, receiver) {
      if (key === 'reportSoon' || key === 'report') loopBuilds++
      const value: unknown = Reflect.get(target, key, receiver)
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value
    },
  }) as AgentApi
  const app = await buildApp({ api: counted, metrics: box.metrics, logger: createLogger('silent'), token: '' })
  t.after(() => app.close())

  const idle = await app.inject({ method: 'GET', url: '/layout/status' })
  assert.equal(idle.statusCode, 200)
  assert.equal(loopBuilds, 0, 'the loop built no report for the status route')
  assert.ok(
    idle.body === (await schemaBytes(box.agent.report())),
    'the bytes the schema makes of the agent’s own report',
  )

  // Through a converge: each answer is a report of its own version, the
  // rows fenced, moved or not yet reached as the agent had them then.
  await recordIntent(box, 'nested')
  box.agent.kick()
  const seen = new Set<string>()
  let polls = 0
  while (box.agent.legState().running || polls === 0) {
    const res = await app.inject({ method: 'GET', url: '/layout/status' })
    assert.equal(res.statusCode, 200)
    const report = res.json<LayoutReport>()
    assert.equal(Object.keys(report.rows).length, hosts.length)
    for (const r of Object.values(report.rows)) seen.add(r.layout)
    polls++
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
  await until('the converge to end', settled, 60_000)
  const done = await app.inject({ method: 'GET', url: '/layout/status' })
  const report = done.json<LayoutReport>()
  assert.ok(
    Object.values(report.rows).every((r) => r.layout === 'nested'),
    'every row nested once the run ended',
  )
  assert.ok(done.body === (await schemaBytes(box.agent.report())), 'the bytes of the agent’s own report')
  assert.ok(seen.has('flat') || seen.has('fenced'), `polls during the run saw it under way: ${[...seen].join(', ')}`)

  // The console page: its rows drawn on the thread, with the tag the status route answers.
  const page = await app.inject({ method: 'GET', url: '/?q=t000' })
  assert.equal(page.statusCode, 200)
  assert.match(page.body, /t000\.example\.com/)
  const tag = String(done.headers.etag).replaceAll('"', '')
  assert.ok(page.body.includes(tag), `the page carries the report’s tag ${tag}`)
  assert.equal(loopBuilds, 0, 'nor for the console')
})

void test('the row gauges and the box summary are counted on the report thread, not on the loop, through a converge', async (t) => {
  const box = await agentBox(t)
  const hosts = Array.from({ length: 300 }, (_, i) => `g${String(i).padStart(3, '0')}.example.com`)
  for (const host of hosts) await addFlat(box, host)
  await recordIntent(box, 'flat')
  const thread = new ReportThread()
  t.after(() => thread.close())
  const asked: Array<SummaryAsk | null> = []
  box.agent.useReportThread({
    figures: (inputs, ask) => {
      asked.push(ask)
      return thread.figures(inputs, ask)
    },
  })
  await box.agent.start()
  const settled = (): boolean => {
    const leg = box.agent.legState()
    return box.agent.readiness().ready && !leg.running && !leg.pending && leg.lastRun?.finishedAt != null
  }
  await until('the agent ready and its first run over', settled, 120_000)
  const builds = box.agent.reportBuilds

  await recordIntent(box, 'nested')
  const run = await box.agent.converge(60_000)
  assert.ok(run !== null && run.results.filter((r) => r.outcome === 'moved').length === hosts.length)
  const summaryFile = path.join(box.config.deploymentDir, 'layout', 'boxes', 'kass-1.json')
  const summary = async (): Promise<BoxSummary | null> =>
    JSON.parse(await fs.readFile(summaryFile, 'utf8').catch(() => 'null')) as BoxSummary | null
  await until('the summary of the converged box published', async () => (await summary())?.converged === true, 120_000)
  assert.deepEqual((await summary())?.counts, { nested: hosts.length })
  const text = await box.metrics.text()
  assert.match(text, new RegExp(`carlos_layout_rows\\{layout="nested"\\} ${hosts.length}\\n`))
  assert.match(text, /carlos_layout_held_hosts 0\n/)
  assert.equal(box.agent.reportBuilds, builds, 'the loop built no report for the gauges, the scrape or the summary')
  assert.ok(
    asked.some((ask) => ask?.intent?.mode === 'nested'),
    'the summary of the nested intent was counted on the thread',
  )
  assert.ok(asked.includes(null), 'the row gauges were counted on the thread')
})

void test('a report thread idle for its while ends, and the next ask starts another that is sent everything', async (t) => {
  const reports = new ReportThread({ idleMs: 50 })
  t.after(() => reports.close())
  const routes: Route[] = ['a.example.com', 'b.example.com'].map((host) => ({
    host,
    kind: 'instance',
    socket: `/data/run/${host}.sock`,
    dir: `/data/apps/${host}`,
    db: '',
    hibernate: true,
  }))
  let version = 0
  const inputs = (): ReportInputs => ({
    tag: `t.${++version}`,
    box: 'kass-1',
    dirs: { dataDir: '/data', runDir: '/data/run' },
    routes,
    facts: { fenced: [['b.example.com', why('in_flight', 'in flight')]], held: [], notes: [] },
    intent: { mode: 'nested', default: { applied: false, blocked: '', blockedBy: '' }, unreadableWhy: '' },
    leg: () => ({ running: false, pending: false, retryAt: null, run: null }),
    withheld: new Map(),
    gate: null,
  })
  const rows = async (): Promise<Record<string, { layout: string }>> =>
    (JSON.parse((await reports.status(inputs())).toString()) as LayoutReport).rows
  assert.deepEqual(
    Object.values(await rows()).map((r) => r.layout),
    ['flat', 'fenced'],
  )
  assert.equal(reports.running, true)
  await until('the idle thread to end', () => !reports.running, 5000)
  // The same rows, held by nobody now: sent whole to the new thread.
  assert.deepEqual(
    Object.values(await rows()).map((r) => r.layout),
    ['flat', 'fenced'],
  )
  assert.equal(reports.running, true)
})

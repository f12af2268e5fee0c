// Nothing is logged per request (design §9 "Logs"): the activator asks /ready,
// /ready/:host and the wake claims many times a second and Prometheus scrapes
// /metrics, so a line each would drown what an operator alerts on. A 5xx is
// the exception: it is logged with its request, since nothing else says why.
import assert from 'node:assert/strict'
import { Writable } from 'node:stream'
import { test } from 'node:test'
import { buildApp } from '../../src/app.js'
import { createLogger } from '../../src/logger.js'
import { Metrics } from '../../src/metrics/metrics.js'
import { authorise, TEST_TOKEN } from '../helpers/authorised.js'
import { build, FakeAgent, HOST } from '../helpers/fake-agent.js'

void test('the hot routes log nothing; an internal error logs one line at error', async (t) => {
  const { app, agent, logs } = await build(t)
  agent.readinessValue = { ...agent.readinessValue, ready: true, phase: 'ready' }
  agent.wakeAnswers.set(HOST, { granted: true, grant: { host: HOST, layout: 'flat', dir: '/d', socket: '/s', db: '' } })
  const asks = [
    { method: 'GET', url: '/ready' },
    { method: 'GET', url: `/ready/${HOST}` },
    { method: 'POST', url: `/wakes/${HOST}` },
    { method: 'DELETE', url: `/wakes/${HOST}` },
    { method: 'GET', url: '/wakes' },
    { method: 'GET', url: '/metrics' },
    { method: 'GET', url: '/livez' },
    { method: 'GET', url: '/layout/status' },
  ] as const
  for (let i = 0; i < 3; i++) {
    for (const ask of asks) assert.ok((await app.inject(ask)).statusCode < 500, `${ask.method} ${ask.url}`)
  }
  assert.deepEqual(logs, [])
  agent.reportError = new TypeError('a bug')
  assert.equal((await app.inject({ method: 'GET', url: '/layout/status' })).statusCode, 500)
  assert.equal(logs.length, 1, logs.join(''))
  assert.equal((JSON.parse(logs[0] ?? '{}') as { level?: number }).level, 50)
})

void test('a request that logs nothing gets no child logger; the first line it logs still carries its request id', async (t) => {
  const lines: string[] = []
  const logger = createLogger(
    'info',
    new Writable({ write: (chunk: Buffer, _enc, done) => void (lines.push(chunk.toString('utf8')), done()) }),
  )
  const makeChild = logger.child.bind(logger)
  let children = 0
  logger.child = ((...args: Parameters<typeof logger.child>) => {
    children++
    return makeChild(...args)
  }) as typeof logger.child
  const agent = new FakeAgent()
  agent.readinessValue = { ...agent.readinessValue, ready: true, phase: 'ready' }
  agent.wakeAnswers.set(HOST, { granted: true, grant: { host: HOST, layout: 'flat', dir: '/d', socket: '/s', db: '' } })
  const app = await buildApp({ api: agent, metrics: new Metrics(), logger, token: TEST_TOKEN })
  authorise(app)
  t.after(() => app.close())
  await app.ready()
  children = 0 // what the app made for itself while it was built
  for (let i = 0; i < 5; i++) {
    for (const url of ['/ready', `/ready/${HOST}`, '/layout/status'])
      assert.equal((await app.inject({ method: 'GET', url })).statusCode, 200, url)
    assert.equal((await app.inject({ method: 'POST', url: `/wakes/${HOST}` })).statusCode, 200)
  }
  assert.equal(children, 0, 'a child logger was made for a request that logged nothing')
  assert.deepEqual(lines, [])
  // A refused body is logged (at info), under its request's id.
  const bad = await app.inject({
    method: 'PUT',
    url: '/wakes',
    headers: { 'content-type': 'application/json' },
    payload: '{',
  })
  assert.equal(bad.statusCode, 400)
  assert.equal(children, 1)
  assert.equal(lines.length, 1, lines.join(''))
  const line = JSON.parse(lines[0] ?? '{}') as { reqId?: unknown; msg?: unknown; svc?: unknown }
  assert.equal(line.msg, 'request refused')
  assert.equal(line.svc, 'layoutd')
  assert.match(String(line.reqId), /^req-/)
})

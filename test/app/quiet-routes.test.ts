// Nothing is logged per request (design §9 "Logs"): the activator asks /ready,
// /ready/:host and the wake claims many times a second and Prometheus scrapes
// /metrics, so a line each would drown what an operator alerts on. A 5xx is
// the exception: it is logged with its request, since nothing else says why.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { build, HOST } from '../helpers/fake-agent.js'

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

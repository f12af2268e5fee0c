import assert from 'node:assert/strict'
import { test } from 'node:test'
import { build } from '../helpers/fake-agent.js'

void test('GET /ready answers 503 with the phase and checks until the agent is ready, then 200', async (t) => {
  const { app, agent } = await build(t)
  const notYet = await app.inject({ method: 'GET', url: '/ready' })
  assert.equal(notYet.statusCode, 503)
  assert.deepEqual(notYet.json(), agent.readinessValue)

  agent.readinessValue = {
    ready: true,
    phase: 'ready',
    checks: [
      { name: 'registry', ok: true, detail: '' },
      { name: 'recovery', ok: true, detail: '' },
    ],
    nested: { allowed: true, reason: '' },
  }
  const ready = await app.inject({ method: 'GET', url: '/ready' })
  assert.equal(ready.statusCode, 200)
  assert.deepEqual(ready.json(), agent.readinessValue)
})

void test('GET /ready?verbose prints Kubernetes-style lines with the same status', async (t) => {
  const { app, agent } = await build(t)
  const failed = await app.inject({ method: 'GET', url: '/ready?verbose' })
  assert.equal(failed.statusCode, 503)
  assert.match(String(failed.headers['content-type']), /^text\/plain/)
  assert.equal(failed.body, '[+]registry ok\n[-]recovery failed: recovering 2 journals\nreadyz check failed\n')

  agent.readinessValue = {
    ...agent.readinessValue,
    ready: true,
    phase: 'ready',
    checks: [{ name: 'recovery', ok: true, detail: '' }],
  }
  const passed = await app.inject({ method: 'GET', url: '/ready?verbose=1' })
  assert.equal(passed.statusCode, 200)
  assert.equal(passed.body, '[+]recovery ok\nreadyz check passed\n')
})

void test('GET /livez answers 200 whatever the phase', async (t) => {
  const { app } = await build(t)
  const res = await app.inject({ method: 'GET', url: '/livez' })
  assert.equal(res.statusCode, 200)
  assert.deepEqual(res.json(), { status: 'ok' })
})

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { isLoopback } from '../../src/routes/auth.js'
import { build, errorOf } from '../helpers/fake-agent.js'

const TOKEN = 'tok-5f0c9a1e7b3d'

void test('every change needs Authorization: Bearer <token>, from loopback as from anywhere', async (t) => {
  const { app, anonymous, agent, logs } = await build(t, { token: TOKEN })

  for (const remoteAddress of ['127.0.0.1', '::1', '::ffff:127.0.0.1', '10.0.0.7']) {
    const none = await anonymous({ method: 'POST', url: '/layout/converge', remoteAddress })
    assert.equal(none.statusCode, 401, remoteAddress)
    assert.equal(errorOf(none.body).code, 'unauthorized')
    assert.match(String(none.headers['www-authenticate']), /^Bearer/)
  }
  for (const [method, url, payload] of [
    ['PUT', '/wakes', { awake: [] }],
    ['POST', '/wakes/a.example.com', undefined],
    ['DELETE', '/wakes/a.example.com', undefined],
  ] as const) {
    const res = await anonymous({ method, url, ...(payload === undefined ? {} : { payload }) })
    assert.equal(res.statusCode, 401, `${method} ${url}`)
  }

  const wrong = await anonymous({
    method: 'POST',
    url: '/layout/converge',
    headers: { authorization: 'Bearer tok-5f0c9a1e7b3e' },
  })
  assert.equal(wrong.statusCode, 401)
  const basic = await anonymous({
    method: 'POST',
    url: '/layout/converge',
    headers: { authorization: `Basic ${TOKEN}` },
  })
  assert.equal(basic.statusCode, 401)
  assert.equal(agent.kicks, 0, 'no refused request reached the agent')
  assert.deepEqual(agent.wakes().awake, [], 'no refused request changed a claim')

  // A peer beyond loopback is fine once it carries the token.
  const ok = await anonymous({
    method: 'POST',
    url: '/layout/converge',
    remoteAddress: '10.0.0.7',
    headers: { authorization: `Bearer ${TOKEN}` },
  })
  assert.equal(ok.statusCode, 202)
  assert.equal(agent.kicks, 1)
  // The test app's own inject carries it.
  assert.equal((await app.inject({ method: 'POST', url: '/layout/converge' })).statusCode, 202)

  // Reads need no token.
  assert.equal((await anonymous({ method: 'GET', url: '/layout/status', remoteAddress: '10.0.0.7' })).statusCode, 200)

  assert.ok(logs.length > 0, 'the app logged its requests')
  assert.ok(!logs.join('').includes(TOKEN), 'the token never reaches a log line')
})

void test('an app that holds no token takes no change, from loopback either', async (t) => {
  const { anonymous, agent } = await build(t, { token: '' })
  for (const remoteAddress of ['127.0.0.1', '::1', '192.0.2.10']) {
    const res = await anonymous({ method: 'POST', url: '/layout/converge', remoteAddress })
    assert.equal(res.statusCode, 403, remoteAddress)
    assert.equal(errorOf(res.body).code, 'forbidden')
  }
  assert.equal(agent.kicks, 0)

  // Reads stay open to any peer: the activator and Prometheus may be remote.
  assert.equal((await anonymous({ method: 'GET', url: '/ready', remoteAddress: '192.0.2.10' })).statusCode, 503)
})

void test('isLoopback knows loopback by address, not by name', () => {
  assert.equal(isLoopback('127.0.0.1'), true)
  assert.equal(isLoopback('127.8.9.10'), true)
  assert.equal(isLoopback('::1'), true)
  assert.equal(isLoopback('::FFFF:127.0.0.1'), true)
  assert.equal(isLoopback('::ffff:10.0.0.1'), false)
  assert.equal(isLoopback('localhost'), false)
  assert.equal(isLoopback('127.0.0.1.example.com'), false)
  assert.equal(isLoopback(undefined), false)
})

void test('GET /agent names the data root to loopback peers, and beyond loopback only with the token', async (t) => {
  const identity = { dataDir: '/data', pid: 42, startId: 'a-start', startedAt: '2026-12-03T00:00:00.000Z' }
  const { anonymous: inject } = await build(t, { token: TOKEN, identity })
  const remote = { remoteAddress: '10.0.0.9' }
  const local = await inject({ method: 'GET', url: '/agent' })
  assert.equal(local.statusCode, 200)
  assert.deepEqual(JSON.parse(local.body), identity)
  const none = await inject({ method: 'GET', url: '/agent', ...remote })
  assert.equal(none.statusCode, 401)
  assert.equal(none.body.includes('/data'), false, 'the path is not in a refusal')
  const wrong = await inject({ method: 'GET', url: '/agent', headers: { authorization: 'Bearer nope' }, ...remote })
  assert.equal(wrong.statusCode, 401)
  const right = await inject({
    method: 'GET',
    url: '/agent',
    headers: { authorization: `Bearer ${TOKEN}` },
    ...remote,
  })
  assert.equal(right.statusCode, 200)

  // No token configured: loopback only, whatever is sent.
  const open = await build(t, { token: '', identity })
  assert.equal((await open.anonymous({ method: 'GET', url: '/agent', ...remote })).statusCode, 403)
  // An app around no data root (a fake's, the schema-only one) says so.
  const bare = await build(t)
  const missing = await bare.app.inject({ method: 'GET', url: '/agent' })
  assert.equal(missing.statusCode, 404)
  assert.equal(errorOf(missing.body).code, 'not_found')
})

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { isLoopback } from '../../src/routes/auth.js'
import { build, errorOf } from '../helpers/fake-agent.js'

const TOKEN = 'tok-5f0c9a1e7b3d'

void test('with a token set, a mutation needs Authorization: Bearer <token>', async (t) => {
  const { app, agent, logs } = await build(t, { token: TOKEN })

  const none = await app.inject({ method: 'POST', url: '/layout/converge' })
  assert.equal(none.statusCode, 401)
  assert.equal(errorOf(none.body).code, 'unauthorized')
  assert.match(String(none.headers['www-authenticate']), /^Bearer/)

  const wrong = await app.inject({
    method: 'POST',
    url: '/layout/converge',
    headers: { authorization: 'Bearer tok-5f0c9a1e7b3e' },
  })
  assert.equal(wrong.statusCode, 401)
  const basic = await app.inject({
    method: 'POST',
    url: '/layout/converge',
    headers: { authorization: `Basic ${TOKEN}` },
  })
  assert.equal(basic.statusCode, 401)
  assert.equal(agent.kicks, 0, 'no refused request reached the agent')

  // A peer beyond loopback is fine once it carries the token.
  const ok = await app.inject({
    method: 'POST',
    url: '/layout/converge',
    remoteAddress: '10.0.0.7',
    headers: { authorization: `Bearer ${TOKEN}` },
  })
  assert.equal(ok.statusCode, 202)
  assert.equal(agent.kicks, 1)

  // Reads need no token.
  assert.equal((await app.inject({ method: 'GET', url: '/layout/status', remoteAddress: '10.0.0.7' })).statusCode, 200)

  assert.ok(logs.length > 0, 'the app logged its requests')
  assert.ok(!logs.join('').includes(TOKEN), 'the token never reaches a log line')
})

void test('with no token, mutations are accepted from loopback peers only', async (t) => {
  const { app, agent } = await build(t)
  const remote = await app.inject({ method: 'POST', url: '/layout/converge', remoteAddress: '192.0.2.10' })
  assert.equal(remote.statusCode, 403)
  assert.equal(errorOf(remote.body).code, 'forbidden')
  const mapped = await app.inject({ method: 'POST', url: '/layout/converge', remoteAddress: '::ffff:192.0.2.10' })
  assert.equal(mapped.statusCode, 403)
  assert.equal(agent.kicks, 0)

  for (const remoteAddress of ['127.0.0.1', '::1', '::ffff:127.0.0.1']) {
    const res = await app.inject({ method: 'POST', url: '/layout/converge', remoteAddress })
    assert.equal(res.statusCode, 202, remoteAddress)
  }
  assert.equal(agent.kicks, 3)

  // Reads stay open to any peer: the activator and Prometheus may be remote.
  assert.equal((await app.inject({ method: 'GET', url: '/ready', remoteAddress: '192.0.2.10' })).statusCode, 503)
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
  const { app } = await build(t, { token: TOKEN, identity })
  const remote = { remoteAddress: '10.0.0.9' }
  const local = await app.inject({ method: 'GET', url: '/agent' })
  assert.equal(local.statusCode, 200)
  assert.deepEqual(JSON.parse(local.body), identity)
  const none = await app.inject({ method: 'GET', url: '/agent', ...remote })
  assert.equal(none.statusCode, 401)
  assert.equal(none.body.includes('/data'), false, 'the path is not in a refusal')
  const wrong = await app.inject({ method: 'GET', url: '/agent', headers: { authorization: 'Bearer nope' }, ...remote })
  assert.equal(wrong.statusCode, 401)
  const right = await app.inject({
    method: 'GET',
    url: '/agent',
    headers: { authorization: `Bearer ${TOKEN}` },
    ...remote,
  })
  assert.equal(right.statusCode, 200)

  // No token configured: loopback only, whatever is sent.
  const open = await build(t, { identity })
  assert.equal((await open.app.inject({ method: 'GET', url: '/agent', ...remote })).statusCode, 403)
  // An app around no data root (a fake's, the schema-only one) says so.
  const bare = await build(t)
  const missing = await bare.app.inject({ method: 'GET', url: '/agent' })
  assert.equal(missing.statusCode, 404)
  assert.equal(errorOf(missing.body).code, 'not_found')
})

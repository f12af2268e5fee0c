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

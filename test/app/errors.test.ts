import assert from 'node:assert/strict'
import { test } from 'node:test'
import { build, errorOf } from '../helpers/fake-agent.js'

void test('an unknown route answers the 404 envelope naming method and path', async (t) => {
  const { app } = await build(t)
  const res = await app.inject({ method: 'GET', url: '/nope/a.example.com?secret=1' })
  assert.equal(res.statusCode, 404)
  assert.deepEqual(errorOf(res.body), { code: 'not_found', message: 'no route for GET /nope/a.example.com' })
})

void test('a URL that cannot be decoded answers the 400 envelope too', async (t) => {
  const { app } = await build(t)
  const res = await app.inject({ method: 'GET', url: '/layout/status%zz' })
  assert.equal(res.statusCode, 400)
  assert.equal(errorOf(res.body).code, 'bad_request')
})

void test('a malformed or empty JSON body answers 400 bad_request', async (t) => {
  const { app, agent } = await build(t)
  const broken = await app.inject({
    method: 'POST',
    url: '/layout/converge',
    headers: { 'content-type': 'application/json' },
    payload: '{"x":',
  })
  assert.equal(broken.statusCode, 400)
  assert.deepEqual(errorOf(broken.body), { code: 'bad_request', message: 'the request body is not valid JSON' })

  const empty = await app.inject({
    method: 'POST',
    url: '/layout/converge',
    headers: { 'content-type': 'application/json' },
    payload: '',
  })
  assert.equal(empty.statusCode, 400)
  assert.equal(errorOf(empty.body).code, 'bad_request')
  assert.equal(agent.kicks, 0)
})

void test('a body over the limit answers 413 payload_too_large', async (t) => {
  const { app, agent } = await build(t)
  const big = JSON.stringify({ pad: 'x'.repeat(64 * 1024) })
  const res = await app.inject({
    method: 'POST',
    url: '/layout/converge',
    headers: { 'content-type': 'application/json' },
    payload: big,
  })
  assert.equal(res.statusCode, 413)
  assert.deepEqual(errorOf(res.body), {
    code: 'payload_too_large',
    message: 'the request body is larger than the limit of 65536 bytes',
  })
  assert.equal(agent.kicks, 0)
})

void test('a body of a type the API does not read answers 415', async (t) => {
  const { app } = await build(t)
  const res = await app.inject({
    method: 'POST',
    url: '/layout/converge',
    headers: { 'content-type': 'application/xml' },
    payload: '<x/>',
  })
  assert.equal(res.statusCode, 415)
  const err = errorOf(res.body)
  assert.equal(err.code, 'unsupported_media_type')
  assert.match(err.message, /application\/xml/)
})

void test('a plain Error thrown by a route answers 500 "internal error" and is logged with the request, never sent', async (t) => {
  const { app, agent, logs } = await build(t)
  agent.reportError = new Error('disk on fire at /data/layout')
  const res = await app.inject({ method: 'GET', url: '/layout/status' })
  assert.equal(res.statusCode, 500)
  assert.deepEqual(JSON.parse(res.body), { error: { code: 'internal', message: 'internal error' } })
  assert.doesNotMatch(res.body, /disk on fire|stack|at /)

  const line = logs.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === 'request failed')
  assert.ok(line, `a "request failed" line in ${logs.join('')}`)
  assert.equal(line.route, '/layout/status')
  assert.equal(line.method, 'GET')
  assert.ok(typeof line.reqId === 'string' || typeof line.reqId === 'number', 'the line carries the request id')
  assert.match(JSON.stringify(line.err), /disk on fire/)
})

void test('a report the response schema refuses answers 500, not a half-serialized body', async (t) => {
  const { app, agent } = await build(t)
  // A value outside the schema's union: the serializer must fail loudly.
  agent.reportValue = { ...agent.reportValue, leg: 'broken' as unknown as typeof agent.reportValue.leg }
  const res = await app.inject({ method: 'GET', url: '/layout/status' })
  assert.equal(res.statusCode, 500)
  assert.equal(errorOf(res.body).message, 'internal error')
})

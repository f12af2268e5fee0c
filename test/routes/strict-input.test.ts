// Strict input (design §6): no body or parameter is coerced into the type
// its schema wants, sizes are bounded, every refusal is the error envelope
// with a code and changes nothing; and a host of the longest valid name
// (253 bytes) is a parameter like any other.
import assert from 'node:assert/strict'
import path from 'node:path'
import { test } from 'node:test'
import { MAX_AWAKE_SET, MAX_HOST_TEXT, type WakeGrant } from '../../src/agent-api.js'
import { routesCommand } from '../../src/cli/commands/routes/index.js'
import { addFlat, agentBox } from '../helpers/agent.js'
import { build, errorOf, HOST } from '../helpers/fake-agent.js'
import { Sink } from '../helpers/sink.js'

/** The longest valid hostname: four labels, 253 bytes. */
const LONGEST = `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(61)}`

void test('PUT /wakes refuses a body of the wrong types, never coercing it into a set: the claims stay', async (t) => {
  const { app, agent } = await build(t)
  agent.awake = new Set([HOST])
  const bodies: unknown[] = [
    { awake: 'not-a-list' },
    { awake: 12 },
    { awake: [HOST, 42] },
    { awake: [true] },
    { awake: null },
    { awake: [null] },
    { awake: [[HOST]] },
    [HOST],
    'awake',
  ]
  for (const payload of bodies) {
    const res = await app.inject({
      method: 'PUT',
      url: '/wakes',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify(payload),
    })
    assert.equal(res.statusCode, 400, JSON.stringify(payload))
    const err = errorOf(res.body)
    assert.equal(err.code, 'bad_request', JSON.stringify(payload))
    assert.match(err.message, /^body/, JSON.stringify(payload))
  }
  assert.deepEqual(agent.replaced, [], 'no malformed set reached the agent')
  assert.deepEqual((await app.inject({ method: 'GET', url: '/wakes' })).json(), { awake: [HOST], swept: true })
})

void test('PUT /wakes bounds the set: at most MAX_AWAKE_SET names, each at most MAX_HOST_TEXT bytes', async (t) => {
  const { app, agent } = await build(t)
  const tooMany = Array.from({ length: MAX_AWAKE_SET + 1 }, (_, i) => `h${i}.x`)
  const many = await app.inject({ method: 'PUT', url: '/wakes', payload: { awake: tooMany } })
  assert.equal(many.statusCode, 400)
  assert.match(errorOf(many.body).message, new RegExp(`must NOT have more than ${MAX_AWAKE_SET} items`))
  const long = await app.inject({ method: 'PUT', url: '/wakes', payload: { awake: ['x'.repeat(MAX_HOST_TEXT + 1)] } })
  assert.equal(long.statusCode, 400)
  assert.equal(errorOf(long.body).code, 'bad_request')
  assert.deepEqual(agent.replaced, [])
  assert.equal((await app.inject({ method: 'PUT', url: '/wakes', payload: { awake: [LONGEST] } })).statusCode, 200)
})

void test('on the real agent, a coerced set would have released real claims: it is refused and the claim stays', async (t) => {
  const b = await agentBox(t, { start: true, env: { CARLOS_LAYOUT_DEFAULT: 'flat' } })
  await addFlat(b, HOST)
  assert.equal((await b.app.inject({ method: 'POST', url: `/wakes/${HOST}` })).statusCode, 200)
  for (const payload of [{ awake: 'not-a-list' }, { awake: 12 }, { awake: ['b.example.com', 42] }]) {
    const res = await b.app.inject({ method: 'PUT', url: '/wakes', payload })
    assert.equal(res.statusCode, 400, JSON.stringify(payload))
  }
  assert.deepEqual((await b.app.inject({ method: 'GET', url: '/wakes' })).json(), { awake: [HOST], swept: true })
})

void test('POST /layout/converge reads its timeout as whole seconds, without coercing anything else', async (t) => {
  const { app, agent } = await build(t)
  for (const q of [
    'timeout=abc',
    'timeout=1.5',
    'timeout=0',
    'timeout=601',
    'timeout=-1',
    'timeout=',
    'timeout=5&timeout=6',
    'wait=yes',
  ]) {
    const res = await app.inject({ method: 'POST', url: `/layout/converge?wait=1&${q}` })
    assert.equal(res.statusCode, 400, q)
    assert.equal(errorOf(res.body).code, 'bad_request', q)
  }
  assert.equal(agent.kicks, 0)
  const pending = app.inject({ method: 'POST', url: '/layout/converge?wait=1&timeout=600' })
  const call = await agent.nextConverge()
  assert.equal(call.timeoutMs, 600_000)
  call.finish(null)
  assert.equal((await pending).statusCode, 504)
})

void test('a 253-byte host is added, asked about and woken; a longer one is invalid_host, not a 414', async (t) => {
  assert.equal(Buffer.byteLength(LONGEST), 253)
  const b = await agentBox(t, { env: { CARLOS_LAYOUT_DEFAULT: 'flat' } })
  // Its flat socket would be over the 107 bytes a socket can bind, so the
  // operator places it: a socket path of their own (the row wakes as it is).
  const dir = path.join(b.config.dataDir, 'apps', LONGEST)
  const socket = path.join(b.dir, 'long.sock')
  const out = new Sink()
  const err = new Sink()
  const code = await routesCommand(['add', LONGEST, '--hibernate', '--dir', dir, '--socket', socket], {
    config: b.config,
    stdout: out,
    stderr: err,
    registry: b.registry,
    mint: () => Promise.reject(new Error('mint must not be asked')),
  })
  assert.equal(code, 0, err.text)
  await b.agent.start()

  const ready = await b.app.inject({ method: 'GET', url: `/ready/${LONGEST}` })
  assert.equal(ready.statusCode, 200, ready.body)
  const wake = await b.app.inject({ method: 'POST', url: `/wakes/${LONGEST}` })
  assert.equal(wake.statusCode, 200, wake.body)
  assert.deepEqual(wake.json<WakeGrant>(), { host: LONGEST, layout: 'foreign', dir, socket, db: '' })
  assert.deepEqual((await b.app.inject({ method: 'GET', url: '/wakes' })).json(), { awake: [LONGEST], swept: true })
  assert.equal((await b.app.inject({ method: 'DELETE', url: `/wakes/${LONGEST}` })).statusCode, 204)

  for (const host of [`${LONGEST}x`, `${LONGEST}.${'e'.repeat(63)}.${'f'.repeat(63)}`]) {
    for (const [method, url] of [
      ['GET', `/ready/${host}`],
      ['POST', `/wakes/${host}`],
      ['DELETE', `/wakes/${host}`],
    ] as const) {
      const res = await b.app.inject({ method, url })
      assert.equal(res.statusCode, 400, `${method} ${host.length}: ${res.body}`)
      assert.equal(errorOf(res.body).code, 'invalid_host')
    }
  }
  // Far beyond any hostname: still the envelope, with a code.
  const huge = await b.app.inject({ method: 'GET', url: `/ready/${'a'.repeat(5000)}` })
  assert.equal(huge.statusCode, 414)
  assert.equal(errorOf(huge.body).code, 'uri_too_long')
})

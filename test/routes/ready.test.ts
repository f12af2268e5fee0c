import assert from 'node:assert/strict'
import { test } from 'node:test'
import { build, errorOf } from '../helpers/fake-agent.js'

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

void test('GET /ready?verbose is a flag by its presence: repeated, it is still verbose, never a 400', async (t) => {
  const { app } = await build(t)
  const once = await app.inject({ method: 'GET', url: '/ready?verbose' })
  for (const query of ['verbose=1&verbose=2', 'verbose&verbose', 'verbose=&verbose=0&verbose=x']) {
    const res = await app.inject({ method: 'GET', url: `/ready?${query}` })
    assert.equal(res.statusCode, 503, query)
    assert.match(String(res.headers['content-type']), /^text\/plain/, query)
    assert.equal(res.body, once.body, query)
  }
})

void test('GET /livez answers 200 whatever the phase', async (t) => {
  const { app } = await build(t)
  const res = await app.inject({ method: 'GET', url: '/livez' })
  assert.equal(res.statusCode, 200)
  assert.deepEqual(res.json(), { status: 'ok' })
})

void test('every 503 of GET /ready carries Retry-After, in seconds', async (t) => {
  const { app, agent } = await build(t)
  agent.retryAfterValue = 2
  const res = await app.inject({ method: 'GET', url: '/ready' })
  assert.equal(res.statusCode, 503)
  assert.equal(res.headers['retry-after'], '2')
  const verbose = await app.inject({ method: 'GET', url: '/ready?verbose' })
  assert.equal(verbose.headers['retry-after'], '2')
  agent.readinessValue = { ...agent.readinessValue, ready: true, phase: 'ready' }
  const ready = await app.inject({ method: 'GET', url: '/ready' })
  assert.equal(ready.statusCode, 200)
  assert.equal(ready.headers['retry-after'], undefined)
})

void test('GET /ready/:host: 503 starting with Retry-After while recovery runs; a fence is a 409 with Retry-After', async (t) => {
  const { app, agent } = await build(t)
  const host = 'a.example.com'
  agent.wakeAnswers.set(host, {
    granted: false,
    refusal: { host, layout: 'unknown', code: 'not_ready', reason: 'not ready: layoutd is recovering' },
  })
  const starting = await app.inject({ method: 'GET', url: `/ready/${host}` })
  assert.equal(starting.statusCode, 503)
  assert.equal(starting.headers['retry-after'], '3')
  assert.equal(starting.json<{ code: string }>().code, 'not_ready')

  agent.readinessValue = { ...agent.readinessValue, ready: true, phase: 'ready' }
  agent.wakeAnswers.set(host, {
    granted: false,
    refusal: { host, layout: 'fenced', code: 'fenced_for_move', reason: 'fenced: fenced for its move (generation 4)' },
  })
  const fenced = await app.inject({ method: 'GET', url: `/ready/${host}` })
  assert.equal(fenced.statusCode, 409)
  assert.equal(fenced.headers['retry-after'], '3')
  agent.wakeAnswers.set(host, {
    granted: false,
    refusal: { host, layout: 'fenced', code: 'symlink_source', reason: 'held down after a refused move' },
  })
  const held = await app.inject({ method: 'GET', url: `/ready/${host}` })
  assert.equal(held.statusCode, 409)
  assert.equal(held.headers['retry-after'], undefined, 'a hold is no retry')
})

void test('GET /ready/:host?wait= waits for a not-yet host, answers 503 with Retry-After if still not ready; a bad wait is 400', async (t) => {
  const { app, agent } = await build(t)
  agent.readinessValue = { ...agent.readinessValue, ready: true, phase: 'ready' }
  const host = 'a.example.com'
  agent.wakeAnswers.set(host, {
    granted: false,
    refusal: { host, layout: 'fenced', code: 'in_flight', reason: 'fenced: a move under way' },
  })
  const res = await app.inject({ method: 'GET', url: `/ready/${host}?wait=30s` })
  assert.equal(res.statusCode, 503)
  assert.equal(res.headers['retry-after'], '3')
  assert.deepEqual(agent.waits, [{ host, ms: 30_000 }])
  // An unknown host is never: answered at once, without a wait.
  const unknown = await app.inject({ method: 'GET', url: '/ready/nobody.example.com?wait=500ms' })
  assert.equal(unknown.statusCode, 409)
  assert.equal(agent.waits.length, 1)
  for (const wait of ['30', '0s', '61s', 'x']) {
    const bad = await app.inject({ method: 'GET', url: `/ready/${host}?wait=${wait}` })
    assert.equal(bad.statusCode, 400, wait)
    assert.match(bad.body, /querystring\/wait/)
  }
})

void test('GET /ready/:host?wait= reads durations as the configuration does, 500ms to 60s; a bound refused names itself', async (t) => {
  const { app, agent } = await build(t)
  agent.readinessValue = { ...agent.readinessValue, ready: true, phase: 'ready' }
  const host = 'a.example.com'
  agent.wakeAnswers.set(host, {
    granted: false,
    refusal: { host, layout: 'fenced', code: 'in_flight', reason: 'fenced: a move under way' },
  })
  const ready = 'ready.example.com'
  agent.wakeAnswers.set(ready, {
    granted: true,
    grant: { host: ready, layout: 'flat', dir: '/data/apps/ready', socket: '/data/run/ready.sock', db: '' },
  })
  for (const [wait, ms] of [
    ['500ms', 500],
    ['5s', 5_000],
    ['1m', 60_000],
    ['60s', 60_000],
    ['60000ms', 60_000],
  ] as const) {
    const res = await app.inject({ method: 'GET', url: `/ready/${host}?wait=${wait}` })
    assert.equal(res.statusCode, 503, wait)
    assert.deepEqual(agent.waits.at(-1), { host, ms }, wait)
  }
  const waited = agent.waits.length
  for (const [wait, message] of [
    ['100ms', 'querystring/wait "100ms" is below the shortest wait, 500ms'],
    ['499ms', 'querystring/wait "499ms" is below the shortest wait, 500ms'],
    ['0s', 'querystring/wait "0s" is below the shortest wait, 500ms'],
    ['61s', 'querystring/wait "61s" is above the longest wait, 60s'],
    ['2m', 'querystring/wait "2m" is above the longest wait, 60s'],
    ['1h', 'querystring/wait "1h" is above the longest wait, 60s'],
    ['30', 'querystring/wait "30" is not a duration like 500ms, 5s or 1m'],
    ['1.5s', 'querystring/wait "1.5s" is not a duration like 500ms, 5s or 1m'],
  ] as const) {
    const bad = await app.inject({ method: 'GET', url: `/ready/${host}?wait=${wait}` })
    assert.equal(bad.statusCode, 400, wait)
    assert.deepEqual(errorOf(bad.body), { code: 'bad_request', message }, wait)
  }
  // A bad wait is refused whatever the host's state: a host that is never, or ready, too.
  for (const other of ['nobody.example.com', ready]) {
    const bad = await app.inject({ method: 'GET', url: `/ready/${other}?wait=100ms` })
    assert.equal(bad.statusCode, 400, other)
  }
  assert.equal(agent.waits.length, waited, 'no refused wait reached the agent')
})

// The forward-auth gate (design §6.4) against a FakeAgent: its statuses in
// both forms, its headers, the host as a proxy passes it, HEAD, and no path
// in anything but a grant's headers.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { WakeGrant, WakeRefusal } from '../../src/agent-api.js'
import { build, HOST } from '../helpers/fake-agent.js'

const GRANT: WakeGrant = {
  host: HOST,
  layout: 'flat',
  dir: '/data/apps/a.example.com',
  socket: '/data/run/a.example.com.sock',
  db: '',
}

function refusal(host: string, layout: string, code: WakeRefusal['code'], reason: string): WakeRefusal {
  return { host, layout, code, reason }
}

async function gated(t: Parameters<typeof build>[0]) {
  const built = await build(t)
  const { agent } = built
  agent.readinessValue = { ...agent.readinessValue, ready: true, phase: 'ready' }
  agent.wakeAnswers.set(HOST, { granted: true, grant: GRANT })
  agent.wakeAnswers.set('moving.example.com', {
    granted: false,
    refusal: refusal('moving.example.com', 'fenced', 'in_flight', 'fenced: a move under way at /data/layout/x'),
  })
  agent.wakeAnswers.set('held.example.com', {
    granted: false,
    refusal: refusal('held.example.com', 'fenced', 'symlink_source', 'held down: /data/apps/held is a symlink'),
  })
  agent.wakeAnswers.set('clash.example.com', {
    granted: false,
    refusal: refusal('clash.example.com', 'conflict', 'dir_claimed', 'conflict: /data/apps/x is claimed'),
  })
  return built
}

/** No data-root path in the body or any header of an answer the proxy hands its client. */
function assertNoPath(res: { headers: Record<string, unknown>; body: string }): void {
  assert.doesNotMatch(res.body, /\/data/, res.body)
  for (const [name, value] of Object.entries(res.headers)) assert.doesNotMatch(String(value), /\/data/, name)
}

void test('GET /gate/:host: 204 with the paths in headers only; not yet 503 with Retry-After; never 403; unknown 404', async (t) => {
  const { app } = await gated(t)
  const ok = await app.inject({ method: 'GET', url: `/gate/${HOST}` })
  assert.equal(ok.statusCode, 204)
  assert.equal(ok.headers['layoutd-state'], 'ready')
  assert.equal(ok.headers['layoutd-socket'], GRANT.socket)
  assert.equal(ok.headers['layoutd-dir'], GRANT.dir)
  assert.equal(ok.headers['layoutd-layout'], 'flat')
  assert.equal(ok.body, '', 'a grant has no body: a proxy that reads none keeps its connection')

  const moving = await app.inject({ method: 'GET', url: '/gate/moving.example.com' })
  assert.equal(moving.statusCode, 503)
  assert.equal(moving.headers['retry-after'], '3')
  assert.equal(moving.headers['layoutd-state'], 'fenced')
  assert.equal(moving.headers['layoutd-code'], 'in_flight')
  assertNoPath(moving)

  for (const [host, state] of [
    ['held.example.com', 'held'],
    ['clash.example.com', 'conflict'],
  ] as const) {
    const never = await app.inject({ method: 'GET', url: `/gate/${host}` })
    assert.equal(never.statusCode, 403, host)
    assert.equal(never.headers['layoutd-state'], state)
    assert.equal(never.headers['retry-after'], undefined, 'never is not a retry')
    assertNoPath(never)
  }
  const unknown = await app.inject({ method: 'GET', url: '/gate/nobody.example.com' })
  assert.equal(unknown.statusCode, 404)
  assert.equal(unknown.headers['layoutd-state'], 'unknown')
  assert.equal(unknown.headers['layoutd-code'], 'unknown_host')
})

void test('GET /gate/:host?auth_request: nginx statuses, not yet 401 and never 403, told apart by Layoutd-State', async (t) => {
  const { app } = await gated(t)
  const expect = [
    [HOST, 204, 'ready'],
    ['moving.example.com', 401, 'fenced'],
    ['held.example.com', 403, 'held'],
    ['nobody.example.com', 403, 'unknown'],
  ] as const
  for (const [host, status, state] of expect) {
    const res = await app.inject({ method: 'GET', url: `/gate/${host}?auth_request=1` })
    assert.equal(res.statusCode, status, host)
    assert.equal(res.headers['layoutd-state'], state, host)
  }
})

void test('the gate while the agent starts: not yet, 503 starting with Retry-After', async (t) => {
  const { app, agent } = await build(t)
  agent.wakeAnswers.set(HOST, {
    granted: false,
    refusal: refusal(HOST, 'unknown', 'not_ready', 'not ready: layoutd is recovering'),
  })
  const res = await app.inject({ method: 'GET', url: `/gate/${HOST}` })
  assert.equal(res.statusCode, 503)
  assert.equal(res.headers['layoutd-state'], 'starting')
  assert.equal(res.headers['retry-after'], '3')
})

void test('the host as a proxy passes it: case folded and one trailing dot dropped, from the path or X-Forwarded-Host', async (t) => {
  const { app } = await gated(t)
  for (const url of ['/gate/A.Example.COM', '/gate/a.example.com.', '/gate/A.EXAMPLE.com.']) {
    const res = await app.inject({ method: 'GET', url })
    assert.equal(res.statusCode, 204, url)
    assert.equal(res.headers['layoutd-socket'], GRANT.socket)
  }
  const forwarded = await app.inject({
    method: 'GET',
    url: '/gate',
    headers: { 'x-forwarded-host': 'A.example.com.:8443', host: 'layoutd.internal' },
  })
  assert.equal(forwarded.statusCode, 204)
  assert.equal(forwarded.headers['layoutd-socket'], GRANT.socket)
  const byHost = await app.inject({ method: 'GET', url: '/gate', headers: { host: 'moving.example.com' } })
  assert.equal(byHost.statusCode, 503)
  // Two dots are not one: the name stays as given, and is no hostname.
  const bad = await app.inject({ method: 'GET', url: '/gate/a.example.com..' })
  assert.equal(bad.statusCode, 404)
  assert.equal(bad.headers['layoutd-code'], 'invalid_host')
  assertNoPath(bad)
})

void test('HEAD /gate/:host answers as GET, headers and all, with no body', async (t) => {
  const { app } = await gated(t)
  for (const [host, status] of [
    [HOST, 204],
    ['moving.example.com', 503],
    ['nobody.example.com', 404],
  ] as const) {
    const get = await app.inject({ method: 'GET', url: `/gate/${host}` })
    const head = await app.inject({ method: 'HEAD', url: `/gate/${host}` })
    assert.equal(head.statusCode, status)
    assert.equal(head.body, '')
    for (const h of ['layoutd-state', 'layoutd-code', 'layoutd-socket', 'retry-after', 'cache-control'])
      assert.equal(head.headers[h], get.headers[h], h)
  }
})

void test('a name too long to route, or not decodable, is unknown to the gate, with its headers; never a 414', async (t) => {
  const { app } = await gated(t)
  const long = 'a'.repeat(5000)
  for (const method of ['GET', 'HEAD'] as const) {
    for (const [name, query, status] of [
      [long, '', 404],
      [long, '?auth_request=1', 403],
      ['a%ZZ.example.com', '', 404],
      ['a%ZZ.example.com', '?auth_request=1', 403],
    ] as const) {
      const res = await app.inject({ method, url: `/gate/${name}${query}` })
      const what = `${method} ${name.slice(0, 20)}${query}`
      assert.equal(res.statusCode, status, what)
      assert.equal(res.headers['layoutd-state'], 'unknown', what)
      assert.equal(res.headers['layoutd-code'], 'invalid_host', what)
      assert.equal(res.headers['cache-control'], 'no-store', what)
      if (method === 'HEAD') assert.equal(res.body, '', what)
      else assert.deepEqual(res.json<{ state: string; code: string }>().state, 'unknown', what)
    }
  }
  const body = (await app.inject({ method: 'GET', url: `/gate/${long}` })).json<{ host: string }>()
  assert.ok(body.host.length < 100, 'the name is not echoed whole')
  // Elsewhere the router's refusal stands.
  const wake = await app.inject({ method: 'GET', url: `/ready/${long}` })
  assert.equal(wake.statusCode, 414)
  assert.equal(wake.headers['layoutd-state'], undefined)
})

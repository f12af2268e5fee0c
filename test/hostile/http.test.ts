// The HTTP API against a hostile client: every malformed or unauthorised
// request is refused with the error envelope and a code that names what was
// wrong, and changes nothing (the data root and the registry, fingerprinted
// before and after). Most cases inject into one shared agent; a few go over
// a real socket to a real `layoutd serve`.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { after, before, test } from 'node:test'
import type { InjectOptions } from 'fastify'
import { buildApp } from '../../src/app.js'
import { createLogger } from '../../src/logger.js'
import { Metrics } from '../../src/metrics/metrics.js'
import { AgentProcess, makeSandbox, type Sandbox } from '../helpers/agent-process.js'
import { assertUnchanged, fingerprint } from '../helpers/fingerprint.js'
import { until } from '../helpers/until.js'
import { addFlat, fileScope, hostileBox, recordIntent, type HostileBox } from './box.js'

let box: HostileBox
const file = fileScope(after)

before(async () => {
  box = await hostileBox(file, {
    before: async (b) => {
      await addFlat(b, 'a.example.com')
      await addFlat(b, 'b.example.com')
      // Flat is where they are: a run moves nothing, so any change is the request's.
      await recordIntent(b, 'flat')
    },
  })
})

interface Envelope {
  error: { code: string; message: string }
}

/** Injects req from loopback (unless it says otherwise) and asserts the refusal and that nothing changed. */
async function refused(req: InjectOptions, status: number, code: string, message?: RegExp): Promise<Envelope> {
  const before = box.fp()
  const res = await box.app.inject({ remoteAddress: '127.0.0.1', ...req })
  assert.equal(
    res.statusCode,
    status,
    `${req.method ?? 'GET'} ${typeof req.url === 'string' ? req.url : JSON.stringify(req.url)}: ${res.body}`,
  )
  const body = res.json<Envelope>()
  assert.deepEqual(Object.keys(body), ['error'], 'the error envelope, and nothing else')
  assert.equal(body.error.code, code, body.error.message)
  if (message !== undefined) assert.match(body.error.message, message)
  assert.doesNotMatch(res.body, /at .*\.js:\d+/, 'no stack trace in an answer')
  assertUnchanged(before, box.fp())
  return body
}

const json = { 'content-type': 'application/json' }

// ---- hostnames in the path ----------------------------------------------

void test('POST /wakes/:host with an upper-case host: 400 invalid_host, no claim', async () => {
  await refused({ method: 'POST', url: '/wakes/A.example.com' }, 400, 'invalid_host', /lower case/)
})

void test('POST /wakes/:host with a traversal host (..%2F..%2Fetc): 400 invalid_host', async () => {
  await refused({ method: 'POST', url: '/wakes/..%2F..%2Fetc%2Fpasswd' }, 400, 'invalid_host', /not a valid hostname/)
})

void test('POST /wakes/:host with an underscore label: 400 invalid_host naming the label', async () => {
  await refused({ method: 'POST', url: '/wakes/a_b.example.com' }, 400, 'invalid_host', /"a_b"/)
})

void test('POST /wakes/:host with an empty label (a..example.com): 400 invalid_host', async () => {
  await refused({ method: 'POST', url: '/wakes/a..example.com' }, 400, 'invalid_host', /empty label/)
})

void test('POST /wakes/:host with a NUL byte: 400 invalid_host', async () => {
  await refused({ method: 'POST', url: '/wakes/a%00.example.com' }, 400, 'invalid_host')
})

void test('DELETE /wakes/:host with an invalid host: 400 invalid_host, no release', async () => {
  await refused({ method: 'DELETE', url: '/wakes/-a.example.com' }, 400, 'invalid_host')
})

void test('GET /ready/:host with a unicode host: 400 invalid_host', async () => {
  await refused({ method: 'GET', url: `/ready/${encodeURIComponent('ünï.example.com')}` }, 400, 'invalid_host')
})

void test('a URL with broken percent-encoding: 400 with the envelope', async () => {
  await refused({ method: 'POST', url: '/wakes/a%E0%A4%A.example.com' }, 400, 'bad_request')
})

void test('POST /wakes/:host with a body that is not JSON: 400 bad_request, no claim', async () => {
  await refused(
    { method: 'POST', url: '/wakes/a.example.com', headers: json, payload: '{"x":' },
    400,
    'bad_request',
    /not valid JSON/,
  )
})

// ---- PUT /wakes bodies --------------------------------------------------

void test('PUT /wakes with a body that is not JSON: 400 bad_request, claims kept', async () => {
  await refused(
    { method: 'PUT', url: '/wakes', headers: json, payload: '{"awake": [' },
    400,
    'bad_request',
    /not valid JSON/,
  )
})

void test('PUT /wakes with an empty JSON body: 400 bad_request', async () => {
  await refused({ method: 'PUT', url: '/wakes', headers: json, payload: '' }, 400, 'bad_request', /empty/)
})

void test('PUT /wakes without awake: 400 bad_request naming the field', async () => {
  await refused({ method: 'PUT', url: '/wakes', headers: json, payload: '{}' }, 400, 'bad_request', /awake/)
})

void test('PUT /wakes with a field the schema does not name: 400 bad_request', async () => {
  await refused(
    { method: 'PUT', url: '/wakes', headers: json, payload: '{"awake": [], "stop": ["a.example.com"]}' },
    400,
    'bad_request',
  )
})

void test('PUT /wakes with a __proto__ key: 400 bad_request', async () => {
  await refused(
    { method: 'PUT', url: '/wakes', headers: json, payload: '{"awake": [], "__proto__": {"x": 1}}' },
    400,
    'bad_request',
  )
})

void test('PUT /wakes naming an invalid host among valid ones: 400 invalid_host, no claim replaced', async () => {
  await refused(
    { method: 'PUT', url: '/wakes', headers: json, payload: JSON.stringify({ awake: ['a.example.com', '../../etc'] }) },
    400,
    'invalid_host',
    /"\.\.\/\.\.\/etc"/,
  )
})

void test('PUT /wakes as text/plain: 400 bad_request, the body must be an object', async () => {
  await refused(
    { method: 'PUT', url: '/wakes', headers: { 'content-type': 'text/plain' }, payload: 'a.example.com' },
    400,
    'bad_request',
    /body must be object/,
  )
})

void test('PUT /wakes as application/x-www-form-urlencoded: 415 unsupported_media_type', async () => {
  await refused(
    {
      method: 'PUT',
      url: '/wakes',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: 'awake=a.example.com',
    },
    415,
    'unsupported_media_type',
    /application\/json/,
  )
})

void test('PUT /wakes over its 1 MiB limit: 413 payload_too_large', async () => {
  const awake = Array.from({ length: 60_000 }, (_, i) => `h${i}.example.com`)
  await refused(
    { method: 'PUT', url: '/wakes', headers: json, payload: JSON.stringify({ awake }) },
    413,
    'payload_too_large',
    /1048576/,
  )
})

void test('POST /layout/converge with a body over 64 KiB: 413 payload_too_large, no run', async () => {
  await refused(
    { method: 'POST', url: '/layout/converge', headers: json, payload: JSON.stringify({ x: 'x'.repeat(70_000) }) },
    413,
    'payload_too_large',
  )
})

void test('PUT /wakes {"awake": "not-a-list"}: 400, the claim set kept', async () => {
  await refused(
    { method: 'PUT', url: '/wakes', headers: json, payload: '{"awake": "not-a-list"}' },
    400,
    'bad_request',
    /awake/,
  )
})

void test('PUT /wakes {"awake": 12}: 400, the claim set kept', async () => {
  await refused({ method: 'PUT', url: '/wakes', headers: json, payload: '{"awake": 12}' }, 400, 'bad_request', /awake/)
})

void test('PUT /wakes {"awake": ["a.example.com", 42]}: 400, the claim set kept', async () => {
  await refused(
    { method: 'PUT', url: '/wakes', headers: json, payload: '{"awake": ["a.example.com", 42]}' },
    400,
    'bad_request',
    /awake/,
  )
})

// ---- queries, routes, methods ---------------------------------------------

void test('POST /layout/converge?wait=2: 400 bad_request naming wait, no run', async () => {
  await refused({ method: 'POST', url: '/layout/converge?wait=2' }, 400, 'bad_request', /wait/)
})

void test('POST /layout/converge?wait=1&timeout=601: 400 bad_request naming timeout', async () => {
  await refused({ method: 'POST', url: '/layout/converge?wait=1&timeout=601' }, 400, 'bad_request', /timeout/)
})

void test('POST /layout/converge?wait=1&timeout=1e3: 400 bad_request', async () => {
  await refused({ method: 'POST', url: '/layout/converge?wait=1&timeout=1e3' }, 400, 'bad_request', /timeout/)
})

void test('an unknown route, and a method no route takes: 404 not_found naming it', async () => {
  await refused({ method: 'GET', url: '/../../etc/passwd' }, 404, 'not_found')
  await refused({ method: 'PATCH', url: '/wakes' }, 404, 'not_found', /PATCH \/wakes/)
})

// ---- who may mutate --------------------------------------------------------

void test('a mutation without the token, from loopback or beyond: 401 unauthorized, nothing changed', async () => {
  for (const remoteAddress of ['127.0.0.1', '::1', '10.1.2.3']) {
    const before = box.fp()
    const res = await box.anonymous({
      method: 'PUT',
      url: '/wakes',
      headers: json,
      payload: '{"awake": []}',
      remoteAddress,
    })
    assert.equal(res.statusCode, 401, remoteAddress)
    assert.equal(res.json<Envelope>().error.code, 'unauthorized')
    assertUnchanged(before, box.fp())
  }
  // A forwarded header is no credential either.
  const before = box.fp()
  const forwarded = await box.anonymous({
    method: 'POST',
    url: '/layout/converge',
    headers: { 'x-forwarded-for': '127.0.0.1' },
    remoteAddress: '192.0.2.7',
  })
  assert.equal(forwarded.statusCode, 401)
  assertUnchanged(before, box.fp())
})

void test('with a token configured: a missing, wrong or non-bearer token is 401 unauthorized', async (t) => {
  // The shared agent, behind a second app that requires a token.
  const app = await buildApp({
    api: box.agent,
    metrics: new Metrics(),
    logger: createLogger('silent'),
    token: 't'.repeat(32),
  })
  t.after(() => app.close())
  const cases: Array<Record<string, string>> = [
    {},
    { authorization: 'Bearer wrong-token-of-some-length' },
    { authorization: `Basic ${'t'.repeat(32)}` },
  ]
  for (const headers of cases) {
    const before = box.fp()
    const res = await app.inject({
      method: 'PUT',
      url: '/wakes',
      headers: { ...json, ...headers },
      payload: '{"awake": []}',
      remoteAddress: '127.0.0.1',
    })
    assert.equal(res.statusCode, 401, JSON.stringify(headers))
    assert.equal(res.json<Envelope>().error.code, 'unauthorized')
    assert.equal(res.headers['www-authenticate'], 'Bearer realm="layoutd"')
    assertUnchanged(before, box.fp())
  }
})

// ---- long hosts (item 9) -----------------------------------------------------

/** A valid hostname of n bytes: 63-byte labels and a shorter last one. */
function longHost(n: number): string {
  const labels: string[] = []
  let left = n
  while (left > 0) {
    const len = Math.min(63, left)
    labels.push('a'.repeat(len))
    left -= len + 1
  }
  const host = labels.join('.')
  return host.length > n ? host.slice(0, n) : host
}

void test('a valid host of 200 bytes is asked about like any other (GET /ready/:host, POST /wakes/:host)', async () => {
  const host = longHost(200)
  assert.equal(Buffer.byteLength(host), 200)
  const before = box.fp()
  const ready = await box.app.inject({ method: 'GET', url: `/ready/${host}` })
  assert.equal(ready.statusCode, 409, ready.body)
  assert.match(ready.body, /unknown host/)
  const claim = await box.app.inject({ method: 'POST', url: `/wakes/${host}`, remoteAddress: '127.0.0.1' })
  assert.equal(claim.statusCode, 409, claim.body)
  assertUnchanged(before, box.fp())
})

void test('a host of 254 bytes is 400 invalid_host naming its length', async () => {
  const host = `${longHost(250)}.abc`
  assert.equal(Buffer.byteLength(host), 254)
  await refused({ method: 'POST', url: `/wakes/${host}` }, 400, 'invalid_host', /254 bytes/)
})

// ---- over a real socket ------------------------------------------------------

let real: Promise<{ sb: Sandbox; agent: AgentProcess }> | undefined

/** One real `layoutd serve` for the socket cases, started by the first that asks, stopped when the file ends. */
function realAgent(): Promise<{ sb: Sandbox; agent: AgentProcess }> {
  real ??= (async () => {
    const root = await fs.mkdtemp(path.join(os.tmpdir(), 'layoutd-hostile-http-'))
    const sb = await makeSandbox(root, 'kass-1')
    const agent = await AgentProcess.start(sb)
    file.after(async () => {
      await agent.stop()
      await fs.rm(root, { recursive: true, force: true })
    })
    await agent.waitReady()
    await agent.waitFor(
      'the first run',
      async () => ((await agent.status()).leg.lastRun?.finishedAt ? true : undefined),
      30_000,
    )
    return { sb, agent }
  })()
  return real
}

/** Sends raw bytes on a new connection and answers everything the agent wrote back until it closed. */
function raw(port: number, bytes: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1')
    let got = ''
    s.setEncoding('utf8')
    s.on('data', (d: string) => (got += d))
    s.on('error', reject)
    s.on('close', () => resolve(got))
    s.end(bytes)
  })
}

/** Starts a PUT /wakes (with the token) whose body never arrives whole: the client goes away mid-body. */
function dropMidBody(port: number, token: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1', () => {
      s.write(
        `PUT /wakes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n` +
          'Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"awake": [',
      )
      s.destroy()
      resolve()
    })
    s.on('error', reject)
  })
}

void test('over a real socket: garbage, a bad host and a half-sent body are refused and change nothing', async () => {
  const { sb, agent } = await realAgent()
  const before = fingerprint(sb.dataDir)
  const port = Number(new URL(agent.url).port)
  const auth = `Authorization: Bearer ${agent.token}\r\n`
  const garbage = await raw(port, 'HELLO /wakes HTTP/9.9\r\n\r\n')
  assert.match(garbage, /^HTTP\/1\.1 400/, garbage)
  const badHost = await raw(
    port,
    `POST /wakes/..%2f..%2fetc HTTP/1.1\r\nHost: x\r\n${auth}Connection: close\r\nContent-Length: 0\r\n\r\n`,
  )
  assert.match(badHost, /^HTTP\/1\.1 400/)
  assert.match(badHost, /"code":"invalid_host"/)
  const badSet = await raw(
    port,
    `PUT /wakes HTTP/1.1\r\nHost: x\r\n${auth}Connection: close\r\nContent-Type: application/json\r\nContent-Length: 24\r\n\r\n{"awake": ["A.EXAMPLE"]}`,
  )
  assert.match(badSet, /^HTTP\/1\.1 400/)
  await dropMidBody(port, agent.token)
  assert.equal((await agent.readiness()).ready, true, 'the agent still serves')
  assert.deepEqual(
    ((await (await fetch(`${agent.url}/wakes`, { signal: AbortSignal.timeout(30_000) })).json()) as { awake: string[] })
      .awake,
    [],
  )
  assertUnchanged(before, fingerprint(sb.dataDir))
})

void test('a client that disconnects mid-body is not logged as a 500 with a stack', async () => {
  const { agent } = await realAgent()
  await dropMidBody(Number(new URL(agent.url).port), agent.token)
  // A refused request afterwards logs its own line: once it is there, the
  // dropped one has been handled too.
  const marker = `m${Date.now()}.example.com`
  const res = await fetch(`${agent.url}/wakes/${marker.toUpperCase()}`, {
    method: 'POST',
    signal: AbortSignal.timeout(30_000),
    headers: agent.authorization(),
  })
  assert.equal(res.status, 400)
  await until('the refusal logged', () => agent.tail().includes(marker.toUpperCase()))
  assert.doesNotMatch(agent.tail(), /request failed/)
  assert.doesNotMatch(agent.tail(), /"status":500/)
})

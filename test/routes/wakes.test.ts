// The wake-claim API (design §6): first its shapes against a FakeAgent,
// then its rules against the real agent, registry and pass on a temp data
// dir, through the app (inject).
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test, type TestContext } from 'node:test'
import type { WakeGrant, WakeRefusal, WakeSet } from '../../src/agent-api.js'
import { flatPaths, nestedPaths } from '../../src/domain/paths.js'
import type { LayoutReport } from '../../src/domain/schemas.js'
import { errors } from '../../src/errors.js'
import type { Registry } from '../../src/infra/registry.js'
import { SqliteClaimStore } from '../../src/infra/wake-claims.js'
import { addFlat, addNested, agentBox, recordIntent, type AgentBox, type AgentBoxOptions } from '../helpers/agent.js'
import { build, errorOf, HOST } from '../helpers/fake-agent.js'
import { until } from '../helpers/until.js'

/** The claims on disk, read through a connection of the test's own (what a restart would load). */
function persistedWakes(registry: Registry): string[] {
  const store = SqliteClaimStore.open(registry.file)
  try {
    return store.wakes()
  } finally {
    store.close()
  }
}

const GRANT: WakeGrant = {
  host: HOST,
  layout: 'flat',
  dir: '/data/apps/a.example.com',
  socket: '/data/run/a.example.com.sock',
  db: '',
}

// ---- the shapes, against a FakeAgent ---------------------------------------

void test('POST /wakes/:host answers 200 with the paths or 409 with the reason; a bad host is a 400 envelope', async (t) => {
  const { app, agent } = await build(t)
  agent.wakeAnswers.set(HOST, { granted: true, grant: GRANT })
  const ok = await app.inject({ method: 'POST', url: `/wakes/${HOST}` })
  assert.equal(ok.statusCode, 200)
  assert.deepEqual(ok.json(), GRANT)

  const refusal: WakeRefusal = {
    host: 'b.example.com',
    layout: 'fenced',
    code: 'in_flight',
    reason: 'fenced: layout move to nested in flight',
  }
  agent.wakeAnswers.set('b.example.com', { granted: false, refusal })
  const no = await app.inject({ method: 'POST', url: '/wakes/b.example.com' })
  assert.equal(no.statusCode, 409)
  assert.deepEqual(no.json(), refusal)
  assert.equal(no.headers['retry-after'], '3', 'a move under way passes on its own: ask again after it')

  agent.wakeAnswers.set('BAD_HOST', errors.invalidHost('BAD_HOST', 'not lower case'))
  const bad = await app.inject({ method: 'POST', url: '/wakes/BAD_HOST' })
  assert.equal(bad.statusCode, 400)
  assert.equal(errorOf(bad.body).code, 'invalid_host')
  assert.deepEqual(agent.claims, [HOST, 'b.example.com', 'BAD_HOST'])
})

void test('DELETE /wakes/:host answers 204 with no body; GET /wakes lists the claims', async (t) => {
  const { app, agent } = await build(t)
  agent.wakeAnswers.set(HOST, { granted: true, grant: GRANT })
  await app.inject({ method: 'POST', url: `/wakes/${HOST}` })
  const list = await app.inject({ method: 'GET', url: '/wakes' })
  assert.equal(list.statusCode, 200)
  assert.deepEqual(list.json(), { awake: [HOST], swept: true })
  assert.equal(list.headers['cache-control'], 'no-store')

  const del = await app.inject({ method: 'DELETE', url: `/wakes/${HOST}` })
  assert.equal(del.statusCode, 204)
  assert.equal(del.body, '')
  assert.deepEqual(agent.releases, [HOST])
  assert.deepEqual((await app.inject({ method: 'GET', url: '/wakes' })).json(), { awake: [], swept: true })
})

void test('PUT /wakes takes the whole awake set and answers what must stop; a malformed set is a 400', async (t) => {
  const { app, agent } = await build(t)
  agent.stopValue = [
    { host: 'b.example.com', code: 'dir_claimed', reason: 'conflict: dir is also claimed by c.example.com' },
  ]
  const res = await app.inject({ method: 'PUT', url: '/wakes', payload: { awake: [HOST, 'b.example.com'] } })
  assert.equal(res.statusCode, 200)
  assert.deepEqual(res.json<WakeSet>(), { awake: [HOST, 'b.example.com'], stop: agent.stopValue })
  assert.deepEqual(agent.replaced, [[HOST, 'b.example.com']])

  for (const payload of [{}, { awake: {} }, { awake: [{}] }, { awake: [], extra: true }]) {
    const bad = await app.inject({ method: 'PUT', url: '/wakes', payload })
    assert.equal(bad.statusCode, 400, JSON.stringify(payload))
    assert.equal(errorOf(bad.body).code, 'bad_request')
  }
  assert.equal(agent.replaced.length, 1, 'no malformed set reached the agent')

  agent.stopValue = errors.notReady('recovering')
  const early = await app.inject({ method: 'PUT', url: '/wakes', payload: { awake: [] } })
  assert.equal(early.statusCode, 503)
  assert.equal(errorOf(early.body).code, 'not_ready')
  assert.equal(early.headers['retry-after'], '3', 'every 503 says when to ask again')
})

void test('a set of thousands of long hostnames fits in PUT /wakes', async (t) => {
  const { app, agent } = await build(t)
  const awake = Array.from({ length: 3000 }, (_, i) => `${'x'.repeat(60)}.${i}.tenants.example.com`)
  const res = await app.inject({ method: 'PUT', url: '/wakes', payload: { awake } })
  assert.equal(res.statusCode, 200)
  assert.equal(agent.replaced[0]?.length, 3000)
})

void test('GET /ready/:host says what a claim would get, and claims nothing', async (t) => {
  const { app, agent } = await build(t)
  agent.wakeAnswers.set(HOST, { granted: true, grant: GRANT })
  const ok = await app.inject({ method: 'GET', url: `/ready/${HOST}` })
  assert.equal(ok.statusCode, 200)
  assert.deepEqual(ok.json(), GRANT)
  assert.equal(ok.headers['cache-control'], 'no-store')
  const unknown = await app.inject({ method: 'GET', url: '/ready/z.example.com' })
  assert.equal(unknown.statusCode, 409)
  assert.deepEqual(unknown.json(), {
    host: 'z.example.com',
    layout: 'unknown',
    code: 'unknown_host',
    reason: 'unknown host: z.example.com is not in the registry',
  })
  assert.deepEqual(agent.claims, [])
})

void test('claims, releases and the set are mutations: the token, from loopback too', async (t) => {
  const { app, anonymous, agent } = await build(t)
  agent.wakeAnswers.set(HOST, { granted: true, grant: GRANT })
  for (const remoteAddress of ['127.0.0.1', '192.0.2.10']) {
    for (const [method, url] of [
      ['POST', `/wakes/${HOST}`],
      ['DELETE', `/wakes/${HOST}`],
      ['PUT', '/wakes'],
    ] as const) {
      const res = await anonymous({
        method,
        url,
        remoteAddress,
        payload: method === 'PUT' ? { awake: [] } : undefined,
      })
      assert.equal(res.statusCode, 401, `${method} ${url} from ${remoteAddress}`)
    }
  }
  assert.deepEqual([agent.claims, agent.releases, agent.replaced], [[], [], []])
  // Reads stay open to any peer.
  assert.equal((await anonymous({ method: 'GET', url: `/ready/${HOST}`, remoteAddress: '192.0.2.10' })).statusCode, 200)
  assert.equal((await anonymous({ method: 'GET', url: '/wakes', remoteAddress: '192.0.2.10' })).statusCode, 200)
  // With it, from anywhere.
  assert.equal(
    (await app.inject({ method: 'POST', url: `/wakes/${HOST}`, remoteAddress: '192.0.2.10' })).statusCode,
    200,
  )
})

void test('/ready?verbose lists the isolation checks as information: a failed one does not fail readiness', async (t) => {
  const { app, agent } = await build(t)
  agent.readinessValue = {
    ready: true,
    phase: 'ready',
    checks: [{ name: 'recovery', ok: true, detail: 'done' }],
    nested: { allowed: false, reason: 'probe: not yet run' },
    isolation: [
      { name: 'selfcheck', ok: true, code: 'ok', detail: 'ok' },
      { name: 'mounts', ok: true, code: 'ok', detail: 'ok' },
      { name: 'probe', ok: false, code: 'not-yet-run', detail: 'not yet run' },
    ],
  }
  const res = await app.inject({ method: 'GET', url: '/ready?verbose' })
  assert.equal(res.statusCode, 200)
  assert.equal(
    res.body,
    '[+]recovery ok\n' +
      '[+]isolation/selfcheck ok (informational)\n' +
      '[+]isolation/mounts ok (informational)\n' +
      '[-]isolation/probe failed: not yet run (informational: nested wakes and moves wait)\n' +
      'readyz check passed\n',
  )
  const json = await app.inject({ method: 'GET', url: '/ready' })
  assert.deepEqual(json.json(), agent.readinessValue)
})

// ---- the rules, against the real agent ---------------------------------------

type Box = AgentBox

/** A real agent on a temp box whose default is flat unless the test says otherwise, started unless `start: false`. */
function realBox(t: TestContext, opts: AgentBoxOptions = {}): Promise<Box> {
  return agentBox(t, { ...opts, start: opts.start ?? true, env: { CARLOS_LAYOUT_DEFAULT: 'flat', ...opts.env } })
}

async function claim(b: Box, host: string): Promise<{ status: number; body: WakeGrant & WakeRefusal }> {
  const res = await b.app.inject({ method: 'POST', url: `/wakes/${host}` })
  return { status: res.statusCode, body: res.json() }
}

function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `))
  return line === undefined ? undefined : Number(line.slice(series.length + 1))
}

void test('a flat tenant is granted with its paths, the claim is kept in the registry, and a release ends it', async (t) => {
  const b = await realBox(t, { start: false })
  await addFlat(b, 'a.example.com')
  await b.agent.start()
  const p = flatPaths(b.config, 'a.example.com')

  const before = await b.app.inject({ method: 'GET', url: '/ready/a.example.com' })
  assert.equal(before.statusCode, 200)
  assert.deepEqual(
    (await b.app.inject({ method: 'GET', url: '/wakes' })).json(),
    { awake: [], swept: true },
    'GET /ready/:host claims nothing',
  )

  const got = await claim(b, 'a.example.com')
  assert.equal(got.status, 200)
  assert.deepEqual(got.body, { host: 'a.example.com', layout: 'flat', ...p })
  assert.deepEqual(persistedWakes(b.registry), ['a.example.com'])
  // A second claim of an awake host is granted again and keeps one claim.
  assert.equal((await claim(b, 'a.example.com')).status, 200)
  assert.deepEqual((await b.app.inject({ method: 'GET', url: '/wakes' })).json(), {
    awake: ['a.example.com'],
    swept: true,
  })

  assert.equal((await b.app.inject({ method: 'DELETE', url: '/wakes/a.example.com' })).statusCode, 204)
  assert.deepEqual(persistedWakes(b.registry), [])
  assert.equal(
    (await b.app.inject({ method: 'DELETE', url: '/wakes/a.example.com' })).statusCode,
    204,
    'a release repeats safely',
  )

  const text = await b.metrics.text()
  assert.equal(sample(text, 'carlos_layout_wake_claims_total{result="granted"}'), 2)
  assert.ok(!text.includes('a.example.com'), 'no hostname in the metrics')
})

void test('refusals name the reason: unknown, not managed, conflict, invalid; not ready before start is a 503', async (t) => {
  const b = await realBox(t, { start: false })
  await addFlat(b, 'a.example.com')
  const shared = flatPaths(b.config, 'c.example.com')
  await fs.mkdir(shared.dir, { recursive: true })
  b.registry.add({ host: 'c.example.com', kind: 'instance', hibernate: true, ...shared })
  b.registry.add({
    host: 'd.example.com',
    kind: 'instance',
    hibernate: true,
    dir: shared.dir,
    socket: path.join(b.config.runDir, 'd.sock'),
    db: '',
  })
  b.registry.add({ host: 's.example.com', kind: 'sidecar', hibernate: false, socket: '', dir: '', db: '' })

  // Not judged yet is no refusal: 503, never a 409 the activator reads as no (design §6.4).
  const early = await claim(b, 'a.example.com')
  assert.equal(early.status, 503)
  assert.deepEqual(early.body, {
    host: 'a.example.com',
    layout: 'unknown',
    code: 'not_ready',
    reason: 'not ready: layoutd is starting',
  })
  assert.equal((await b.app.inject({ method: 'PUT', url: '/wakes', payload: { awake: [] } })).statusCode, 503)

  await b.agent.start()
  const unknown = await claim(b, 'z.example.com')
  assert.deepEqual(
    [unknown.status, unknown.body.layout, unknown.body.reason],
    [409, 'unknown', 'unknown host: z.example.com is not in the registry'],
  )
  const sidecar = await claim(b, 's.example.com')
  assert.equal(sidecar.status, 409)
  assert.equal(sidecar.body.layout, 'unmanaged')
  assert.equal(sidecar.body.code, 'not_managed')
  assert.match(sidecar.body.reason, /^not activator-managed: a sidecar row/)
  const conflict = await claim(b, 'd.example.com')
  assert.equal(conflict.status, 409)
  assert.equal(conflict.body.layout, 'conflict')
  assert.equal(conflict.body.code, 'dir_claimed')
  assert.match(conflict.body.reason, /^conflict: dir .* is also claimed by c\.example\.com/)
  const invalid = await b.app.inject({ method: 'POST', url: '/wakes/Not_A_Host' })
  assert.equal(invalid.statusCode, 400)
  assert.equal(errorOf(invalid.body).code, 'invalid_host')
  assert.deepEqual(persistedWakes(b.registry), [], 'no refusal recorded a claim')

  const text = await b.metrics.text()
  assert.equal(sample(text, 'carlos_layout_wake_claims_total{result="not_ready"}'), 1)
  assert.equal(sample(text, 'carlos_layout_wake_claims_total{result="unknown_host"}'), 3)
  assert.equal(sample(text, 'carlos_layout_wake_claims_total{result="conflict"}'), 1)
})

void test('a host a journal names is fenced, and a held host is held: both refused', async (t) => {
  const b = await realBox(t, { start: false, env: { CARLOS_LAYOUT_DEFAULT: 'nested' } })
  const layout = path.join(b.config.dataDir, 'layout')
  await fs.mkdir(layout, { recursive: true })
  // A journal whose files are nowhere: recovery keeps the host fenced.
  const from = flatPaths(b.config, 'j.example.com')
  b.registry.add({ host: 'j.example.com', kind: 'instance', hibernate: true, ...from })
  await fs.writeFile(
    path.join(layout, 'j.example.com.journal'),
    JSON.stringify({
      v: 1,
      host: 'j.example.com',
      to: 'nested',
      from,
      dest: nestedPaths(b.config, 'j.example.com'),
      generation: 1,
      startedAt: new Date().toISOString(),
    }),
  )
  // A hold marker: no intent is recorded and the default is nested, so
  // start-up keeps it (the fail-closed intent).
  await addFlat(b, 'h.example.com')
  await fs.writeFile(
    path.join(layout, 'h.example.com.hold'),
    JSON.stringify({
      v: 1,
      host: 'h.example.com',
      to: 'nested',
      reason: 'a file of its has a second name: x has 2 links',
      heldAt: new Date().toISOString(),
    }),
  )
  await b.agent.start()

  const fenced = await claim(b, 'j.example.com')
  assert.equal(fenced.status, 409)
  assert.equal(fenced.body.layout, 'fenced')
  assert.equal(fenced.body.code, 'files_missing')
  assert.match(fenced.body.reason, /^fenced: files missing/)
  const held = await claim(b, 'h.example.com')
  assert.equal(held.status, 409)
  assert.equal(held.body.layout, 'fenced')
  assert.equal(held.body.code, 'legacy_hold', 'a marker written without a code reads as legacy_hold')
  assert.match(held.body.reason, /^held down after a refused move to nested: a file of its has a second name/)
  const text = await b.metrics.text()
  assert.equal(sample(text, 'carlos_layout_wake_claims_total{result="fenced"}'), 1)
  assert.equal(sample(text, 'carlos_layout_wake_claims_total{result="held"}'), 1)
})

void test('a shut isolation gate refuses nested wakes and names its check; flat wakes go on and readiness holds', async (t) => {
  const b = await realBox(t, {
    start: false,
    probe: 'ready: false\nreason: seccomp profile missing\n',
    env: { CARLOS_LAYOUT_DEFAULT: 'nested', CARLOS_PROBE_EVERY: '100ms' },
  })
  await addFlat(b, 'f.example.com')
  await addNested(b, 'n.example.com')
  await b.agent.start()
  await until('the probe to be read', () =>
    b.agent.readiness().isolation?.[2]?.detail !== 'not yet run' ? true : undefined,
  )

  const nested = await claim(b, 'n.example.com')
  assert.equal(nested.status, 409)
  assert.deepEqual(nested.body, {
    host: 'n.example.com',
    layout: 'nested',
    code: 'gate_shut',
    reason: 'isolation not ready: probe: the probe says ready: false (seccomp profile missing)',
  })
  assert.equal((await claim(b, 'f.example.com')).status, 200, 'a flat wake goes on')

  const verbose = await b.app.inject({ method: 'GET', url: '/ready?verbose' })
  assert.equal(verbose.statusCode, 200)
  assert.match(verbose.body, /^\[\+\]isolation\/selfcheck ok \(informational\)$/m)
  assert.match(
    verbose.body,
    /^\[-\]isolation\/probe failed: the probe says ready: false \(seccomp profile missing\) \(informational/m,
  )
  assert.match(verbose.body, /readyz check passed\n$/)

  // The report says the same: the nested row cannot wake, and the default is blocked by the gate.
  await b.agent.converge(10_000)
  const report = (await b.app.inject({ method: 'GET', url: '/layout/status' })).json<LayoutReport>()
  assert.equal(
    report.rows['n.example.com']?.reason,
    'isolation not ready: probe: the probe says ready: false (seccomp profile missing)',
  )
  assert.match(report.defaultBlocked, /^isolation not ready: probe: /)

  // Under a recorded nested intent the flat row's move is refused, and its row says why.
  await recordIntent(b, 'nested')
  const run = await b.agent.converge(10_000)
  assert.deepEqual(
    run?.results.map((r) => [r.host, r.outcome]),
    [
      ['f.example.com', 'refused'],
      ['n.example.com', 'unchanged'],
    ],
  )
  assert.equal(
    b.agent.report().rows['f.example.com']?.reason,
    'isolation not ready: probe: the probe says ready: false (seccomp profile missing)',
  )

  // The probe turns ready: at its next read the gate opens and the nested host wakes.
  await fs.writeFile(b.probe, 'ready: true\n')
  await until('the gate to open', () => (b.agent.readiness().nested.allowed ? true : undefined))
  assert.equal((await claim(b, 'n.example.com')).status, 200)
})

void test('PUT /wakes records the whole set as claimed and names what must stop', async (t) => {
  const b = await realBox(t, { start: false })
  await addFlat(b, 'a.example.com')
  await addFlat(b, 'b.example.com')
  const shared = flatPaths(b.config, 'c.example.com')
  b.registry.add({ host: 'c.example.com', kind: 'instance', hibernate: true, ...shared })
  b.registry.add({
    host: 'd.example.com',
    kind: 'instance',
    hibernate: true,
    dir: shared.dir,
    socket: path.join(b.config.runDir, 'd.sock'),
    db: '',
  })
  await b.agent.start()
  assert.equal((await claim(b, 'b.example.com')).status, 200)

  const res = await b.app.inject({
    method: 'PUT',
    url: '/wakes',
    payload: { awake: ['d.example.com', 'a.example.com', 'z.example.com', 'a.example.com'] },
  })
  assert.equal(res.statusCode, 200)
  const set = res.json<WakeSet>()
  assert.deepEqual(set.awake, ['a.example.com', 'd.example.com', 'z.example.com'])
  assert.deepEqual(
    set.stop.map((s) => s.host),
    ['d.example.com', 'z.example.com'],
  )
  assert.match(set.stop[0]?.reason ?? '', /^conflict: /)
  assert.equal(set.stop[0]?.code, 'dir_claimed')
  assert.match(set.stop[1]?.reason ?? '', /^unknown host: /)
  assert.equal(set.stop[1]?.code, 'unknown_host')
  assert.deepEqual(
    persistedWakes(b.registry),
    ['a.example.com', 'd.example.com', 'z.example.com'],
    'b was not named: its claim ended',
  )

  const bad = await b.app.inject({ method: 'PUT', url: '/wakes', payload: { awake: ['ok.example.com', '-bad'] } })
  assert.equal(bad.statusCode, 400)
  assert.deepEqual(
    persistedWakes(b.registry),
    ['a.example.com', 'd.example.com', 'z.example.com'],
    'an invalid host changes nothing',
  )
})

void test('no window: from the moment its move fences it, a claimed host is refused; it moves only after its release', async (t) => {
  // No activator URL: the pass asks nobody and waits for the release.
  const b = await realBox(t, { start: false })
  await addFlat(b, 'a.example.com')
  await b.agent.start()
  assert.equal((await claim(b, 'a.example.com')).status, 200)

  await recordIntent(b, 'nested', { force: true })
  b.agent.kick()
  await until('the forced move to fence the awake host', async () => {
    const res = await b.app.inject({ method: 'GET', url: '/ready/a.example.com' })
    return res.statusCode === 409 ? true : undefined
  })
  // The tenant still runs at its flat paths; no new claim lands, and nothing has moved.
  const again = await claim(b, 'a.example.com')
  assert.equal(again.status, 409)
  assert.match(again.body.reason, /^fenced: /)
  assert.equal(
    await fs.readFile(path.join(flatPaths(b.config, 'a.example.com').dir, 'host.txt'), 'utf8'),
    'a.example.com',
  )
  assert.equal(b.agent.legState().running, true)

  assert.equal((await b.app.inject({ method: 'DELETE', url: '/wakes/a.example.com' })).statusCode, 204)
  await until('the move', () => (b.agent.report().rows['a.example.com']?.layout === 'nested' ? true : undefined))
  const woke = await claim(b, 'a.example.com')
  assert.equal(woke.status, 200)
  assert.deepEqual(woke.body, { host: 'a.example.com', layout: 'nested', ...nestedPaths(b.config, 'a.example.com') })
  assert.equal(await fs.readFile(path.join(woke.body.dir, 'host.txt'), 'utf8'), 'a.example.com')
})

void test('claims survive a restart of layoutd: the restarted pass defers the host as awake', async (t) => {
  const first = await realBox(t, { start: false })
  await addFlat(first, 'a.example.com')
  await first.agent.start()
  assert.equal((await claim(first, 'a.example.com')).status, 200)
  await first.close()

  const b = await realBox(t, { dir: first.dir })
  assert.deepEqual((await b.app.inject({ method: 'GET', url: '/wakes' })).json(), {
    awake: ['a.example.com'],
    swept: true,
  })
  await recordIntent(b, 'nested')
  const run = await b.agent.converge(10_000)
  const a = run?.results.find((r) => r.host === 'a.example.com')
  assert.equal(a?.outcome, 'deferred')
  assert.equal(a?.reason, 'awake: 60m of grace left')
  const report = b.agent.report()
  assert.deepEqual(report.rows['a.example.com'], {
    layout: 'flat',
    code: 'awake_grace',
    reason: 'awake: 60m of grace left',
    note: '',
  })
  // The grace is counted from the first deferral, on disk.
  const grace = JSON.parse(await fs.readFile(path.join(b.config.dataDir, 'layout', 'grace.json'), 'utf8')) as {
    hosts: Record<string, { mode: string }>
  }
  assert.equal(grace.hosts['a.example.com']?.mode, 'nested')
})

void test('after start every activator-managed tenant has an instance key; one it had is kept', async (t) => {
  const b = await realBox(t, { start: false })
  await addFlat(b, 'a.example.com')
  await addNested(b, 'n.example.com')
  await addFlat(b, 'k.example.com')
  const kept = 'CARLOS_INSTANCE_KEY=' + 'ab'.repeat(32) + '\n'
  await fs.writeFile(path.join(flatPaths(b.config, 'k.example.com').dir, 'instance.env'), kept)
  const ext = flatPaths(b.config, 'e.example.com')
  await fs.mkdir(ext.dir, { recursive: true })
  b.registry.add({ host: 'e.example.com', kind: 'instance', hibernate: false, ...ext })
  await b.agent.start()
  // The leg's run waits for the backfill: once a run is over, so is it.
  await b.agent.converge(10_000)

  for (const dir of [flatPaths(b.config, 'a.example.com').dir, nestedPaths(b.config, 'n.example.com').dir]) {
    const file = path.join(dir, 'instance.env')
    assert.match(await fs.readFile(file, 'utf8'), /^CARLOS_INSTANCE_KEY=[0-9a-f]{64}\n$/)
    assert.equal((await fs.lstat(file)).mode & 0o777, 0o600)
  }
  assert.equal(
    await fs.readFile(path.join(flatPaths(b.config, 'k.example.com').dir, 'instance.env'), 'utf8'),
    kept,
    'never overwritten',
  )
  await assert.rejects(
    fs.lstat(path.join(ext.dir, 'instance.env')),
    { code: 'ENOENT' },
    'an external row is not the activator’s',
  )
  const keys = await Promise.all(
    ['a.example.com', 'n.example.com'].map(async (h) =>
      fs.readFile(path.join(b.registry.get(h)?.dir ?? '', 'instance.env'), 'utf8'),
    ),
  )
  assert.notEqual(keys[0], keys[1], 'each tenant its own key')
})

void test('CARLOS_ACTIVATOR=none: claims are refused and the set is not taken', async (t) => {
  const b = await realBox(t, { start: false, env: { CARLOS_ACTIVATOR: 'none' } })
  await addFlat(b, 'a.example.com')
  await b.agent.start()
  const res = await claim(b, 'a.example.com')
  assert.equal(res.status, 409)
  assert.equal(res.body.layout, 'unmanaged')
  assert.match(res.body.reason, /CARLOS_ACTIVATOR=none/)
  assert.equal(res.body.code, 'no_activator')
  const put = await b.app.inject({ method: 'PUT', url: '/wakes', payload: { awake: ['a.example.com'] } })
  assert.equal(put.statusCode, 409)
  assert.equal(errorOf(put.body).code, 'conflict')
  await assert.rejects(fs.lstat(path.join(flatPaths(b.config, 'a.example.com').dir, 'instance.env')), {
    code: 'ENOENT',
  })
})

void test('a release that does not come in time: the move fails, the fence is lifted, the tenant runs on where it is', async (t) => {
  // Nobody to ask for the stop (no activator URL) and a short wait for the release.
  const b = await realBox(t, { start: false, stopTimeoutMs: 300 })
  await addFlat(b, 'a.example.com')
  await b.agent.start()
  const first = await claim(b, 'a.example.com')
  assert.equal(first.status, 200)

  await recordIntent(b, 'nested', { force: true })
  // The agent's timers are unref'd (a server keeps the process alive in
  // production); here nothing else would while the move waits for the release.
  const alive = setInterval(() => undefined, 100)
  let run
  try {
    run = await b.agent.converge(10_000)
  } finally {
    clearInterval(alive)
  }
  const a = run?.results.find((r) => r.host === 'a.example.com')
  assert.equal(a?.outcome, 'failed')
  assert.match(a?.reason ?? '', /^stop timed out: still awake after 0s; it keeps running where it is/)
  assert.equal(a?.code, 'stop_timeout')
  // Not fenced any more, still claimed, still at its flat paths with its files.
  const again = await b.app.inject({ method: 'GET', url: '/ready/a.example.com' })
  assert.equal(again.statusCode, 200)
  assert.deepEqual(again.json(), first.body)
  assert.deepEqual(persistedWakes(b.registry), ['a.example.com'])
  assert.equal(await fs.readFile(path.join(first.body.dir, 'host.txt'), 'utf8'), 'a.example.com')
  await assert.rejects(fs.lstat(path.join(b.config.dataDir, 'layout', 'a.example.com.journal')), { code: 'ENOENT' })
  assert.equal(b.agent.report().rows['a.example.com']?.reason, a?.reason, 'the row says why it did not move')
})

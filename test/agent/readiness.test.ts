// Readiness through a real agent: the registry check asks the database, and
// an unchanged answer is the same one; the wake desk's judging of names.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { readinessOf, REGISTRY_CHECK_MS } from '../../src/agent/readiness.js'
import type { AppError } from '../../src/errors.js'
import { addFlat, agentBox } from '../helpers/agent.js'
import { until } from '../helpers/until.js'

void test('the registry readiness check asks the database: a closed connection fails it within REGISTRY_CHECK_MS', async (t) => {
  const b = await agentBox(t)
  await b.agent.start()
  assert.deepEqual(b.agent.readiness().checks[0], { name: 'registry', ok: true, detail: b.registry.file })
  b.registry.close()
  const closedAt = performance.now()
  await until('readiness to see the closed registry', () => !b.agent.readiness().ready)
  assert.ok(
    performance.now() - closedAt < REGISTRY_CHECK_MS + 500,
    `seen after ${Math.round(performance.now() - closedAt)} ms`,
  )
  const r = b.agent.readiness()
  assert.equal(r.checks[0]?.ok, false)
  assert.match(r.checks[0]?.detail ?? '', /not open/)
})

void test('the registry is asked at most once a REGISTRY_CHECK_MS while it answers, and on every call once it does not', () => {
  let pings = 0
  let fail = false
  const registry = {
    file: '/data/registry.db',
    ping() {
      pings++
      if (fail) throw new Error('disk I/O error')
    },
  }
  let now = 0
  const facts = { phase: 'ready' as const, armed: false, registry, claims: { swept: true }, gate: null, now: () => now }
  const first = readinessOf(facts)
  for (let i = 0; i < 100; i++) assert.equal(readinessOf(facts), first)
  assert.equal(pings, 1)
  assert.equal(first.ready, true)
  now += REGISTRY_CHECK_MS - 1
  readinessOf(facts)
  assert.equal(pings, 1)
  now += 1
  fail = true
  const failed = readinessOf(facts)
  assert.equal(pings, 2)
  assert.equal(failed.ready, false)
  assert.deepEqual(failed.checks[0], { name: 'registry', ok: false, detail: '/data/registry.db: disk I/O error' })
  readinessOf(facts)
  assert.equal(pings, 3, 'a failed check is asked again at once')
  fail = false
  assert.equal(readinessOf(facts).ready, true)
  assert.equal(pings, 4)
  readinessOf(facts)
  assert.equal(pings, 4)
})

void test('a passing registry check stands for REGISTRY_CHECK_MS, is asked again once it is that old, and the answer stays the same object', () => {
  let pings = 0
  const registry = { file: '/data/registry.db', ping: () => void pings++ }
  let now = 0
  const facts = { phase: 'ready' as const, armed: false, registry, claims: { swept: true }, gate: null, now: () => now }
  const first = readinessOf(facts)
  now = REGISTRY_CHECK_MS - 1
  assert.equal(readinessOf(facts), first)
  assert.equal(pings, 1, 'cached for a second')
  now = REGISTRY_CHECK_MS
  assert.equal(readinessOf(facts), first)
  assert.equal(pings, 2, 'asked again once the check is REGISTRY_CHECK_MS old')
  now = 2 * REGISTRY_CHECK_MS - 1
  readinessOf(facts)
  assert.equal(pings, 2, 'the new check stands from when it was made')
  now = 2 * REGISTRY_CHECK_MS
  readinessOf(facts)
  assert.equal(pings, 3)
})

void test('readiness is the same answer while nothing in it changes, and a new one when something does', async (t) => {
  const b = await agentBox(t)
  const starting = b.agent.readiness()
  assert.equal(b.agent.readiness(), starting)
  await b.agent.start()
  const ready = b.agent.readiness()
  assert.notEqual(ready, starting)
  assert.equal(ready.ready, true)
  assert.equal(b.agent.readiness(), ready)
  // Over HTTP the unchanged answer is the same bytes.
  const first = await b.app.inject({ method: 'GET', url: '/ready' })
  const again = await b.app.inject({ method: 'GET', url: '/ready' })
  assert.equal(first.statusCode, 200)
  assert.equal(again.body, first.body)
  const body = first.json<{ ready: boolean; phase: string; checks: unknown[] }>()
  assert.deepEqual([body.ready, body.phase, body.checks], [ready.ready, ready.phase, ready.checks])
  b.registry.close()
  const failed = await until('/ready to answer 503', async () => {
    const res = await b.app.inject({ method: 'GET', url: '/ready' })
    return res.statusCode === 503 ? res : undefined
  })
  assert.equal(failed.json<{ checks: Array<{ ok: boolean }> }>().checks[0]?.ok, false)
})

void test('a wake is judged without re-validating a registry host; a name that is not a hostname is still invalid_host', async (t) => {
  const b = await agentBox(t)
  await addFlat(b, 'a.example.com')
  await b.agent.start()
  assert.equal((await b.agent.readyFor('a.example.com')).granted, true)
  const unknown = await b.agent.readyFor('z.example.com')
  assert.equal(unknown.granted, false)
  assert.equal(unknown.granted ? '' : unknown.refusal.code, 'unknown_host')
  assert.match(unknown.granted ? '' : unknown.refusal.reason, /z\.example\.com/)
  for (const bad of ['A.example.com', 'a_b.example.com', '..%2Fetc']) {
    await assert.rejects(b.agent.readyFor(bad), (err: AppError) => err.code === 'invalid_host', bad)
    await assert.rejects(b.agent.claimWake(bad), (err: AppError) => err.code === 'invalid_host', bad)
  }
  assert.deepEqual(b.agent.wakes().awake, [])
})

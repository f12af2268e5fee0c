import assert from 'node:assert/strict'
import { test } from 'node:test'
import { errors } from '../../src/errors.js'
import { build, errorOf, sampleReport, sampleRun } from '../helpers/fake-agent.js'
import type { LayoutReport, LegRun, LegState } from '../../src/domain/schemas.js'
import { RESULTS_PER_TURN } from '../../src/report/run-json.js'
import Fastify from 'fastify'
import { StatusBody } from '../../src/report/report-json.js'
import { ROWS_PER_TURN } from '../../src/report/report-json.js'

void test('GET /layout/status answers the report with its version as a strong ETag, and 304 while it is unchanged', async (t) => {
  const { app, agent } = await build(t)
  const first = await app.inject({ method: 'GET', url: '/layout/status' })
  assert.equal(first.statusCode, 200)
  assert.deepEqual(first.json(), sampleReport())
  const etag = first.headers.etag
  assert.equal(etag, '"fake.1"', "the ETag is the report's tag, quoted, never weak")

  const again = await app.inject({ method: 'GET', url: '/layout/status', headers: { 'if-none-match': etag } })
  assert.equal(again.statusCode, 304)
  assert.equal(again.body, '')
  assert.equal(again.headers.etag, etag)

  // A proxy may weaken the tag and a client may send a list: both still match.
  const listed = await app.inject({
    method: 'GET',
    url: '/layout/status',
    headers: { 'if-none-match': `"other", W/${etag}` },
  })
  assert.equal(listed.statusCode, 304)

  agent.reportValue = { ...sampleReport(), warnings: ['something changed'] }
  const changed = await app.inject({ method: 'GET', url: '/layout/status', headers: { 'if-none-match': etag } })
  assert.equal(changed.statusCode, 200)
  assert.equal(changed.headers.etag, '"fake.2"')
  assert.match(String(changed.headers['content-type']), /^application\/json; charset=utf-8$/)
  assert.deepEqual(changed.json<{ warnings: string[] }>().warnings, ['something changed'])

  // The bytes are kept per tag: a report changed in place under the same
  // tag is not read again, which is the contract the tag makes.
  const reads = agent.reportReads
  agent.reportValue.warnings.push('changed in place')
  const same = await app.inject({ method: 'GET', url: '/layout/status' })
  assert.equal(same.body, changed.body)
  assert.equal(agent.reportReads, reads + 1)
})

void test('GET /layout/status serializes a report of many rows a slice per turn, byte for byte what its schema makes in one piece', async (t) => {
  const { app, agent } = await build(t)
  // Hosts and texts with quotes, braces and the keys the answer is spliced at: none of them may move a splice.
  const rows: LayoutReport['rows'] = {}
  for (let i = 0; i < ROWS_PER_TURN * 2 + 3; i++) {
    const host = i % 5 === 0 ? `odd "rows":{} \\ host ${i}` : `t${i}.example.com`
    rows[host] = {
      layout: i % 2 === 0 ? 'flat' : 'nested',
      code: i % 7 === 0 ? 'gate_shut' : '',
      reason: i % 7 === 0 ? 'a "lastRun":null and "rows":{} ]}' : '',
      note: i % 11 === 0 ? 'set aside "x"' : '',
    }
  }
  const results = Array.from({ length: RESULTS_PER_TURN + 1 }, (_, i) => ({
    host: `t${i}.example.com`,
    outcome: 'moved' as const,
    code: i % 3 === 0 ? ('move_finished' as const) : ('' as const),
    reason: i % 3 === 0 ? '"rows":{}' : '',
    to: 'nested' as const,
  }))
  agent.reportValue = {
    ...sampleReport(),
    rows,
    leg: {
      running: true,
      pending: false,
      lastRun: { startedAt: '2026-12-02T00:00:00.000Z', finishedAt: null, results },
      retryAt: null,
    },
    warnings: ['"rows":{} and "lastRun":null'],
  }
  const res = await app.inject({ method: 'GET', url: '/layout/status' })
  assert.equal(res.statusCode, 200)
  // In one piece: a bare Fastify serializing the same object by the route's schema.
  const whole = Fastify()
  t.after(() => whole.close())
  whole.get('/', { schema: { response: { 200: StatusBody } } }, () => agent.reportValue)
  assert.equal(res.body, (await whole.inject({ method: 'GET', url: '/' })).body)
  assert.deepEqual(res.json(), agent.reportValue)
  // And an empty box: no rows, no run.
  agent.reportValue = {
    ...sampleReport(),
    rows: {},
    leg: { running: false, pending: false, lastRun: null, retryAt: null },
  }
  assert.deepEqual((await app.inject({ method: 'GET', url: '/layout/status' })).json(), agent.reportValue)
})

void test('a conditional GET /layout/status builds nothing, and a new version is built once for its readers', async (t) => {
  const { app, agent } = await build(t)
  const first = await app.inject({ method: 'GET', url: '/layout/status' })
  const builds = agent.reportBuilds
  for (let i = 0; i < 3; i++)
    assert.equal(
      (await app.inject({ method: 'GET', url: '/layout/status', headers: { 'if-none-match': first.headers.etag } }))
        .statusCode,
      304,
    )
  assert.equal((await app.inject({ method: 'GET', url: '/layout/status' })).body, first.body)
  assert.equal(agent.reportBuilds, builds, 'the version served: nothing built again')
  agent.reportValue = { ...sampleReport(), warnings: ['changed'] }
  await app.inject({ method: 'GET', url: '/layout/status' })
  await app.inject({ method: 'GET', url: '/layout/status' })
  assert.equal(agent.reportBuilds, builds + 1)
})

void test('POST /layout/converge kicks the leg and answers 202 with its state', async (t) => {
  const { app, agent } = await build(t)
  const res = await app.inject({ method: 'POST', url: '/layout/converge' })
  assert.equal(res.statusCode, 202)
  assert.deepEqual(res.json(), { leg: { running: true, pending: false, lastRun: null, retryAt: null } })
  assert.equal(agent.kicks, 1)

  const zero = await app.inject({ method: 'POST', url: '/layout/converge?wait=0' })
  assert.equal(zero.statusCode, 202)
  assert.equal(agent.kicks, 2)
})

void test('POST /layout/converge?wait=1 waits for the run and answers its results', async (t) => {
  const { app, agent } = await build(t)
  // inject() is lazy until awaited; start the request now.
  const pending = Promise.resolve(app.inject({ method: 'POST', url: '/layout/converge?wait=1' }))
  const call = await agent.nextConverge()
  assert.equal(call.timeoutMs, 600_000, 'without timeout the wait is the cap')
  agent.legValue = { running: false, pending: false, lastRun: sampleRun(), retryAt: null }
  call.finish(sampleRun())
  const res = await pending
  assert.equal(res.statusCode, 200)
  assert.deepEqual(res.json(), { leg: agent.legValue, run: sampleRun() })
})

void test('POST /layout/converge?wait=1 writes its answer by the response schemas, as JSON, leaving out what they do not name', async (t) => {
  const { app, agent } = await build(t)
  const pending = Promise.resolve(app.inject({ method: 'POST', url: '/layout/converge?wait=1' }))
  const call = await agent.nextConverge()
  // What the schemas do not name stays out of the answer, as the route's serializer would keep it out.
  const leaky = (): LegRun =>
    ({ ...sampleRun(), secret: 'x', results: sampleRun().results.map((r) => ({ ...r, secret: 'y' })) }) as LegRun
  agent.legValue = {
    running: false,
    pending: false,
    lastRun: sampleRun(),
    retryAt: null,
    secret: 'z',
  } as unknown as LegState
  call.finish(leaky())
  const res = await pending
  assert.equal(res.statusCode, 200)
  assert.match(String(res.headers['content-type']), /^application\/json/)
  assert.doesNotMatch(res.body, /secret/)
  assert.deepEqual(res.json(), {
    leg: { running: false, pending: false, lastRun: sampleRun(), retryAt: null },
    run: sampleRun(),
  })
})

void test('POST /layout/converge?wait=1 answers a run of many results, serialized a slice per turn, exactly as one piece', async (t) => {
  const { app, agent } = await build(t)
  const outcomes = ['moved', 'unchanged', 'held', 'deferred'] as const
  const many = (n: number, tag: string): LegRun => ({
    startedAt: '2026-12-02T00:00:00.000Z',
    finishedAt: '2026-12-02T00:00:09.000Z',
    // Reasons with quotes, brackets and the keys the answer is spliced at: none of them may move a splice.
    results: Array.from({ length: n }, (_, i) => ({
      host: `t${i}.${tag}.example`,
      outcome: outcomes[i % outcomes.length] ?? 'moved',
      code: i % 7 === 0 ? ('stop_timeout' as const) : ('' as const),
      reason: i % 7 === 0 ? `a "results":[] and "lastRun":null in ${tag} ]}` : '',
      ...(i % 3 === 0 ? {} : { to: 'nested' as const }),
    })),
  })
  // More than two slices of RESULTS_PER_TURN, the leg's last run the very run waited for.
  const run = many(RESULTS_PER_TURN * 2 + 7, 'one')
  const pending = Promise.resolve(app.inject({ method: 'POST', url: '/layout/converge?wait=1' }))
  const call = await agent.nextConverge()
  agent.legValue = { running: false, pending: true, lastRun: run, retryAt: null, waiting: 'the activator' }
  call.finish(run)
  const res = await pending
  assert.equal(res.statusCode, 200)
  assert.deepEqual(res.json(), { leg: agent.legValue, run })

  // A run started since: the leg's last run is another one, serialized apart.
  const next = many(RESULTS_PER_TURN + 1, 'two')
  const second = Promise.resolve(app.inject({ method: 'POST', url: '/layout/converge?wait=1' }))
  const call2 = await agent.nextConverge()
  agent.legValue = { running: true, pending: false, lastRun: next, retryAt: '2026-12-02T01:00:00.000Z' }
  call2.finish(run)
  const res2 = await second
  assert.deepEqual(res2.json(), { leg: agent.legValue, run })

  // And a run with no result at all.
  const empty: LegRun = { startedAt: run.startedAt, finishedAt: run.finishedAt, results: [] }
  const third = Promise.resolve(app.inject({ method: 'POST', url: '/layout/converge?wait=1' }))
  const call3 = await agent.nextConverge()
  agent.legValue = { running: false, pending: false, lastRun: null, retryAt: null }
  call3.finish(empty)
  assert.deepEqual((await third).json(), { leg: agent.legValue, run: empty })
})

void test('POST /layout/converge?wait=true&timeout=N bounds the wait and answers 504 when the run outlasts it', async (t) => {
  const { app, agent } = await build(t)
  const pending = Promise.resolve(app.inject({ method: 'POST', url: '/layout/converge?wait=true&timeout=2' }))
  const call = await agent.nextConverge()
  assert.equal(call.timeoutMs, 2000)
  call.finish(null)
  const res = await pending
  assert.equal(res.statusCode, 504)
  const err = errorOf(res.body)
  assert.equal(err.code, 'converge_timeout')
  assert.match(err.message, /within 2s/)
})

void test('POST /layout/converge refuses a timeout above the cap and an unknown wait, naming the field', async (t) => {
  const { app, agent } = await build(t)
  const tooLong = await app.inject({ method: 'POST', url: '/layout/converge?wait=1&timeout=601' })
  assert.equal(tooLong.statusCode, 400)
  assert.equal(errorOf(tooLong.body).code, 'bad_request')
  assert.match(errorOf(tooLong.body).message, /timeout/)

  const odd = await app.inject({ method: 'POST', url: '/layout/converge?wait=yes' })
  assert.equal(odd.statusCode, 400)
  assert.match(errorOf(odd.body).message, /wait/)
  assert.equal(agent.kicks, 0, 'a refused request kicks nothing')
})

void test('GET /layout/mint answers the mode, and 503 intent_unreadable while the intent cannot be read', async (t) => {
  const { app, agent } = await build(t)
  const ok = await app.inject({ method: 'GET', url: '/layout/mint' })
  assert.equal(ok.statusCode, 200)
  assert.deepEqual(ok.json(), { mode: 'nested' })

  agent.mintValue = 'flat'
  assert.deepEqual((await app.inject({ method: 'GET', url: '/layout/mint' })).json(), { mode: 'flat' })

  agent.mintValue = errors.intentUnreadable('deploy store timed out')
  const down = await app.inject({ method: 'GET', url: '/layout/mint' })
  assert.equal(down.statusCode, 503)
  assert.deepEqual(errorOf(down.body), {
    code: 'intent_unreadable',
    message: 'the layout intent is unreadable: deploy store timed out',
  })
})

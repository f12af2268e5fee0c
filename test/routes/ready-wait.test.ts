// GET /ready/:host?wait= against the real agent (design §6.4): a fenced
// host's wait ends when its fence lifts, the gauge counts it, and a client
// that goes away releases it.
import assert from 'node:assert/strict'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { test } from 'node:test'
import { addFlat, agentBox } from '../helpers/agent.js'
import { until } from '../helpers/until.js'

const H = 'a.example.com'

function gauge(text: string): number {
  const m = /^carlos_layout_ready_waiters (\S+)$/m.exec(text)
  return Number(m?.[1])
}

void test('a wait on a fenced host answers 200 when the fence lifts, and 503 with Retry-After when its time ends', async (t) => {
  const b = await agentBox(t)
  await addFlat(b, H)
  await b.agent.start()
  // The leg's first run, kicked at start, is over: nothing but the test fences or lifts from here.
  await until('the first run', () => b.agent.legState().lastRun !== null && !b.agent.legState().running)
  b.fence.fence([H], 7)
  const fenced = await b.app.inject({ method: 'GET', url: `/ready/${H}` })
  assert.equal(fenced.statusCode, 409)
  // Whole seconds, what the fences lifted so far leave of this one: how long they stood is the machine's.
  assert.match(String(fenced.headers['retry-after']), /^[1-9][0-9]*$/)

  const ended = await b.app.inject({ method: 'GET', url: `/ready/${H}?wait=500ms` })
  assert.equal(ended.statusCode, 503)
  assert.match(String(ended.headers['retry-after']), /^[1-9][0-9]*$/)
  assert.equal(ended.json<{ code: string }>().code, 'fenced_for_move')

  const waited = b.app.inject({ method: 'GET', url: `/ready/${H}?wait=30s` })
  await until('the wait is counted', async () => gauge(await b.metrics.text()) === 1)
  b.fence.lift([H])
  const res = await waited
  // Woken by the lift: a wait whose time ran out answers 503, as above; how soon is the bench's to measure.
  assert.equal(res.statusCode, 200)
  assert.equal(res.json<{ host: string }>().host, H)
  assert.equal(gauge(await b.metrics.text()), 0)
})

void test('a client that closes its connection releases its wait', async (t) => {
  const b = await agentBox(t)
  await addFlat(b, H)
  await b.agent.start()
  // The leg's first run, kicked at start, is over: nothing but the test fences or lifts from here.
  await until('the first run', () => b.agent.legState().lastRun !== null && !b.agent.legState().running)
  b.fence.fence([H], 7)
  await b.app.listen({ host: '127.0.0.1', port: 0 })
  const { port } = b.app.server.address() as AddressInfo
  const req = http.get({ host: '127.0.0.1', port, path: `/ready/${H}?wait=30s` })
  req.on('error', () => undefined)
  await until('the wait is counted', async () => gauge(await b.metrics.text()) === 1)
  req.destroy()
  await until('the wait is released', async () => gauge(await b.metrics.text()) === 0)
})

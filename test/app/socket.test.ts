// On a real socket: the bytes a client sees (ETag, an empty 304) and the
// server's own timeouts, which inject never exercises.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { request } from 'undici'
import { build, sampleRun } from '../helpers/fake-agent.js'

async function listen(app: Awaited<ReturnType<typeof build>>['app']): Promise<string> {
  await app.listen({ port: 0, host: '127.0.0.1' })
  const addr = app.server.address()
  assert.ok(addr !== null && typeof addr === 'object')
  return `http://127.0.0.1:${addr.port}`
}

void test('over a socket: the report, its ETag, and an empty 304', async (t) => {
  const { app } = await build(t)
  const base = await listen(app)
  const first = await request(`${base}/layout/status`)
  assert.equal(first.statusCode, 200)
  const etag = first.headers.etag
  assert.ok(typeof etag === 'string')
  const body = await first.body.text()
  assert.equal(first.headers['content-length'], String(Buffer.byteLength(body)))

  const second = await request(`${base}/layout/status`, { headers: { 'if-none-match': etag } })
  assert.equal(second.statusCode, 304)
  assert.equal(second.headers.etag, etag)
  assert.equal(await second.body.text(), '')
})

void test('over a socket: a converge wait outlives the idle timeout of the connection', async (t) => {
  const idleMs = 50
  const { app, agent } = await build(t, { timeouts: { connectionMs: idleMs } })
  const base = await listen(app)
  const pending = request(`${base}/layout/converge?wait=1&timeout=5`, { method: 'POST' })
  const call = await agent.nextConverge()
  // Time is the subject: the connection stays silent for several idle
  // timeouts, which would close it had the wait not extended its own.
  await sleep(idleMs * 4)
  call.finish(sampleRun())
  const res = await pending
  assert.equal(res.statusCode, 200)
  assert.deepEqual((await res.body.json() as { run: unknown }).run, sampleRun())
})

// The agent listens from its first moment even when etcd hangs at boot
// (design §4.4): with a first endpoint that accepts a connection and never
// answers, `layoutd serve` answers /livez 200 and /ready 503 with the phase
// while its claim of the box label still waits on that endpoint; once the
// claim gives up on it (etcd away is no refusal), /ready turns 200.
import assert from 'node:assert/strict'
import net from 'node:net'
import { test, type TestContext } from 'node:test'
import { request } from 'undici'
import { AgentProcess, makeSandbox } from '../helpers/agent-process.js'
import { tmpDir } from '../helpers/tmp.js'
import { until } from '../helpers/until.js'

/** A loopback server that accepts connections, reads what comes, and never answers. */
async function silentServer(t: TestContext): Promise<{ url: string; seen: () => number }> {
  const open = new Set<net.Socket>()
  let seen = 0
  const server = net.createServer((socket) => {
    open.add(socket)
    seen++
    socket.on('data', () => undefined)
    socket.on('error', () => undefined)
    socket.once('close', () => open.delete(socket))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(async () => {
    for (const s of open) s.destroy()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  })
  const addr = server.address() as net.AddressInfo
  return { url: `http://127.0.0.1:${addr.port}`, seen: () => seen }
}

void test('serve answers /livez and a 503 /ready while its etcd endpoint hangs, then is ready', async (t) => {
  const silent = await silentServer(t)
  const sb = await makeSandbox(await tmpDir(t, 'layoutd-hang-'), 'hang-01')
  const agent = await AgentProcess.start(sb, { env: { CARLOS_DEPLOYMENT_ETCD: silent.url } })
  t.after(() => agent.stop())
  const gaveUp = /box label could not be taken yet/

  // Listening while the label's claim waits on the silent endpoint: it has not given up on it yet.
  await until('the claim to ask the silent endpoint', () => silent.seen() >= 1)
  const livez = await request(`${agent.url}/livez`, { headersTimeout: 10_000, bodyTimeout: 10_000 })
  await livez.body.dump()
  const ready = await request(`${agent.url}/ready`, { headersTimeout: 10_000, bodyTimeout: 10_000 })
  const body = (await ready.body.json()) as { ready: boolean; phase: string }
  const said = agent.tail()
  assert.equal(livez.statusCode, 200)
  assert.equal(ready.statusCode, 503)
  assert.equal(body.ready, false)
  assert.notEqual(body.phase, 'ready')
  assert.doesNotMatch(said, gaveUp, 'etcd had not answered, nor been given up on, when /livez and /ready answered')

  // The claim gives up on an etcd that never answers (no refusal: the label is taken once etcd answers),
  // and the agent is ready, having listened throughout.
  await agent.waitReady(40_000)
  const out = agent.tail()
  assert.match(out, gaveUp)
  assert.ok(out.indexOf('Server listening at') < out.search(gaveUp), 'listening came before the claim ended')
})

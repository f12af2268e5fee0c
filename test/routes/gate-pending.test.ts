// Until the isolation gate's first checks have run, a nested host that
// would be ready is not yet judged (design §6.4): `503` with Retry-After
// from `/ready/:host`, `POST /wakes/:host` and `/gate`, never `409`, which
// an activator reads as no. The gate's first self-check is held by its
// filesystem calls, so the window is the test's to open and close.
import assert from 'node:assert/strict'
import nodeFs from 'node:fs/promises'
import { test } from 'node:test'
import type { WakeRefusal } from '../../src/agent-api.js'
import type { SelfCheckFs } from '../../src/infra/isolation.js'
import { addFlat, addNested, agentBox, recordIntent } from '../helpers/agent.js'
import { until } from '../helpers/until.js'
import { deferred } from '../domain/fakes.js'

void test("a ready nested host answers 503 not yet judged until the gate's first self-check, then 200; never 409", async (t) => {
  const held = deferred()
  let calls = 0
  const selfCheckFs: SelfCheckFs = {
    mkdir: (async (...args: Parameters<typeof nodeFs.mkdir>) => {
      if (calls++ === 0) await held.promise
      return nodeFs.mkdir(...args)
    }) as SelfCheckFs['mkdir'],
    lstat: nodeFs.lstat,
    readdir: nodeFs.readdir,
    rm: nodeFs.rm,
  }
  // However the test ends, the held check is let go, so the agent can stop.
  t.after(() => held.resolve())
  const b = await agentBox(t, { selfCheckFs })
  await addNested(b, 'n.example.com')
  await addFlat(b, 'f.example.com')
  await recordIntent(b, 'nested')
  await b.agent.start()
  await until('the self-check to be under way', () => calls > 0)
  assert.equal((await b.app.inject({ method: 'GET', url: '/ready' })).statusCode, 200)

  const ready = await b.app.inject({ method: 'GET', url: '/ready/n.example.com' })
  assert.equal(ready.statusCode, 503, ready.body)
  assert.equal(ready.json<WakeRefusal>().code, 'gate_pending')
  assert.match(ready.json<WakeRefusal>().reason, /not yet run/)
  assert.equal(ready.headers['retry-after'], '1')
  const claim = await b.app.inject({ method: 'POST', url: '/wakes/n.example.com' })
  assert.equal(claim.statusCode, 503, claim.body)
  assert.equal(claim.json<WakeRefusal>().code, 'gate_pending')
  assert.equal(claim.headers['retry-after'], '1')
  const gate = await b.app.inject({ method: 'GET', url: '/gate/n.example.com' })
  assert.deepEqual(
    [gate.statusCode, gate.headers['layoutd-state'], gate.headers['layoutd-code']],
    [503, 'starting', 'gate_pending'],
  )
  assert.equal(gate.headers['retry-after'], '1')
  const nginx = await b.app.inject({ method: 'GET', url: '/gate/n.example.com?auth_request=1' })
  assert.equal(nginx.statusCode, 401, 'not yet, in the form nginx passes on')
  assert.deepEqual(b.agent.wakes().awake, [], 'nothing was recorded')
  // A flat host does not wait for the gate.
  assert.equal((await b.app.inject({ method: 'POST', url: '/wakes/f.example.com' })).statusCode, 200)

  held.resolve()
  const after = await until('the gate to have judged', async () => {
    const res = await b.app.inject({ method: 'GET', url: '/ready/n.example.com' })
    return res.statusCode === 503 ? undefined : res
  })
  assert.equal(after.statusCode, 200, after.body)
  assert.equal((await b.app.inject({ method: 'POST', url: '/wakes/n.example.com' })).statusCode, 200)
})

void test('a gate that has judged and is shut still refuses a nested host 409 gate_shut', async (t) => {
  const b = await agentBox(t, { probe: 'ready: false\n' })
  await addNested(b, 'n.example.com')
  await recordIntent(b, 'nested')
  await b.agent.start()
  const shut = await until('the gate to have judged', async () => {
    const res = await b.app.inject({ method: 'POST', url: '/wakes/n.example.com' })
    return res.json<WakeRefusal>().code === 'gate_shut' ? res : undefined
  })
  assert.equal(shut.statusCode, 409)
  assert.equal(shut.headers['retry-after'], '1')
})

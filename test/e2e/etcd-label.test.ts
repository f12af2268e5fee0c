// One agent per box label, end to end on the real etcd (design §7.5): a
// second `layoutd serve` with the same CARLOS_BOX (a copied env file, another
// data root) refuses to start (it listens, and exits before it is ready),
// naming the holder, and the first agent's summary stays its own; the same
// data root restarted after kill -9 takes its label over at once.
import assert from 'node:assert/strict'
import path from 'node:path'
import { test } from 'node:test'
import { AgentProcess, freePort, MAIN_JS, makeSandbox, sandboxEnv } from '../helpers/agent-process.js'
import { ended, spawnFor } from '../helpers/child.js'
import { EtcdServer } from '../helpers/etcd.js'
import { tmpDir } from '../helpers/tmp.js'
import { until } from '../helpers/until.js'

void test('a second serve with the same box label on etcd refuses to start, naming the holder', async (t) => {
  const etcd = await EtcdServer.forTest(t)
  const root = await tmpDir(t, 'layoutd-label-')
  const env = { CARLOS_DEPLOYMENT_ETCD: etcd.url }
  const first = await makeSandbox(path.join(root, 'a'), 'web-01')
  const agent = await AgentProcess.start(first, { env })
  t.after(() => agent.stop())
  await agent.waitReady()
  await until('the first summary', async () => (await etcd.range('/carlos/layout/boxes/')).size === 1)

  const clone = await makeSandbox(path.join(root, 'b'), 'web-01')
  const child = spawnFor(t, process.execPath, [MAIN_JS, 'serve'], {
    env: sandboxEnv(clone, { ...env, CARLOS_AGENT_LISTEN: `127.0.0.1:${await freePort()}` }),
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  child.stdout?.setEncoding('utf8').on('data', (s: string) => (output += s))
  child.stderr?.setEncoding('utf8').on('data', (s: string) => (output += s))
  // Bounded: a second agent that took the label would serve on, never exit.
  const { code } = await ended(child, 'the second agent', 60_000).catch((err: unknown) => {
    throw new Error(`${(err as Error).message}; its output:\n${output}`)
  })
  assert.equal(code, 1, output)
  assert.match(
    output,
    new RegExp(
      `box label web-01 is held by another agent \\(pid ${agent.pid} on host \\S+, data root ${first.dataDir}`,
    ),
  )
  // It listened from its first moment (design §4.4), and stopped before it was ever ready.
  assert.match(output, /Server listening at/)
  assert.doesNotMatch(output, /layout: ready/)
  const labels = await etcd.range('/carlos/layout/labels/')
  assert.equal((JSON.parse(labels.get('/carlos/layout/labels/web-01') ?? '{}') as { pid?: number }).pid, agent.pid)

  // kill -9, and the same data root again: the label is taken over at once, not after the lease's 30 s.
  await agent.kill()
  const again = await AgentProcess.start(first, { env })
  t.after(() => again.stop())
  await again.waitReady(20_000)
  const now = await etcd.range('/carlos/layout/labels/')
  assert.equal((JSON.parse(now.get('/carlos/layout/labels/web-01') ?? '{}') as { pid?: number }).pid, again.pid)
})

// `layoutd fleet …` with the first etcd endpoint stopped (SIGSTOP: its
// connections are accepted, nothing answers): the command, run as the CLI
// runs it (its own store opened from the environment, closed at its end),
// gives the stopped member up after the dial bound and answers from the
// others, well inside the request bound a stopped member used to cost.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { dispatch } from '../../src/cli/dispatch.js'
import { DIAL_TIMEOUT_MS, REQUEST_TIMEOUT_MS } from '../../src/infra/deploy-etcd/gateway.js'
import { EtcdDeployStore } from '../../src/infra/deploy-etcd/store.js'
import { EtcdCluster } from '../helpers/etcd-cluster.js'
import { sink } from '../helpers/sink.js'

/** `layoutd fleet status --json` as the CLI runs it: its exit status, how long it took, what it printed. */
async function fleetStatus(
  endpoints: readonly string[],
): Promise<{ code: number; ms: number; out: string; err: string }> {
  const out = sink()
  const err = sink()
  const environ = { CARLOS_BOX: 'ops', CARLOS_DEPLOYMENT_ETCD: endpoints.join(',') }
  const t0 = performance.now()
  const code = await dispatch(['fleet', 'status', '--json'], { environ, stdout: out.stream, stderr: err.stream })
  const ms = performance.now() - t0
  return { code, ms, out: out.text(), err: err.text() }
}

/** The labels of the boxes `fleet status --json` showed. */
function boxesOf(json: string): string[] {
  const shown = JSON.parse(json) as { boxes: Array<{ box: string }> }
  return shown.boxes.map((b) => b.box)
}

void test('a fleet command with the first etcd member stopped gives it up after the dial bound', async (t) => {
  const cluster = await EtcdCluster.forTest(t)
  await cluster.leader()
  const agent = new EtcdDeployStore(cluster.endpoints)
  t.after(() => agent.close())
  await agent.publishBox(
    {
      box: 'box-1',
      version: '0.1.0',
      intent: null,
      mode: 'none',
      converged: false,
      counts: {},
      held: 0,
      leg: { running: false, pending: false, lastRunAt: null },
      at: new Date().toISOString(),
    },
    AbortSignal.timeout(10_000),
  )
  const healthy = await fleetStatus(cluster.endpoints)
  const [first] = cluster.members
  assert.ok(first !== undefined)
  // Stopped until the cluster's end, which kills it as it is.
  await first.pause()
  // A read waits out the election when the stopped member led: a leader among the others first.
  await cluster.leader([first])

  const stopped = await fleetStatus(cluster.endpoints)
  // The same answer (the box has not converged: exit 1) as with every member up.
  assert.equal(stopped.code, healthy.code, stopped.err)
  assert.deepEqual(boxesOf(stopped.out), ['box-1'])
  assert.deepEqual(boxesOf(healthy.out), ['box-1'])
  // The request bound is a floor on a command that waits it out: one under it gave the member up sooner.
  assert.ok(
    stopped.ms < REQUEST_TIMEOUT_MS,
    `fleet status took ${Math.round(stopped.ms)} ms with the first member stopped (healthy: ` +
      `${Math.round(healthy.ms)} ms; dial bound ${DIAL_TIMEOUT_MS} ms, request bound ${REQUEST_TIMEOUT_MS} ms)`,
  )
})

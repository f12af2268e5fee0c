// A staged rollout on a real 3-member etcd cluster (test/helpers/etcd-cluster.ts)
// across in-process boxes that run the agent's store client, watch, lease,
// summary, rollout follower and intent poller (test/helpers/sim-box.ts; the
// pass is a stand-in): the leader is killed while a wave runs, and later a
// member is stopped (SIGSTOP) and resumed (SIGCONT). The operator's command
// has long returned; the rollout still ends done, no wave's box moved before
// the wave before it was over, never more than N moved at once, and no box
// moved twice.
import assert from 'node:assert/strict'
import { setTimeout as delay } from 'node:timers/promises'
import { PassThrough } from 'node:stream'
import { test } from 'node:test'
import { fleetCommand } from '../../src/cli/commands/fleet.js'
import { loadConfig } from '../../src/config.js'
import type { RolloutRecord } from '../../src/domain/rollout.js'
import { EtcdDeployStore } from '../../src/infra/deploy-etcd/store.js'
import { EtcdCluster } from '../helpers/etcd-cluster.js'
import { SimFleet, movesBroken } from '../helpers/sim-fleet.js'
import { until } from '../helpers/until.js'

const PREFIX = `/test/rollout-cluster-${process.pid}/`

void test('a rollout goes on through a killed leader and a stopped member: no wave early, no box twice', async (t) => {
  const cluster = await EtcdCluster.forTest(t)
  // The request bound gives a stopped member up (a live one must answer within it, on a loaded machine too); a
  // lease outlasts a renewal that waits it out and then asks the next member.
  const storeOptions = { prefix: PREFIX, requestTimeoutMs: 5_000, connectTimeoutMs: 5_000, boxTtlMs: 15_000 }
  const fleet = new SimFleet({
    endpoints: cluster.endpoints,
    prefix: PREFIX,
    boxes: 8,
    passMs: 400,
    store: storeOptions,
  })
  t.after(() => fleet.stop())
  await fleet.start()
  const ops = new EtcdDeployStore(cluster.endpoints, storeOptions)
  t.after(() => ops.close())
  const port = ops.rollouts()
  const stderr = new PassThrough()
  let err = ''
  stderr.on('data', (d: Buffer) => (err += d.toString()))
  const config = loadConfig({ CARLOS_BOX: 'ops', CARLOS_DEPLOYMENT_ETCD: cluster.endpoints.join(',') })
  const argv = ['rollout', 'migrate', '--waves', '1,25%,50%,100%', '--max-parallel', '2', '-m', 'cluster']
  const code = await fleetCommand(argv, { config, store: ops, stdout: new PassThrough(), stderr })
  assert.equal(code, 0, err)

  // The read's bound outlasts the store's request bound, so a stopped member is given up and the next asked.
  const current = async (): Promise<RolloutRecord | undefined> => {
    try {
      return (await port.active(AbortSignal.timeout(20_000))).current?.record
    } catch {
      return undefined
    }
  }
  // Bounds on giving up, generous: elections and retries under a loaded machine take many seconds.
  const atWave = (w: number) => until(`wave ${w + 1}`, async () => ((await current())?.wave ?? -1) >= w, 120_000)

  // The leader dies while wave 2 runs.
  await atWave(1)
  const leader = await cluster.leader()
  await leader.kill()
  await atWave(2)
  await leader.restart()
  // A member stops answering while wave 3 and 4 run, then comes back.
  const stopped = await cluster.leader()
  await stopped.pause()
  await atWave(3)
  await delay(1_000)
  await stopped.resume()

  const done = await until(
    'the rollout to be done',
    async () => {
      const r = await current()
      return r?.state === 'done' ? r : undefined
    },
    120_000,
  )
  assert.deepEqual(movesBroken(done, fleet.moves, fleet.maxMoving), [])
  assert.equal(new Set(fleet.moves.map((m) => m.box)).size, 8, 'every box moved')
  assert.equal(fleet.moves.length, 8, 'and each once')
  assert.deepEqual(fleet.errors(), [])
})

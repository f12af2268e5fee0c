// The rollout's gauges (design §9, §7.6): the state and open wave of the
// rollout in play, and this box's deferred rows in it, as its last
// progress said; a progress of another rollout counts for none.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Registry } from 'prom-client'
import type { RolloutRecord } from '../../src/domain/rollout.js'
import { RolloutMetrics } from '../../src/metrics/rollout-metrics.js'

function rollout(id: string, over: Partial<RolloutRecord> = {}): RolloutRecord {
  const at = '2026-12-07T10:00:00.000Z'
  return {
    id,
    mode: 'nested',
    force: false,
    waves: [['a'], ['b']],
    maxParallel: 1,
    progressDeadlineMs: 600_000,
    onFailure: 'pause',
    maxFailedRows: 0,
    state: 'running',
    wave: 0,
    waveOpenedAt: at,
    reason: '',
    recordedAt: at,
    by: 'ops@test',
    message: '',
    ...over,
  }
}

async function value(registry: Registry, name: string): Promise<number | undefined> {
  const m = (await registry.getMetricsAsJSON()).find((x) => x.name === name)
  return m?.values[0]?.value
}

void test("the deferred-rows gauge says this box's deferred rows in the rollout in play, 0 otherwise", async () => {
  const registry = new Registry()
  const gauges = new RolloutMetrics(registry)
  const deferred = () => value(registry, 'carlos_layout_rollout_deferred_rows')
  assert.equal(await deferred(), 0)
  const r1 = rollout('r1')
  gauges.set(r1)
  assert.equal(await deferred(), 0, 'not done in it yet')
  gauges.progress('r1', { deferredRows: 3 })
  assert.equal(await deferred(), 3)
  gauges.set({ ...r1, state: 'paused', cause: 'operator_pause', reason: 'paused by ops' })
  assert.equal(await deferred(), 3, 'a paused rollout still has its deferred rows')
  gauges.progress('r1', { deferredRows: 0 })
  assert.equal(await deferred(), 0, 'the tenant slept: its rows moved')
  gauges.progress('r1', { deferredRows: 2 })
  gauges.set(rollout('r2'))
  assert.equal(await deferred(), 0, "the last rollout's progress says nothing of the one now in play")
  assert.match(await registry.metrics(), /carlos_layout_rollout_state\{state="running"\} 1/)
  assert.match(await registry.metrics(), /carlos_layout_rollout_wave 1\n/)
})

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { METRICS, nameOf, PREFIX } from '../../src/metrics/definitions.js'
import { Metrics } from '../../src/metrics/metrics.js'
import { RolloutMetrics } from '../../src/metrics/rollout-metrics.js'

void test("the agent's metrics are the table's, each with the table's type and help", async () => {
  const metrics = new Metrics()
  // The rollout's gauges are made by RolloutMetrics on the same registry, where a store keeps rollouts.
  new RolloutMetrics(metrics.registry)
  const exported = new Map<string, { type: string; help: string }>()
  for (const m of await metrics.registry.getMetricsAsJSON())
    if (m.name.startsWith(PREFIX)) exported.set(m.name, { type: String(m.type), help: m.help })
  const table = new Map(Object.values(METRICS).map((d) => [nameOf(d), d]))
  for (const [name, m] of exported) {
    const d = table.get(name)
    assert.ok(d !== undefined, `${name} is exported but has no line in the table`)
    assert.deepEqual(m, { type: d.kind, help: d.help }, name)
  }
  for (const name of table.keys()) assert.ok(exported.has(name), `${name} is in the table but not exported`)
})

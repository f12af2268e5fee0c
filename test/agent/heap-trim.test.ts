// After a large run the agent asks V8 for one full collection, a second
// later; a small run asks for none.
import assert from 'node:assert/strict'
import { constants, PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks'
import { test } from 'node:test'
import { setTimeout as delay } from 'node:timers/promises'
import { TRIM_AFTER_HOSTS, TRIM_DELAY_MS, trimHeapAfterRun } from '../../src/agent/heap-trim.js'

void test('a run that reached TRIM_AFTER_HOSTS hosts is followed by a full collection, not at once, a smaller one by none', async () => {
  // One observer for the whole test: Node stops reporting collections to
  // an observer made after another one disconnected.
  let major = 0
  let seen = (): void => {}
  const obs = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      if ((e as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind !== constants.NODE_PERFORMANCE_GC_MAJOR)
        continue
      major++
      seen()
    }
  })
  obs.observe({ entryTypes: ['gc'] })
  try {
    assert.equal(trimHeapAfterRun(TRIM_AFTER_HOSTS - 1), false)
    await delay(300)
    assert.equal(major, 0, 'a small run asked for a collection')
    const first = new Promise<void>((resolve) => (seen = resolve))
    assert.equal(trimHeapAfterRun(TRIM_AFTER_HOSTS), true)
    await delay(TRIM_DELAY_MS / 2)
    assert.equal(major, 0, "the collection came in the breath of the run's ending")
    await Promise.race([first, delay(5000)])
    assert.equal(major, 1, 'no full collection after a large run')
  } finally {
    obs.disconnect()
  }
})

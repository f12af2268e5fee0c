// After a large run the agent asks V8 for one last-resort collection (two or
// more full ones back to back), a second later; a small run asks for none; runs that end close together share one;
// and a heap that has not grown since the last is left alone.
import assert from 'node:assert/strict'
import { constants, PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks'
import { test } from 'node:test'
import { setTimeout as delay } from 'node:timers/promises'
import v8 from 'node:v8'
import {
  ALLOCATOR_TRIM_DELAY_MS,
  TRIM_AFTER_HOSTS,
  TRIM_DELAY_MS,
  TRIM_GROWTH_BYTES,
  trimHeapAfterRun,
} from '../../src/agent/heap-trim.js'
import { until } from '../helpers/until.js'

/** Full collections, counted as they come (one observer for the file: Node stops reporting to one made after another disconnected). */
const majors = { count: 0, at: [] as number[] }
const obs = new PerformanceObserver((list) => {
  for (const e of list.getEntries()) {
    if ((e as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind !== constants.NODE_PERFORMANCE_GC_MAJOR)
      continue
    majors.count++
    majors.at.push(performance.now())
  }
})
obs.observe({ entryTypes: ['gc'] })

/** Keeps some MB of small objects alive until released: the heap V8 holds grows by them. */
function grow(bytes: number): { release: () => void } {
  let kept: Array<{ a: number; b: string }> | undefined = []
  for (let i = 0; i < bytes / 48; i++) kept.push({ a: i, b: `x${i}` })
  return { release: () => (kept = undefined) }
}

void test('a run that reached TRIM_AFTER_HOSTS hosts is followed by a full collection, not at once, a smaller one by none', async () => {
  assert.equal(trimHeapAfterRun(TRIM_AFTER_HOSTS - 1), false)
  await delay(300)
  assert.equal(majors.count, 0, 'a small run asked for a collection')
  // The first collection here is made whatever the heap (none was made before).
  assert.equal(trimHeapAfterRun(TRIM_AFTER_HOSTS), true)
  await delay(TRIM_DELAY_MS / 2)
  assert.equal(majors.count, 0, "the collection came in the breath of the run's ending")
  // A last-resort collection is two or more full ones back to back. Awaited, not slept for: its report comes
  // on a later turn, which a machine busy with other work may give after any fixed sleep.
  await until('a full collection after a large run', () => majors.count >= 1)
})

void test('two large runs that end close together share one collection, a second after the later', async () => {
  const before = majors.count
  const garbage = grow(4 * TRIM_GROWTH_BYTES)
  trimHeapAfterRun(TRIM_AFTER_HOSTS)
  await delay(TRIM_DELAY_MS / 2)
  const second = performance.now()
  trimHeapAfterRun(TRIM_AFTER_HOSTS)
  garbage.release()
  await until(
    'a collection a second after the later run',
    () => majors.at.slice(before).filter((t) => t >= second + TRIM_DELAY_MS - 5).length >= 1,
  )
  assert.equal(
    majors.at.slice(before).filter((t) => t > second && t < second + TRIM_DELAY_MS - 5).length,
    0,
    'a collection came a second after the first run, though a second run had ended since',
  )
})

void test('a large run after which the heap has not grown since the last collection is followed by none', async () => {
  const held = v8.getHeapStatistics().total_heap_size
  const before = majors.count
  assert.equal(trimHeapAfterRun(TRIM_AFTER_HOSTS), true)
  await delay(TRIM_DELAY_MS * 1.5)
  assert.ok(v8.getHeapStatistics().total_heap_size < held + TRIM_GROWTH_BYTES, 'the heap grew by itself meanwhile')
  assert.equal(majors.count, before, 'a collection of a heap that had not grown')
  obs.disconnect()
})

void test("what a run holds is released before the collection, and again before the allocator's trim", (t) => {
  t.mock.timers.enable({ apis: ['setTimeout'] })
  let released = 0
  assert.equal(
    trimHeapAfterRun(TRIM_AFTER_HOSTS, () => released++),
    true,
  )
  t.mock.timers.tick(TRIM_DELAY_MS)
  assert.equal(released, 1)
  t.mock.timers.tick(ALLOCATOR_TRIM_DELAY_MS - TRIM_DELAY_MS)
  assert.equal(released, 2)
})

// The loop's one budget for sliced work: however many parts wait on it, a
// turn of the loop runs about one slice of them, then the loop goes round.
import assert from 'node:assert/strict'
import { performance } from 'node:perf_hooks'
import { test } from 'node:test'
import { SLICE_MS, Slicer } from '../../src/domain/loop-turns.js'

function spin(ms: number): void {
  const until = performance.now() + ms
  while (performance.now() < until) {
    // A slice of synchronous work.
  }
}

void test('a part that finds the turn spent by another waits for the loop to go round, and parts resume in the order they came', async () => {
  const log: string[] = []
  // Budgets of 0: each part waits at every pause, so only the turns decide who runs when.
  const first = new Slicer(0)
  const second = new Slicer(0)
  const a = (async () => {
    await first.pause()
    // What the loop does between turns: reading a request, say.
    setImmediate(() => log.push('loop'))
    spin(SLICE_MS + 1)
    log.push('first')
  })()
  const b = (async () => {
    await second.pause()
    log.push('second')
  })()
  await Promise.all([a, b])
  assert.deepEqual(log, ['first', 'loop', 'second'], 'the second part waited for the loop, not beside the first')
})

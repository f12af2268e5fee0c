// The single-flight rule the leg and the intent poller share: one run at a
// time, and kicks during a run make exactly one more.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { SingleFlight } from '../../src/domain/single-flight.js'

/** A runner whose runs each wait for release(); counts runs and overlaps. */
function gatedRunner() {
  const releases: Array<() => void> = []
  let active = 0
  const seen = { runs: 0, overlaps: 0, idles: 0 }
  const flight = new SingleFlight({
    run: async () => {
      seen.runs++
      if (++active > 1) seen.overlaps++
      await new Promise<void>((resolve) => releases.push(resolve))
      active--
    },
    onIdle: () => seen.idles++,
  })
  const started = async (n: number): Promise<void> => {
    while (releases.length < n) await new Promise((r) => setImmediate(r))
  }
  return { flight, seen, releases, started }
}

void test('kicks during a run make exactly one more run, never an overlapping one', async () => {
  const { flight, seen, releases, started } = gatedRunner()
  flight.kick()
  await started(1)
  assert.equal(flight.running, true)
  flight.kick()
  flight.kick()
  flight.kick()
  assert.equal(flight.pending, true)
  releases[0]?.()
  await started(2)
  assert.equal(flight.pending, false)
  releases[1]?.()
  await flight.wait()
  assert.deepEqual(seen, { runs: 2, overlaps: 0, idles: 1 })
  assert.equal(flight.running, false)
})

void test('a kick starts its run off the kicker’s stack', async () => {
  const { flight, seen, releases, started } = gatedRunner()
  flight.kick()
  assert.equal(seen.runs, 0, 'not run inside kick()')
  await started(1)
  releases[0]?.()
  await flight.wait()
})

void test('stop drops a pending run, lets the one under way end, and makes later kicks no-ops', async () => {
  const { flight, seen, releases, started } = gatedRunner()
  flight.kick()
  await started(1)
  flight.kick()
  flight.stop()
  assert.equal(flight.pending, false)
  releases[0]?.()
  await flight.wait()
  flight.kick()
  await new Promise((r) => setImmediate(r))
  assert.equal(seen.runs, 1)
  assert.equal(flight.stopped, true)
})

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { spreadOf, type RunDoc } from './spread.js'

function run(idleMB: number, p99Ms: number, bareP99Ms: number, startSeconds: number): RunDoc {
  return {
    startUp: { rows: { seconds: startSeconds }, journals: { seconds: 2 } },
    routesImport: { seconds: 0.8 },
    afterConverge: { rssMB: 120, idle: { rssMB: idleMB } },
    readyHostDuringConverge: { p99Ms, machineFloor: { p99Ms: bareP99Ms } },
    convergeVsFloor: { ratio: 0.7 },
    lagDuringConverge: { p99Ms: 20 },
  }
}

void test('a target is met only where every run met it', () => {
  const s = spreadOf([run(95, 20, 10, 0.8), run(101, 20, 10, 0.8), run(90, 20, 10, 0.8)])
  assert.deepEqual(s.rssIdleMB?.values, [95, 101, 90])
  assert.equal(s.rssIdleMB?.met, '2 of 3')
  assert.equal(s.rssIdleMB?.metInEvery, false)
  assert.deepEqual([s.rssIdleMB?.min, s.rssIdleMB?.median, s.rssIdleMB?.max], [90, 95, 101])
  assert.equal(s.rssAfterConvergeMB?.metInEvery, true)
})

void test('the 10 ms aim holds only in a run whose bare server answered under 3 ms', () => {
  // A loaded run: 20 ms beside a bare 10 ms is within 3× and the aim does not apply.
  assert.equal(spreadOf([run(90, 20, 10, 0.8)]).readyP99Ms?.metInEvery, true)
  // A quiet run: the same 20 ms beside a bare 2 ms misses both.
  const quiet = spreadOf([run(90, 20, 2, 0.8)])
  assert.equal(quiet.readyP99Ms?.metInEvery, false)
  assert.equal(quiet.readyP99TimesBare?.metInEvery, false)
  assert.deepEqual(quiet.readyP99TimesBare?.values, [10])
})

void test('a figure no run measured is left out, and an even count takes the middle two', () => {
  const convergeOnly = (idleMB: number): RunDoc => ({ afterConverge: { rssMB: 130, idle: { rssMB: idleMB } } })
  const s = spreadOf([convergeOnly(96), convergeOnly(98), convergeOnly(94), convergeOnly(99)])
  assert.equal(s.startToReadySeconds, undefined)
  assert.equal(s.rssIdleMB?.median, 97)
  assert.equal(s.rssIdleMB?.met, '4 of 4')
})

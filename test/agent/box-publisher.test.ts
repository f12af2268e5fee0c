// The box's summary publisher: a summary only when it says something new,
// and none built from a new report while a run is under way (a converge of
// many rows changes the report after every batch), with the run's end
// publishing the counts again.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { BoxPublisher } from '../../src/agent/box-publisher.js'
import type { BoxSummary } from '../../src/domain/box-summary.js'
import { reportFigures, type ReportFigures, type SummaryAsk } from '../../src/report/figures.js'
import { tallyOf } from '../../src/report/build.js'
import type { LayoutReport } from '../../src/domain/schemas.js'
import { FakeClock, FakeLogger, FakeStore, intent } from '../domain/fakes.js'

function report(flat: number, nested: number, running: boolean): LayoutReport {
  const rows: LayoutReport['rows'] = {}
  for (let i = 0; i < flat; i++) rows[`f${i}.example.com`] = { layout: 'flat', code: '', reason: '', note: '' }
  for (let i = 0; i < nested; i++) rows[`n${i}.example.com`] = { layout: 'nested', code: '', reason: '', note: '' }
  return {
    box: 'kass-1',
    mode: 'nested',
    default: false,
    defaultBlocked: '',
    leg: { running, pending: false, lastRun: null, retryAt: null },
    warnings: [],
    rows,
  }
}

/** The figures the agent would count of report, under tag: the summary ask asks for. */
function figuresOf(tag: string, r: LayoutReport, ask: SummaryAsk): Promise<ReportFigures> {
  return Promise.resolve(reportFigures({ tag, report: r, tally: tallyOf(r, () => false) }, ask))
}

/** A store that keeps every summary published to it. */
function recordingStore(): {
  store: FakeStore & { publishBox: (s: BoxSummary) => Promise<void> }
  published: BoxSummary[]
} {
  const published: BoxSummary[] = []
  const store = Object.assign(new FakeStore([]), {
    publishBox: (s: BoxSummary) => {
      published.push(s)
      return Promise.resolve()
    },
  })
  return { store, published }
}

void test('while a run is under way the summary is the last one marked busy, built from no report; the run end publishes new counts', async () => {
  const clock = new FakeClock()
  const { store, published } = recordingStore()
  let running = false
  let moved = 0
  let built = 0
  const publisher = new BoxPublisher({
    config: { activatorUrl: '' },
    store,
    logger: new FakeLogger(),
    clock,
    figures: (ask) => {
      built++
      return figuresOf(`${moved}.${running}`, report(4 - moved, moved, running), ask)
    },
    tag: () => `${moved}.${running}`,
    legBusy: () => ({ running, pending: false }),
    version: () => Promise.resolve('0.1.0'),
    signal: new AbortController().signal,
  })
  const settle = async () => {
    clock.advance(0)
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve))
  }
  publisher.noteIntent(intent({ id: 'i1' }))
  await settle()
  assert.equal(built, 1)
  assert.deepEqual(published.at(-1)?.counts, { flat: 4 })
  assert.equal(published.at(-1)?.canStopAwake, false)

  running = true
  for (moved = 1; moved <= 3; moved++) {
    publisher.noteIntent(intent({ id: 'i1' }))
    await settle()
  }
  assert.equal(built, 1, 'no report built for a summary while the run is under way')
  assert.equal(published.length, 2, 'the busy leg published once, then nothing new')
  assert.deepEqual(published.at(-1)?.leg.running, true)
  assert.deepEqual(published.at(-1)?.counts, { flat: 4 }, 'the counts of the last summary')
  assert.equal(published.at(-1)?.converged, false)

  running = false
  moved = 4
  publisher.update()
  await settle()
  assert.equal(built, 2)
  assert.deepEqual(published.at(-1)?.counts, { nested: 4 })
  assert.equal(published.at(-1)?.leg.running, false)

  // A new intent during a run is not the last summary's: that one is built.
  running = true
  publisher.noteIntent(intent({ id: 'i2' }))
  await settle()
  assert.equal(built, 3)
  assert.equal(published.at(-1)?.intent, 'i2')
})

void test('a report whose tag has not moved since the last summary is not counted again; another tag, or another intent, is', async () => {
  const clock = new FakeClock()
  const { store, published } = recordingStore()
  // Each count is one ask for the report's figures: the asks say how many times it was counted.
  let reads = 0
  let tag = 1
  let current = report(3, 0, false)
  const publisher = new BoxPublisher({
    config: { activatorUrl: '' },
    store,
    logger: new FakeLogger(),
    clock,
    figures: (ask) => {
      reads++
      return figuresOf(String(tag), current, ask)
    },
    tag: () => String(tag),
    legBusy: () => ({ running: false, pending: false }),
    version: () => Promise.resolve('0.1.0'),
    signal: new AbortController().signal,
  })
  const settle = async () => {
    clock.advance(0)
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve))
  }
  publisher.noteIntent(intent({ id: 'i1', mode: 'nested' }))
  await settle()
  assert.equal(reads, 1)
  for (let i = 0; i < 3; i++) {
    publisher.noteIntent(intent({ id: 'i1', mode: 'nested' }))
    await settle()
  }
  assert.equal(reads, 1, 'the same tag and intent: the last count stands')
  assert.equal(published.length, 1)

  publisher.noteIntent(intent({ id: 'i2', mode: 'nested' }))
  await settle()
  assert.equal(reads, 2, 'another intent: counted again')
  assert.equal(published.at(-1)?.intent, 'i2')

  current = report(1, 2, false)
  tag++
  publisher.update()
  await settle()
  assert.equal(reads, 3, 'another tag: counted again')
  assert.deepEqual(published.at(-1)?.counts, { flat: 1, nested: 2 })
})

void test('while a run is under way the summary says the mode the leg noted for it, as the box page does', async () => {
  const clock = new FakeClock()
  const { store, published } = recordingStore()
  let running = false
  let mode: LayoutReport['mode'] = 'none'
  let built = 0
  const publisher = new BoxPublisher({
    config: { activatorUrl: '' },
    store,
    logger: new FakeLogger(),
    clock,
    figures: (ask) => {
      built++
      return figuresOf(`${mode}.${running}`, { ...report(2, 0, running), mode }, ask)
    },
    tag: () => `${mode}.${running}`,
    legBusy: () => ({ running, pending: false }),
    mode: () => mode,
    version: () => Promise.resolve('0.1.0'),
    signal: new AbortController().signal,
  })
  const settle = async () => {
    clock.advance(0)
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve))
  }
  // The poller read a flat intent; the leg has not read it yet: the report still says none.
  publisher.noteIntent(intent({ id: 'i1', mode: 'flat' }))
  await settle()
  assert.equal(published.at(-1)?.mode, 'none')
  // The leg's run reads it and notes flat, which the box's own page says from then on.
  running = true
  mode = 'flat'
  publisher.update()
  await settle()
  assert.equal(built, 1, 'no report built while the run is under way')
  assert.equal(published.at(-1)?.mode, 'flat', 'the fleet says the mode the box says')
  assert.equal(published.at(-1)?.leg.running, true)
})

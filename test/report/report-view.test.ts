// The report as a cached value with a version (design §6.2): the tag moves
// with its inputs and reading it builds nothing; a build in slices is
// shared by the readers of its version and gives the loop turns; each row
// is judged against the registry of its own slice.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { ReportView } from '../../src/report/report-view.js'
import type { Config } from '../../src/config.js'
import { IntentState } from '../../src/domain/intent-state.js'
import { Leg } from '../../src/domain/leg.js'
import type { LayoutPass, RowsSnapshot } from '../../src/domain/ports.js'
import type { Route } from '../../src/domain/schemas.js'
import { listedSnapshot } from '../../src/infra/rows-snapshot.js'
import { FakeClock, FakeLogger } from '../domain/fakes.js'

const row = (i: number, shape: 'flat' | 'nested' = 'flat'): Route => ({
  host: `t${i}.example.com`,
  kind: 'instance',
  hibernate: true,
  socket: `/d/run/t${i}.sock`,
  dir: shape === 'flat' ? `/d/apps/t${i}.example.com` : `/d/nested/t${i}.example.com/data`,
  db: '',
})

/** A pass that judges a row by its dir alone, in at least usPerRow µs, and counts its changes by hand. */
function fakePass(usPerRow = 0) {
  const pass = {
    changed: 0,
    changes: () => pass.changed,
    classify: (route: Route) => {
      for (const until = performance.now() + usPerRow / 1000; performance.now() < until;);
      return {
        layout: route.dir.includes('/nested/') ? ('nested' as const) : ('flat' as const),
        code: '' as const,
        reason: '',
      }
    },
    held: () => undefined,
    note: () => '',
  }
  return pass
}

function setup(n: number, usPerRow = 0) {
  let rows: RowsSnapshot = listedSnapshot(Array.from({ length: n }, (_, i) => row(i)))
  const registry = { snapshot: () => rows }
  const view = new ReportView({
    config: { box: 'b1', activator: 'http://127.0.0.1:1' } as unknown as Config,
    registry,
    layoutDir: {
      verifyRoots: () => Promise.resolve(),
      journalHosts: () => Promise.resolve([]),
      holdHosts: () => Promise.resolve([]),
    },
    state: new IntentState(),
    gate: null,
  })
  const leg = new Leg({
    run: () => Promise.resolve({ results: [], retry: false, unfinished: false }),
    clock: new FakeClock(),
    logger: new FakeLogger(),
    retryMs: 600_000,
  })
  const pass = fakePass(usPerRow)
  return {
    view,
    leg,
    pass: pass as unknown as LayoutPass & { changed: number },
    setRows: (r: Route[]) => (rows = listedSnapshot(r)),
  }
}

void test('the tag moves when an input does, and reading it builds nothing', () => {
  const { view, leg, pass } = setup(3)
  const first = view.tag('ready', pass, leg)
  assert.equal(view.tag('ready', pass, leg), first, 'same inputs, same tag')
  pass.changed++
  const second = view.tag('ready', pass, leg)
  assert.notEqual(second, first)
  assert.equal(view.builds, 0, 'no report was built to tell')
  assert.equal(view.report('ready', pass, leg).rows['t1.example.com']?.layout, 'flat')
  view.report('ready', pass, leg)
  assert.equal(view.builds, 1, 'built once for its version')
})

void test('the readers of one version share one build in slices, which hands the loop back', async () => {
  const { view, leg, pass } = setup(20_000)
  let turns = 0
  const ticking = setInterval(() => turns++, 0)
  try {
    const tag = view.tag('ready', pass, leg)
    const [a, b, c] = await Promise.all([
      view.reportSoon('ready', pass, leg),
      view.reportSoon('ready', pass, leg),
      view.reportSoon('ready', pass, leg),
    ])
    assert.equal(view.builds, 1)
    assert.ok(a === b && b === c)
    assert.equal(a?.tag, tag)
    assert.equal(Object.keys(a?.report.rows ?? {}).length, 20_000)
    assert.ok(turns > 0, 'timers ran while it was built')
    assert.equal(view.report('ready', pass, leg), a?.report, 'and the report of this tick is that one')
    assert.equal(view.builds, 1)
  } finally {
    clearInterval(ticking)
  }
})

void test('a build in slices judges each row against the registry of its slice, and leaves out a row gone since', async () => {
  // 20 ms of rows at least: more than the first slice judges.
  const { view, leg, pass, setRows } = setup(2000, 10)
  const soon = view.reportSoon('ready', pass, leg)
  // The first slice is judged in this tick; the rest after the pass moved
  // the last row to nested and another process removed the one before it.
  setRows([...Array.from({ length: 1998 }, (_, i) => row(i)), row(1999, 'nested')])
  const { report } = await soon
  assert.equal(report.rows['t0.example.com']?.layout, 'flat')
  assert.equal(report.rows['t1999.example.com']?.layout, 'nested', 'judged with its row as it is now, not as listed')
  assert.equal(report.rows['t1998.example.com'], undefined, 'a row gone is not reported')
  assert.equal(Object.keys(report.rows).length, 1999)
})

import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import Value from 'typebox/value'
import { IntentState } from '../../src/domain/intent-state.js'
import type { Classification, LayoutPass } from '../../src/domain/ports.js'
import { why, type Why } from '../../src/domain/reason-codes.js'
import { IDLE_LEG, layoutStatusReport, MIXED_WARNING, tallyOf, unmanagedLayoutReport } from '../../src/report/build.js'
import { LayoutReport, type LegState, type Route } from '../../src/domain/schemas.js'

const dirs = { dataDir: '/data', runDir: '/data/run' }

function flat(host: string, over: Partial<Route> = {}): Route {
  return {
    host,
    kind: 'instance',
    socket: `/data/run/${host}.sock`,
    dir: `/data/apps/${host}`,
    db: '',
    hibernate: true,
    ...over,
  }
}
function nested(host: string, over: Partial<Route> = {}): Route {
  return {
    host,
    kind: 'instance',
    socket: `/data/nested/${host}/run/app.sock`,
    dir: `/data/nested/${host}/data`,
    db: '',
    hibernate: true,
    ...over,
  }
}

/** A pass that answers from tables, recording which rows it was asked to classify. */
class FakePass implements LayoutPass {
  asked: string[] = []
  constructor(
    private readonly words: Record<string, Classification>,
    private readonly holds: Record<string, string> = {},
    private readonly notes: Record<string, string> = {},
  ) {}
  converge(): Promise<never> {
    return Promise.reject(new Error('not in a report'))
  }
  recover(): Promise<never> {
    return Promise.reject(new Error('not in a report'))
  }
  restoreHolds(): Promise<never> {
    return Promise.reject(new Error('not in a report'))
  }
  classify(route: Route): Classification {
    this.asked.push(route.host)
    return this.words[route.host] ?? { layout: 'foreign', code: 'unknown_shape', reason: 'not in the fake' }
  }
  changes(): number {
    return 0
  }
  facts(): never {
    throw new Error('not in a report built here')
  }

  held(host: string): Why | undefined {
    const reason = this.holds[host]
    return reason === undefined ? undefined : why('second_name', reason)
  }
  note(host: string): string {
    return this.notes[host] ?? ''
  }
}

const busyLeg: LegState = {
  running: true,
  pending: false,
  lastRun: { startedAt: '2026-11-30T08:00:00.000Z', finishedAt: null, results: [] },
  retryAt: null,
}

void describe('layoutStatusReport', () => {
  void it("reports each instance-kind managed row in the pass's own words, with its note", () => {
    const pass = new FakePass(
      {
        'a.example.com': { layout: 'nested', code: '', reason: '' },
        'b.example.com': { layout: 'flat', code: 'awake_grace', reason: 'awake: 42m of grace left' },
      },
      {},
      { 'a.example.com': 'set aside 1 entry at 2026-11-30T08:00:00Z' },
    )
    const routes = [
      nested('a.example.com'),
      flat('b.example.com'),
      flat('side.example.com', { kind: 'sidecar' }),
      flat('s.example.com', { kind: 'static' }),
    ]
    const r = layoutStatusReport({ box: 'kass-1', routes, pass, state: new IntentState(), leg: busyLeg })
    assert.deepEqual(pass.asked, ['a.example.com', 'b.example.com'])
    assert.deepEqual(r.rows, {
      'a.example.com': { layout: 'nested', code: '', reason: '', note: 'set aside 1 entry at 2026-11-30T08:00:00Z' },
      'b.example.com': { layout: 'flat', code: 'awake_grace', reason: 'awake: 42m of grace left', note: '' },
    })
    assert.equal(r.box, 'kass-1')
    assert.deepEqual(r.leg, busyLeg)
    assert.ok(Value.Check(LayoutReport, r), 'the report matches its schema')
  })

  void it('reports a held host that classifies flat as fenced, with the refusal', () => {
    const pass = new FakePass(
      {
        'a.example.com': { layout: 'flat', code: '', reason: '' },
        'b.example.com': { layout: 'conflict', code: 'socket_claimed', reason: 'shares a socket' },
      },
      { 'a.example.com': 'a file of its has a second name', 'b.example.com': 'x' },
    )
    const r = layoutStatusReport({
      box: 'kass-1',
      routes: [flat('a.example.com'), flat('b.example.com')],
      pass,
      state: new IntentState(),
      leg: IDLE_LEG,
    })
    assert.deepEqual(r.rows['a.example.com'], {
      layout: 'fenced',
      code: 'second_name',
      reason: 'held down after a refused move to nested: a file of its has a second name',
      note: '',
    })
    assert.deepEqual(
      r.rows['b.example.com'],
      { layout: 'conflict', code: 'socket_claimed', reason: 'shares a socket', note: '' },
      'only a flat word is turned',
    )
  })

  void it('reports an unflagged socket row as external, without asking the pass, and leaves out rows it does not manage', () => {
    const pass = new FakePass({})
    const routes = [flat('ext.example.com', { hibernate: false }), flat('nosock.example.com', { socket: '' })]
    const r = layoutStatusReport({ box: 'kass-1', routes, pass, state: new IntentState(), leg: IDLE_LEG })
    assert.deepEqual(r.rows, { 'ext.example.com': { layout: 'external', code: '', reason: '', note: '' } })
    assert.deepEqual(pass.asked, [])
  })

  void it('reports the last intent and the default as noted', () => {
    const state = new IntentState()
    const pass = new FakePass({})
    const input = { box: 'kass-1', routes: [], pass, state, leg: IDLE_LEG }
    assert.equal(layoutStatusReport(input).mode, 'none')
    state.noteDefault('nested', '', '')
    assert.deepEqual([layoutStatusReport(input).mode, layoutStatusReport(input).default], ['nested', true])
    state.noteIntent('flat')
    assert.deepEqual([layoutStatusReport(input).mode, layoutStatusReport(input).default], ['flat', false])
  })

  void it('warns when nested and flat rows share the box, and only then', () => {
    const pass = new FakePass({
      'a.example.com': { layout: 'nested', code: '', reason: '' },
      'b.example.com': { layout: 'flat', code: '', reason: '' },
    })
    const base = { box: 'kass-1', pass, state: new IntentState(), leg: IDLE_LEG }
    assert.deepEqual(
      layoutStatusReport({ ...base, routes: [nested('a.example.com'), flat('b.example.com')] }).warnings,
      [MIXED_WARNING],
    )
    assert.deepEqual(layoutStatusReport({ ...base, routes: [nested('a.example.com')] }).warnings, [])
    assert.equal(
      MIXED_WARNING,
      'nested instances share this box with flat ones: they are not isolated until none remains',
    )
  })

  void it('warns when the intent is unreadable, with why', () => {
    const state = new IntentState()
    state.noteIntent('unreadable', 'etcd: deadline exceeded')
    const r = layoutStatusReport({ box: 'kass-1', routes: [], pass: new FakePass({}), state, leg: IDLE_LEG })
    assert.equal(r.mode, 'unreadable')
    assert.deepEqual(r.warnings, [
      'the layout intent cannot be read (etcd: deadline exceeded): nothing moves and nothing is released flat until it can',
    ])
  })

  void it('reports and warns why the nested default is blocked', () => {
    const state = new IntentState()
    state.noteDefault('none', 'isolation not ready: probe: not yet run', 'gate')
    const r = layoutStatusReport({ box: 'kass-1', routes: [], pass: new FakePass({}), state, leg: IDLE_LEG })
    assert.equal(r.defaultBlocked, 'isolation not ready: probe: not yet run')
    assert.deepEqual(r.warnings, ['nested by default is not in force: isolation not ready: probe: not yet run'])
  })

  void it('is the unmanaged report when no pass is armed', () => {
    const r = layoutStatusReport({
      box: 'kass-1',
      routes: [nested('a.example.com')],
      pass: null,
      dirs,
      journalHosts: new Set(),
      holdHosts: new Set(),
    })
    assert.equal(r.mode, 'unmanaged')
    assert.equal(r.rows['a.example.com']?.layout, 'nested')
  })
})

void describe('unmanagedLayoutReport', () => {
  const none = new Set<string>()

  void it('fences a host a journal names, before judging its paths', () => {
    const r = unmanagedLayoutReport({
      box: 'kass-1',
      routes: [nested('a.example.com')],
      dirs,
      journalHosts: new Set(['a.example.com']),
      holdHosts: new Set(['a.example.com']),
    })
    assert.deepEqual(r.rows['a.example.com'], {
      layout: 'fenced',
      code: 'unmanaged_journal',
      reason:
        'layout migration in flight; see /data/layout/a.example.com.journal (no activator on this box to recover it)',
      note: '',
    })
  })

  void it('fences a held host', () => {
    const r = unmanagedLayoutReport({
      box: 'kass-1',
      routes: [flat('a.example.com')],
      dirs,
      journalHosts: none,
      holdHosts: new Set(['a.example.com']),
    })
    assert.deepEqual(r.rows['a.example.com'], {
      layout: 'fenced',
      code: 'unmanaged_hold',
      reason: 'held down after a refused move to nested (no activator on this box to retry it)',
      note: '',
    })
  })

  void it('judges the rest by path shape: nested, external, flat; other rows are left out', () => {
    const routes = [
      nested('a.example.com'),
      nested('b.example.com', { hibernate: false }),
      flat('c.example.com', { hibernate: false }),
      flat('d.example.com'),
      flat('e.example.com', { socket: '' }),
      flat('f.example.com', { kind: 'sidecar' }),
    ]
    const r = unmanagedLayoutReport({ box: 'kass-1', routes, dirs, journalHosts: none, holdHosts: none })
    assert.deepEqual(r.rows, {
      'a.example.com': {
        layout: 'nested',
        code: 'no_activator',
        reason: 'no activator on this box; judged by path shape',
        note: '',
      },
      'b.example.com': {
        layout: 'nested',
        code: 'no_activator',
        reason: 'no activator on this box; judged by path shape',
        note: '',
      },
      'c.example.com': { layout: 'external', code: '', reason: '', note: '' },
      'd.example.com': { layout: 'flat', code: '', reason: '', note: '' },
    })
    assert.deepEqual(r.warnings, [MIXED_WARNING])
  })

  void it('says unmanaged, with no default and an idle leg, and matches the schema', () => {
    const r = unmanagedLayoutReport({
      box: 'kass-1',
      routes: [flat('a.example.com')],
      dirs,
      journalHosts: none,
      holdHosts: none,
    })
    assert.deepEqual(
      { ...r, rows: undefined },
      {
        box: 'kass-1',
        mode: 'unmanaged',
        default: false,
        defaultBlocked: '',
        rows: undefined,
        leg: IDLE_LEG,
        warnings: [],
      },
    )
    assert.ok(Value.Check(LayoutReport, r))
  })

  void it('names no journal for a host that is not a valid name', () => {
    const bad = flat('a.example.com', { host: 'Bad_Host' })
    const r = unmanagedLayoutReport({
      box: 'kass-1',
      routes: [bad],
      dirs,
      journalHosts: new Set(['Bad_Host']),
      holdHosts: none,
    })
    assert.deepEqual(r.rows['Bad_Host'], { layout: 'flat', code: '', reason: '', note: '' })
  })
})

void describe('managedReportSteps', () => {
  void it('yields every REPORT_ROWS_PER_STEP rows and ends with the report layoutStatusReport builds', async () => {
    const { managedReportSteps, REPORT_ROWS_PER_STEP } = await import('../../src/report/build.js')
    const routes = Array.from({ length: REPORT_ROWS_PER_STEP * 3 + 5 }, (_, i) =>
      i % 2 === 0 ? flat(`h${i}.example.com`) : nested(`h${i}.example.com`),
    )
    const words: Record<string, Classification> = Object.fromEntries(
      routes.map((r, i) => [r.host, { layout: i % 2 === 0 ? 'flat' : 'nested', code: '', reason: '' }]),
    )
    const state = new IntentState()
    const steps = managedReportSteps({ box: 'kass-1', routes, pass: new FakePass(words), state, leg: IDLE_LEG })
    let yields = 0
    let step = steps.next()
    while (step.done !== true) {
      yields++
      step = steps.next()
    }
    assert.equal(yields, 3)
    assert.deepEqual(
      step.value.report,
      layoutStatusReport({ box: 'kass-1', routes, pass: new FakePass(words), state, leg: IDLE_LEG }),
    )
    assert.equal(Object.keys(step.value.report.rows).length, routes.length)
    // Tallied as judged: the counts a second walk would make.
    assert.deepEqual(
      step.value.tally,
      tallyOf(step.value.report, () => false),
    )
    assert.deepEqual(step.value.tally.counts, {
      flat: Math.ceil(routes.length / 2),
      nested: Math.floor(routes.length / 2),
    })
  })
})

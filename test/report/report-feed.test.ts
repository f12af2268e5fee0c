// The report built on the report thread from what the loop's thread sends
// (report-feed.ts): after every kind of change a converge makes (a batch's
// rows rewritten, a fence, a hold, a note, a run's results growing, its
// end, another listing of the registry) the thread's copy gives the very
// report the pass itself would, and only what changed is sent.
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { classifyWith, PathClaims } from '../../src/domain/classify.js'
import { Leg, type LegOutcome } from '../../src/domain/leg.js'
import type { Result } from '../../src/domain/modes.js'
import type { PassFacts } from '../../src/domain/ports.js'
import { why, type Why } from '../../src/domain/reason-codes.js'
import { FeedWriter, PART_ITEMS, ReportMirror, type FeedPart, type ReportInputs } from '../../src/report/report-feed.js'
import { layoutStatusReport } from '../../src/report/build.js'
import type { LayoutReport, Route } from '../../src/domain/schemas.js'
import { withheldReasons } from '../../src/report/withheld-reasons.js'
import { deferred, FakeClock, FakeLogger } from '../domain/fakes.js'

const dirs = { dataDir: '/data', runDir: '/data/run' }

function row(host: string, shape: 'flat' | 'nested'): Route {
  return shape === 'flat'
    ? { host, kind: 'instance', socket: `/data/run/${host}.sock`, dir: `/data/apps/${host}`, db: '', hibernate: true }
    : {
        host,
        kind: 'instance',
        socket: `/data/nested/${host}/run/app.sock`,
        dir: `/data/nested/${host}/data`,
        db: '',
        hibernate: true,
      }
}

/** The box as the loop's thread has it, and the report the pass itself would build of it. */
class Box {
  routes: Route[]
  facts: PassFacts = { fenced: [], held: [], notes: [] }
  withheld = new Map<string, Result>()
  gate: string | null = null
  version = 0
  readonly runs: Array<ReturnType<typeof deferred<LegOutcome>>> = []
  readonly leg = new Leg({
    clock: new FakeClock(),
    logger: new FakeLogger(),
    retryMs: 600_000,
    run: () => {
      const d = deferred<LegOutcome>()
      this.runs.push(d)
      return d.promise
    },
  })

  constructor(n: number) {
    this.routes = Array.from({ length: n }, (_, i) => row(`h${String(i).padStart(5, '0')}.example.com`, 'flat'))
  }

  inputs(): ReportInputs {
    return {
      tag: `t.${++this.version}`,
      box: 'kass-1',
      dirs,
      routes: this.routes,
      facts: this.facts,
      intent: { mode: 'nested', default: { applied: false, blocked: '', blockedBy: '' }, unreadableWhy: '' },
      leg: (held) => this.leg.stateSince(held),
      withheld: this.withheld,
      gate: this.gate,
    }
  }

  /** The report as the agent builds it on its own thread: the pass's classify over every row. */
  expected(): LayoutReport {
    const claims = new PathClaims(this.routes)
    const fenced = new Map<string, Why>(this.facts.fenced)
    const held = new Map<string, Why>(this.facts.held)
    const notes = new Map<string, string>(this.facts.notes)
    const report = layoutStatusReport({
      box: 'kass-1',
      routes: this.routes,
      pass: {
        classify: (r) => classifyWith(r, claims, { dirs, fenced: (h) => fenced.get(h) }),
        held: (h) => held.get(h),
        note: (h) => notes.get(h) ?? '',
      },
      state: {
        lastIntent: () => 'nested',
        lastDefault: () => ({ applied: false, blocked: '', blockedBy: '' }),
        unreadableWhy: () => '',
      },
      leg: this.leg.state(),
    })
    return withheldReasons(report, this.withheld, this.gate)
  }

  /** routes with the rows of hosts rewritten to shape, each a new object (as a registry commit carries them). */
  rewrite(from: number, to: number, shape: 'flat' | 'nested'): void {
    this.routes = this.routes.map((r, i) => (i >= from && i < to ? row(r.host, shape) : r))
  }
}

/** Sends inputs through a writer to a mirror, as the two threads do, and answers the report and what was sent. */
function send(
  writer: FeedWriter,
  mirror: ReportMirror,
  inputs: ReportInputs,
): { report: LayoutReport; sent: FeedPart[] } {
  const { parts, head } = writer.next(inputs)
  // Through structured clone, as postMessage carries them.
  for (const part of parts) mirror.take(structuredClone(part))
  return { report: mirror.build(structuredClone(head)), sent: parts }
}

const items = (sent: FeedPart[], list: FeedPart['list']): number =>
  sent.filter((p) => p.list === list).reduce((n, p) => n + p.items.length, 0)

void describe('the report thread: FeedWriter and ReportMirror', () => {
  void it('gives the report the pass would, through a converge, sending only what changed', async () => {
    const box = new Box(2500)
    const writer = new FeedWriter()
    const mirror = new ReportMirror()

    let { report, sent } = send(writer, mirror, box.inputs())
    assert.deepEqual(report, box.expected())
    assert.equal(items(sent, 'rows'), 2500, 'the first send is whole')
    assert.ok(
      sent.every((p) => p.items.length <= PART_ITEMS),
      'a list goes in parts',
    )

    // Nothing changed but the tag: nothing is sent.
    ;({ report, sent } = send(writer, mirror, box.inputs()))
    assert.deepEqual(sent, [])
    assert.deepEqual(report, box.expected())

    // A run starts; a batch is fenced, and its results come in.
    box.leg.kick()
    while (box.runs.length === 0) await new Promise((resolve) => setImmediate(resolve))
    box.facts = {
      fenced: [0, 1, 2].map((i) => [box.routes[i]?.host ?? '', why('in_flight', 'in flight')]),
      held: [],
      notes: [],
    }
    const moved = (r: Route): Result => ({ host: r.host, outcome: 'moved', code: '', reason: '', to: 'nested' })
    for (const r of box.routes.slice(0, 300)) box.leg.progress(moved(r))
    ;({ report, sent } = send(writer, mirror, box.inputs()))
    assert.deepEqual(report, box.expected())
    assert.equal(items(sent, 'results'), 300)
    assert.equal(report.rows[box.routes[1]?.host ?? '']?.layout, 'fenced')

    // The batch's rows are rewritten (a commit): only they are sent, and the claims follow them.
    box.rewrite(0, 300, 'nested')
    box.facts = { fenced: [], held: [], notes: [[box.routes[7]?.host ?? '', 'set aside: x']] }
    for (const r of box.routes.slice(300, 450)) box.leg.progress(moved(r))
    ;({ report, sent } = send(writer, mirror, box.inputs()))
    assert.deepEqual(report, box.expected())
    assert.equal(items(sent, 'replaced'), 300)
    assert.equal(items(sent, 'rows'), 0)
    assert.equal(items(sent, 'results'), 150, 'the results the run gained, no more')

    // A row rewritten onto a neighbour's directory: both read conflict, as the pass's claims say.
    const [a, b] = [box.routes[400] as Route, box.routes[401] as Route]
    box.routes = box.routes.map((r) => (r === b ? { ...b, dir: a.dir } : r))
    ;({ report } = send(writer, mirror, box.inputs()))
    assert.deepEqual(report, box.expected())
    assert.equal(report.rows[b.host]?.layout, 'conflict')

    // The run ends (its results in row order, withheld ones among them), and a hold.
    const refused: Result = { host: a.host, outcome: 'refused', code: 'gate_shut', reason: 'shut', to: 'nested' }
    box.runs[0]?.resolve({ results: [refused], retry: false, unfinished: false })
    while (box.leg.busy().running) await new Promise((resolve) => setImmediate(resolve))
    box.withheld = new Map([[a.host, refused]])
    box.facts = {
      fenced: [[a.host, why('second_name', 'held')]],
      held: [[a.host, why('second_name', 'held')]],
      notes: [],
    }
    ;({ report, sent } = send(writer, mirror, box.inputs()))
    assert.deepEqual(report, box.expected())
    assert.equal(items(sent, 'withheld'), 1)

    // Another listing (a row the CLI added): sent whole again.
    box.routes = [...box.routes.map((r) => ({ ...r })), row('new.example.com', 'flat')]
    box.gate = 'mount /data not nosymfollow'
    ;({ report, sent } = send(writer, mirror, box.inputs()))
    assert.deepEqual(report, box.expected())
    assert.equal(items(sent, 'rows'), 2501)
  })

  void it('a thread that starts again is sent everything', () => {
    const box = new Box(10)
    const writer = new FeedWriter()
    send(writer, new ReportMirror(), box.inputs())
    writer.reset()
    const fresh = new ReportMirror()
    const { report, sent } = send(writer, fresh, box.inputs())
    assert.equal(items(sent, 'rows'), 10)
    assert.deepEqual(report, box.expected())
  })
})

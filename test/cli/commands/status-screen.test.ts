// `status` on a box of 2,000 rows: the warnings before the rows, a
// --problems filter, and a --watch that fits the terminal (summary and
// warnings kept, the rows cut with `… N more`, drawn again on a resize)
// and that says plainly when the agent stopped answering instead of
// drawing its last report as live.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { AgentClient } from '../../../src/cli/agent-client.js'
import { main, watch, type ScreenSize, type StatusContext } from '../../../src/cli/commands/status.js'
import { plain } from '../../../src/cli/status-view.js'
import { loadConfig } from '../../../src/config.js'
import type { LayoutReport, RowReport } from '../../../src/domain/schemas.js'
import { listen, sampleReport } from '../../helpers/fake-agent.js'
import { Sink } from '../../helpers/sink.js'
import { until } from '../../helpers/until.js'

function bigReport(now: number): LayoutReport {
  const rows: Record<string, RowReport> = {}
  for (let i = 0; i < 2000; i++)
    rows[`t${String(i).padStart(4, '0')}.example.com`] = { layout: 'nested', code: '', reason: '', note: '' }
  rows['t0100.example.com'] = { layout: 'fenced', code: 'files_missing', reason: 'files missing', note: '' }
  rows['t0200.example.com'] = { layout: 'flat', code: 'awake_grace', reason: 'awake: 9m of grace left', note: '' }
  const base = sampleReport()
  return {
    ...base,
    rows,
    warnings: ['nested instances share this box with flat ones'],
    leg: {
      ...base.leg,
      lastRun: {
        startedAt: new Date(now - 60_000).toISOString(),
        finishedAt: new Date(now - 50_000).toISOString(),
        results: [],
      },
    },
  }
}

async function status(url: string, ...argv: string[]) {
  const stdout = new Sink()
  const stderr = new Sink()
  const code = await main([...argv, '--url', url], { environ: {}, stdout, stderr })
  return { code, out: stdout.text, err: stderr.text }
}

void test('status prints the warnings before the rows', async (t) => {
  const { agent, url } = await listen(t)
  agent.reportValue = bigReport(Date.now())
  const r = await status(url)
  assert.equal(r.code, 0, r.err)
  const warning = r.out.indexOf('warning: nested instances share')
  assert.ok(warning > 0 && warning < r.out.indexOf('t0000.example.com'), 'the warning comes first')
})

void test('status --problems lists only the rows that are not clean, and counts them', async (t) => {
  const { agent, url } = await listen(t)
  agent.reportValue = bigReport(Date.now())
  const r = await status(url, '--problems')
  assert.equal(r.code, 0, r.err)
  const hosts = [...r.out.matchAll(/^(t\d{4}\.example\.com)/gm)].map((m) => m[1])
  assert.deepEqual(hosts, ['t0100.example.com', 't0200.example.com'])
  assert.match(r.out, /^2 of 2000 rows not clean$/m)
  const usage = await status(url, '--problems', '--json')
  assert.equal(usage.code, 2)
})

/** A terminal the test sizes and resizes. */
function terminal(size: ScreenSize, now: () => number) {
  const stdout = new Sink()
  let redraw: (() => void) | undefined
  const ctx: StatusContext = {
    config: loadConfig({}),
    stdout,
    stderr: new Sink(),
    paint: plain,
    tty: true,
    now,
    size: () => size,
    onResize: (fn) => {
      redraw = fn
      return () => (redraw = undefined)
    },
  }
  /** The frames drawn so far, each without its clear-screen prefix. */
  const frames = () => stdout.text.split('\x1b[H\x1b[2J').slice(1)
  return {
    ctx,
    frames,
    resize(next: ScreenSize) {
      size = next
      redraw?.()
    },
  }
}

void test('--watch fits the terminal: summary and warnings kept, the rows cut with … N more, redrawn on resize', async (t) => {
  const { agent, url } = await listen(t)
  agent.reportValue = bigReport(Date.now())
  const term = terminal({ rows: 20, columns: 60 }, Date.now)
  const stop = new AbortController()
  t.after(() => stop.abort())
  const done = watch(new AgentClient(url, ''), term.ctx, 50, stop.signal)
  await until('a frame', () => term.frames().length >= 1)
  const fits = (frame: string, size: ScreenSize) => {
    const lines = frame.replace(/\n$/, '').split('\n')
    assert.ok(lines.length <= size.rows, `${lines.length} lines on ${size.rows}`)
    for (const line of lines.slice(1)) assert.ok([...line].length <= size.columns, line)
    assert.match(frame, /^box kass-1 /)
    assert.match(frame, /warning: nested instances share/)
    assert.match(frame, /^… \d+ more rows/m)
  }
  fits(term.frames()[0] ?? '', { rows: 20, columns: 60 })
  const before = term.frames().length
  term.resize({ rows: 40, columns: 100 })
  assert.equal(term.frames().length, before + 1, 'a resize draws at once')
  fits(term.frames().at(-1) ?? '', { rows: 40, columns: 100 })
  stop.abort()
  await done
})

void test('--watch says when the agent stopped answering, and does not count its last run on as live', async (t) => {
  const { agent, url, app } = await listen(t)
  let clock = Date.now()
  agent.reportValue = bigReport(clock)
  const term = terminal({ rows: 30, columns: 120 }, () => clock)
  const stop = new AbortController()
  t.after(() => stop.abort())
  const done = watch(new AgentClient(url, ''), term.ctx, 30, stop.signal)
  await until('a frame', () => term.frames().length >= 1)
  assert.match(term.frames()[0] ?? '', /last run 50s ago/)
  // The agent goes away: its connections cut, as a killed process's are.
  const closing = app.close()
  app.server.closeAllConnections()
  await closing
  await until('the agent said gone', () => (term.frames().at(-1) ?? '').includes('agent not answering since'))
  clock += 32_000
  const n = term.frames().length
  await until('another frame', () => term.frames().length > n + 1)
  const last = term.frames().at(-1) ?? ''
  assert.match(last, /^agent not answering since \S+ \(3\ds\): /)
  assert.match(last, /its last report, as it stood at /)
  assert.match(last, /last run 50s ago/, 'the last report is drawn as it stood, not counting on')
  stop.abort()
  await done
})

// The report's withheld reasons, as a pure rule: which results withhold a
// row, and which rows take their reason. No temp box.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { LayoutReport, LegRun, RowReport } from '../../src/domain/schemas.js'
import { withheldBy, withheldReason } from '../../src/report/withheld-reasons.js'
import { IDLE_LEG } from '../../src/report/build.js'

function report(rows: Record<string, Pick<RowReport, 'layout'> & Partial<RowReport>>): LayoutReport {
  const out: LayoutReport = {
    box: 'kass-1',
    mode: 'nested',
    default: false,
    defaultBlocked: '',
    rows: {},
    leg: IDLE_LEG,
    warnings: [],
  }
  for (const [host, r] of Object.entries(rows))
    out.rows[host] = { layout: r.layout, code: r.code ?? '', reason: r.reason ?? '', note: '' }
  return out
}

/** Every row of report given its withheld reason, as the agent's build gives each row as it judges it. */
function reasoned(out: LayoutReport, last: ReturnType<typeof withheldBy>, gate: string | null): LayoutReport {
  for (const [host, row] of Object.entries(out.rows)) withheldReason(host, row, { last, gate })
  return out
}

const RUN: LegRun = {
  startedAt: '2026-11-30T08:00:00.000Z',
  finishedAt: '2026-11-30T08:00:01.000Z',
  results: [
    {
      host: 'd.example.com',
      outcome: 'deferred',
      code: 'awake_grace',
      reason: 'awake: 42m of grace left',
      to: 'nested',
    },
    {
      host: 'r.example.com',
      outcome: 'refused',
      code: 'gate_shut',
      reason: 'isolation not ready: probe: not yet run',
      to: 'nested',
    },
    { host: 'f.example.com', outcome: 'failed', code: 'stop_timeout', reason: 'stop timed out', to: 'nested' },
    {
      host: 'h.example.com',
      outcome: 'held',
      code: 'second_name',
      reason: 'a file of its has a second name',
      to: 'nested',
    },
    { host: 'm.example.com', outcome: 'moved', code: '', reason: '', to: 'nested' },
    { host: 'u.example.com', outcome: 'unchanged', code: '', reason: '' },
    { host: '', outcome: 'failed', code: 'run_failed', reason: 'the run itself failed' },
  ],
}

void test('withheldBy keeps the deferred, refused, failed and held results of a run, by host, and no run-wide one', () => {
  const withheld = withheldBy(RUN)
  assert.deepEqual([...withheld.keys()].sort(), ['d.example.com', 'f.example.com', 'h.example.com', 'r.example.com'])
  assert.equal(withheld.get('d.example.com')?.reason, 'awake: 42m of grace left')
})

void test('a row short of where the last run wanted it takes the reason that run withheld it for', () => {
  const out = reasoned(
    report({
      'd.example.com': { layout: 'flat' },
      'f.example.com': { layout: 'flat' },
      'm.example.com': { layout: 'nested' },
    }),
    withheldBy(RUN),
    null,
  )
  assert.equal(out.rows['d.example.com']?.reason, 'awake: 42m of grace left')
  assert.equal(out.rows['d.example.com']?.code, 'awake_grace', 'the code comes with the reason')
  assert.equal(out.rows['f.example.com']?.reason, 'stop timed out')
  assert.equal(out.rows['f.example.com']?.code, 'stop_timeout')
  assert.equal(out.rows['m.example.com']?.reason, '', 'a moved row has nothing withheld')
})

void test('a row that has since reached the mode, a row with a reason of its own, and a fenced row keep what they say', () => {
  const out = reasoned(
    report({
      'd.example.com': { layout: 'nested' },
      'f.example.com': { layout: 'flat', code: 'awake_grace', reason: 'awake: 10m of grace left' },
      'h.example.com': { layout: 'fenced' },
    }),
    withheldBy(RUN),
    null,
  )
  assert.deepEqual(
    Object.values(out.rows).map((r) => r.reason),
    ['', 'awake: 10m of grace left', ''],
  )
})

void test('while the gate is shut a nested row says it cannot wake, naming the check; a flat row still takes its withheld reason', () => {
  const gate = 'probe: the probe says ready: false'
  const out = reasoned(
    report({ 'n.example.com': { layout: 'nested' }, 'r.example.com': { layout: 'flat' } }),
    withheldBy(RUN),
    gate,
  )
  assert.equal(out.rows['n.example.com']?.reason, `isolation not ready: ${gate}`)
  assert.equal(out.rows['r.example.com']?.reason, 'isolation not ready: probe: not yet run')
})

import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import type { ReasonCode } from '../../src/domain/reason-codes.js'
import type { LayoutReport, RowReport } from '../../src/domain/schemas.js'
import { operatorRows, operatorWarning, warnOfOperatorRows } from '../../src/domain/short-of-intent.js'
import { IDLE_LEG } from '../../src/report/build.js'

function row(layout: string, code: ReasonCode | '' = ''): RowReport {
  return { layout, code, reason: code === '' ? '' : `because ${code}`, note: '' }
}

function report(rows: Record<string, RowReport>): LayoutReport {
  return { box: 'kass-1', mode: 'nested', default: false, defaultBlocked: '', rows, leg: IDLE_LEG, warnings: [] }
}

void describe('operatorRows', () => {
  void it('names the rows a person must act on: held, kept, refused, missing, conflict, foreign', () => {
    const r = report({
      'a.example.com': row('fenced', 'second_name'),
      'b.example.com': row('fenced', 'files_missing'),
      'c.example.com': row('flat', 'socket_too_long'),
      'd.example.com': row('conflict', 'dir_claimed'),
      'e.example.com': row('foreign', 'unknown_shape'),
      'f.example.com': row('fenced', 'ambiguous'),
    })
    assert.deepEqual(
      operatorRows(r).map((x) => `${x.host} ${x.code}`),
      [
        'a.example.com second_name',
        'b.example.com files_missing',
        'c.example.com socket_too_long',
        'd.example.com dir_claimed',
        'e.example.com unknown_shape',
        'f.example.com ambiguous',
      ],
    )
  })

  void it('leaves out what passes on its own or is nobody’s: grace, a move under way, a retried failure, green', () => {
    const r = report({
      'a.example.com': row('flat', 'awake_grace'),
      'b.example.com': row('fenced', 'in_flight'),
      'c.example.com': row('fenced', 'fenced_for_move'),
      'd.example.com': row('fenced', 'agent_starting'),
      'e.example.com': row('fenced', 'recovery_pending'),
      'f.example.com': row('flat', 'stop_timeout'),
      'g.example.com': row('nested'),
      'h.example.com': row('external', 'not_managed'),
      'i.example.com': row('nested', 'no_activator'),
    })
    assert.deepEqual(operatorRows(r), [])
  })
})

void describe('the report warns of them', () => {
  void it('150 rows, 149 nested and 1 held: a warning naming the code, where there was none', () => {
    const rows: Record<string, RowReport> = {}
    for (let i = 0; i < 149; i++) rows[`t${i}.example.com`] = row('nested')
    rows['held.example.com'] = row('fenced', 'second_name')
    const r = warnOfOperatorRows(report(rows))
    assert.equal(r.warnings.length, 1)
    assert.match(r.warnings[0] ?? '', /^1 row needs an operator \(1 second_name\): /)
  })

  void it('counts by code, in the order met; nothing to say is no warning', () => {
    assert.equal(operatorWarning([]), null)
    assert.match(
      operatorWarning([
        { host: 'a.example.com', code: 'second_name' },
        { host: 'b.example.com', code: 'files_missing' },
        { host: 'c.example.com', code: 'second_name' },
      ]) ?? '',
      /^3 rows need an operator \(2 second_name, 1 files_missing\): /,
    )
  })

  void it('an awake tenant in its grace is no warning', () => {
    const r = warnOfOperatorRows(report({ 'a.example.com': row('flat', 'awake_grace') }))
    assert.deepEqual(r.warnings, [])
  })
})

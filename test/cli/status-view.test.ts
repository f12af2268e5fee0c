// What `layoutd status HOST` advises, decided by the reason's code: a
// sentence reworded, or one that happens to hold another kind's words,
// never changes the advice.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { RowReport } from '../../src/domain/schemas.js'
import { whatToDo } from '../../src/cli/status-view.js'

const row = (layout: string, code: RowReport['code'], reason: string): RowReport => ({ layout, code, reason, note: '' })
const none = { journal: false, hold: false }

void test('a fenced row whose move is under way needs nothing, whatever its sentence says', () => {
  for (const code of ['in_flight', 'fenced_for_move', 'agent_starting'] as const)
    assert.match(
      whatToDo(row('fenced', code, 'reworded'), { journal: true, hold: false }, 'nested'),
      /^nothing; it (ends in seconds|clears once `\/ready` is 200)/,
    )
})

void test('a kept journal is advised by its code, even when its sentence reads like a move under way', () => {
  const kept = row('fenced', 'ambiguous', 'files at both ends; the move is in flight, for its move')
  assert.match(
    whatToDo(kept, { journal: true, hold: false }, 'nested'),
    /^a kept journal \(docs\/runbook\.md#a-kept-journal\)$/,
  )
  // A journal with no code on its row: finish it by hand.
  assert.match(whatToDo(row('fenced', '', ''), { journal: true, hold: false }, 'nested'), /^recovery kept the journal/)
})

void test('files missing: find the files first, as the runbook says, not "the leg comes back for it"', () => {
  const missing = row('fenced', 'files_missing', 'files missing: neither side holds them')
  for (const journal of [true, false]) {
    const todo = whatToDo(missing, { journal, hold: false }, 'nested')
    assert.match(todo, /^find the tenant's files first/)
    assert.doesNotMatch(todo, /comes back for it on its own/)
  }
})

void test('an unmanaged journal: arm the activator and restart, not "a move is under way"', () => {
  const todo = whatToDo(
    row('fenced', 'unmanaged_journal', 'layout migration in flight'),
    { journal: true, hold: false },
    'unmanaged',
  )
  assert.match(todo, /^arm the activator \(`CARLOS_ACTIVATOR=claims`\) and restart the agent/)
})

void test('a row not yet where the intent wants it (deferred before a restart) is not "where the intent wants it"', () => {
  const todo = whatToDo(row('flat', '', ''), none, 'nested')
  assert.match(todo, /^nothing yet: the intent wants it nested, and the leg moves it on a run/)
  assert.match(whatToDo(row('nested', '', ''), none, 'nested'), /where the intent wants it/)
})

void test('a flat row is advised by its code: the gate, the grace, the stop that timed out', () => {
  assert.match(whatToDo(row('flat', 'gate_shut', 'not ready'), none, 'nested'), /the-isolation-gate/)
  assert.match(
    whatToDo(row('flat', 'awake_grace', 'still up'), none, 'nested'),
    /^nothing; to move now, a forced intent/,
  )
  assert.match(whatToDo(row('flat', 'stop_timeout', 'awake: yes'), none, 'nested'), /^check the activator/)
})

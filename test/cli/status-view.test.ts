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
      /^nothing: a move/,
    )
})

void test('a kept journal is to finish by hand, even when its sentence reads like a move under way', () => {
  const kept = row('fenced', 'ambiguous', 'files at both ends; the move is in flight, for its move')
  assert.match(whatToDo(kept, { journal: true, hold: false }, 'nested'), /^recovery kept the journal/)
})

void test('a flat row is advised by its code: the gate, the grace, or the leg coming back', () => {
  assert.match(whatToDo(row('flat', 'gate_shut', 'not ready'), none, 'nested'), /isolation gate is shut/)
  assert.match(whatToDo(row('flat', 'awake_grace', 'still up'), none, 'nested'), /keeps its grace/)
  assert.match(whatToDo(row('flat', 'stop_timeout', 'awake: yes'), none, 'nested'), /^nothing yet: the leg comes back/)
  assert.match(whatToDo(row('flat', '', ''), none, 'nested'), /where the intent wants it/)
})

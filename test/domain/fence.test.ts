import assert from 'node:assert/strict'
import { test } from 'node:test'
import { FenceTable } from '../../src/domain/fence.js'

const H = 'a.example.com'

void test('FenceTable: a wake is admitted only while unfenced, atomically', () => {
  const f = new FenceTable()
  let granted = 0
  assert.deepEqual(
    f.admit(H, () => ++granted),
    { admitted: true, value: 1 },
  )
  f.fence([H, 'b.example.com'], 9)
  assert.deepEqual(
    f.admit(H, () => ++granted),
    { admitted: false, generation: 9 },
  )
  assert.equal(granted, 1)
  assert.deepEqual(f.hosts(), [H, 'b.example.com'])
  f.lift([H])
  assert.equal(f.fenced(H), undefined)
  assert.equal(f.fenced('b.example.com'), 9)
})

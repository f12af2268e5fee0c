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

void test('FenceTable: a lift tells its listener which hosts it lifted, and fences are timed', () => {
  let now = 0
  const f = new FenceTable(() => now)
  const heard: string[][] = []
  f.onLift((hosts) => heard.push([...hosts]))
  f.fence([H, 'b.example.com'], 3)
  assert.equal(f.expectedRemainingMs(H), null, 'no fence has been lifted yet')
  now = 4000
  f.lift([H, 'never-fenced.example.com'])
  assert.deepEqual(heard, [[H]], 'only a host that was fenced is announced')
  now = 5000
  // b has stood 5 s; fences stood 4 s on average so far.
  assert.equal(f.expectedRemainingMs('b.example.com'), 0)
  f.fence([H], 4)
  now = 6000
  assert.equal(f.expectedRemainingMs(H), 3000)
  assert.equal(f.expectedRemainingMs('c.example.com'), null)
  f.lift([])
  assert.equal(heard.length, 1, 'an empty lift says nothing')
})

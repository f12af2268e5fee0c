import assert from 'node:assert/strict'
import { test } from 'node:test'
import { durationMs } from '../../src/domain/duration.js'

void test('a duration is a whole number and one unit of ms, s, m, h; anything else is none', () => {
  assert.equal(durationMs('500ms'), 500)
  assert.equal(durationMs('5s'), 5_000)
  assert.equal(durationMs('1m'), 60_000)
  assert.equal(durationMs('1h'), 3_600_000)
  assert.equal(durationMs('0s'), 0, 'zero is the caller to bound')
  for (const text of ['', '5', 's', '1.5s', '-1s', ' 5s', '5S', '5 s', '1d', '5sec'])
    assert.equal(durationMs(text), null, text)
})

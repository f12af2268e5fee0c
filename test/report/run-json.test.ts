// converge?wait=1's answer written in turns (run-json.ts): the chunks join
// to exactly the pieces, and the loop is given back between them.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { inTurns, WRITTEN_PER_TURN } from '../../src/report/run-json.js'

void test('an answer of pieces is written in chunks of about 64 KB, the loop given back between them', async () => {
  const pieces = Array.from({ length: 200 }, (_, i) => `${String(i).padStart(4, '0')}:${'é"x'.repeat(500)};`)
  const whole = pieces.join('')
  let turns = 0
  let counting = true
  const count = (): void => {
    turns++
    if (counting) setImmediate(count)
  }
  setImmediate(count)
  const chunks: string[] = []
  for await (const chunk of inTurns(pieces)) chunks.push(String(chunk))
  counting = false
  assert.equal(chunks.join(''), whole)
  assert.ok(chunks.length >= 4, `${chunks.length} chunks`)
  for (const chunk of chunks.slice(0, -1))
    assert.ok(chunk.length >= WRITTEN_PER_TURN && chunk.length < WRITTEN_PER_TURN + 1600)
  assert.ok(turns >= chunks.length - 1, `${turns} turns of the loop while ${chunks.length} chunks were written`)
})

// What a schema refused, in words: every field, a choice among fixed values
// naming them, a pattern said in words, a constant named.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { IntentRecord } from '../../src/domain/schemas.js'
import { Journal } from '../../src/infra/pass/journal.js'
import { schemaErrors } from '../../src/infra/schema-errors.js'

void test('an intent record: the unknown field, the id in words, the wrong type', () => {
  assert.equal(
    schemaErrors(IntentRecord, { id: 'a b', mode: 'x', force: 'yes', recordedAt: '', by: '', extra: 1 }),
    'unknown field(s) extra; id must be letters, digits, dots, underscores and hyphens only; force must be boolean',
  )
})

void test('a journal: a constant named, a choice listing its values, a bound', () => {
  const paths = { dir: '', socket: '', db: '' }
  assert.equal(
    schemaErrors(Journal, { v: 2, host: 'a', to: 'sideways', from: paths, dest: paths, generation: -1, startedAt: '' }),
    'v must be 1; to must be one of flat, nested; generation must be >= 0',
  )
  assert.equal(
    schemaErrors(Journal, { v: 1, host: 'a', to: 'flat', from: paths, dest: paths, generation: 0, startedAt: '' }),
    '',
  )
})

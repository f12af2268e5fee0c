import assert from 'node:assert/strict'
import { test } from 'node:test'
import { failpointFrom } from '../../src/infra/failpoint.js'

void test('a failpoint fires at its step, its host, or its nth arrival', () => {
  assert.equal(failpointFrom(''), undefined)
  const killed: string[] = []
  const fp = failpointFrom('after-rename:b.example.com, after-journal@2', (s) => killed.push(s))
  assert.ok(fp)
  for (const s of ['after-journal', 'after-rename:a.example.com', 'after-rename', 'after-rename:b.example.com', 'after-journal', 'after-journal']) fp(s)
  assert.deepEqual(killed, ['after-rename:b.example.com', 'after-journal'])
})

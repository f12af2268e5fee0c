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

void test('a failpoint naming an errno throws it at its step, once, with the code; the kill form beside it still kills', () => {
  const killed: string[] = []
  const fp = failpointFrom('after-journal=ENOSPC, after-rename@2=EIO, after-row', (s) => killed.push(s))
  assert.ok(fp)
  assert.throws(() => fp('after-journal'), (err: NodeJS.ErrnoException) => err.code === 'ENOSPC' && /after-journal/.test(err.message) && err.errno === -28)
  fp('after-journal')
  fp('after-rename')
  assert.throws(() => fp('after-rename'), { code: 'EIO' })
  fp('after-row')
  assert.deepEqual(killed, ['after-row'])
  assert.throws(() => failpointFrom('after-journal=ENOTANERRNO'), /ENOTANERRNO is not an errno/)
})

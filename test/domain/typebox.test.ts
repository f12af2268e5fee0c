// The TypeBox module layoutd loads at run time: after `npm run build` its
// compiled file is TypeBox bundled whole (one file to load at start, not
// some 700 modules), and what it exports still builds and checks schemas.
import assert from 'node:assert/strict'
import { readFile } from 'node:fs/promises'
import { test } from 'node:test'
import { Compile, Type, Value } from '../../src/domain/typebox.js'

void test('the built typebox module is one file: it imports no module', async () => {
  const text = await readFile(new URL('../../src/domain/typebox.js', import.meta.url), 'utf8')
  assert.doesNotMatch(
    text,
    /^\s*import\b|\bfrom\s*['"]|\bimport\s*\(/m,
    'dist/src/domain/typebox.js still imports: run npm ci (esbuild) and npm run build',
  )
  assert.ok(text.length > 100_000, `${text.length} bytes: not TypeBox whole`)
})

void test('Type, Value and Compile from the bundle build and check a schema', () => {
  const row = Type.Object(
    { host: Type.String({ minLength: 1 }), hibernate: Type.Boolean() },
    { additionalProperties: false },
  )
  assert.equal(Value.Check(row, { host: 'a.example.com', hibernate: true }), true)
  assert.equal(Value.Check(row, { host: '', hibernate: true }), false)
  assert.equal(Value.Check(row, { host: 'a.example.com', hibernate: true, extra: 1 }), false)
  const checker = Compile(row)
  assert.equal(checker.Check({ host: 'b.example.com', hibernate: false }), true)
  assert.equal(checker.Check({ host: 'b.example.com' }), false)
})

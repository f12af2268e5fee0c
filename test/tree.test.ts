// The tree keeps the shape a newcomer relies on: every file under src/ is
// named in docs/architecture.md (and the page names no file that is gone),
// and each opens with a comment saying what it owns. A file is as long as
// its one concern needs: the budget is on functions (eslint.config.js).
// Like the openapi.yaml test, this fails on drift rather than trusting a
// later clean-up.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))

async function sourceFiles(): Promise<string[]> {
  const entries = await fs.readdir(path.join(ROOT, 'src'), { recursive: true, withFileTypes: true })
  return entries
    .filter((e) => e.isFile() && e.name.endsWith('.ts'))
    .map((e) => path.relative(ROOT, path.join(e.parentPath, e.name)))
    .sort()
}

void test('docs/architecture.md names every file under src/, and no file that is not there', async () => {
  const page = await fs.readFile(path.join(ROOT, 'docs/architecture.md'), 'utf8')
  const named = new Set(page.match(/src\/[A-Za-z0-9/_.-]*\.ts/g) ?? [])
  const present = await sourceFiles()
  assert.ok(present.length > 50, `found only ${present.length} source files under ${ROOT}src`)
  assert.deepEqual(
    present.filter((f) => !named.has(f)),
    [],
    'files docs/architecture.md does not name (give each its line)',
  )
  assert.deepEqual(
    [...named].filter((f) => !present.includes(f)).sort(),
    [],
    'files docs/architecture.md names that are gone',
  )
})

void test('every file under src/ opens with a comment saying what it owns', async () => {
  const silent: string[] = []
  for (const file of await sourceFiles()) {
    const text = await fs.readFile(path.join(ROOT, file), 'utf8')
    if (!/^(#![^\n]*\n)?\/\/ \S/.test(text)) silent.push(file)
  }
  assert.deepEqual(silent, [], 'files that do not open with a comment')
})

// contrib/layoutd.env.example names every variable of the ENVIRONMENT table
// in src/config.ts, each under a comment saying what it is, and nothing
// else; what it sets is a configuration layoutd accepts, and its roots are
// the ones contrib/layoutd.service lets layoutd write.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { ENVIRONMENT, loadConfig } from '../../src/config.js'

const ROOT = fileURLToPath(new URL('../../../', import.meta.url))
const read = (file: string) => fs.readFile(path.join(ROOT, file), 'utf8')

/** NAME → the line's index, for every line that sets a variable, commented out or not. */
function variableLines(lines: readonly string[]): Map<string, number[]> {
  const out = new Map<string, number[]>()
  for (const [i, line] of lines.entries()) {
    const m = /^#?([A-Z][A-Z0-9_]*)=/.exec(line)
    if (m?.[1] !== undefined) out.set(m[1], [...(out.get(m[1]) ?? []), i])
  }
  return out
}

void test('every variable of the ENVIRONMENT table is in the example once, under a comment of its own', async () => {
  const lines = (await read('contrib/layoutd.env.example')).split('\n')
  const found = variableLines(lines)
  const table = Object.values(ENVIRONMENT).map((v) => v.env)
  assert.ok(table.length > 15, `the table has only ${table.length} variables`)
  assert.deepEqual(
    table.filter((env) => !found.has(env)),
    [],
    'variables missing from contrib/layoutd.env.example',
  )
  assert.deepEqual(
    [...found.keys()].filter((env) => !table.includes(env)),
    [],
    'variables in the example that layoutd does not read',
  )
  for (const [env, at] of found) {
    assert.equal(at.length, 1, `${env} once`)
    const above = lines[(at[0] ?? 0) - 1] ?? ''
    assert.match(above, /^# \S/, `${env} has a comment above it, saying what it is`)
  }
})

void test("what the example sets is accepted, and its roots are the unit's ReadWritePaths", async () => {
  const set: Record<string, string> = {}
  for (const line of (await read('contrib/layoutd.env.example')).split('\n')) {
    const m = /^([A-Z][A-Z0-9_]*)=(.*)$/.exec(line)
    if (m?.[1] !== undefined) set[m[1]] = m[2] ?? ''
  }
  const config = loadConfig({ ...set, CARLOS_BOX: 'web-01' })
  const unit = await read('contrib/layoutd.service')
  const writable = /^ReadWritePaths=(.*)$/m.exec(unit)?.[1]?.split(/\s+/).sort()
  assert.deepEqual(writable, [config.dataDir, config.deploymentDir].sort())
})

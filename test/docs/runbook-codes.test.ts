// The runbook's reason codes: one row for every code the source defines,
// and none for a code it does not. An operator who meets a code in a
// report, a result or a log line finds it there, with what to do.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { REASON_CODES } from '../../src/domain/reason-codes.js'

const ROOT = fileURLToPath(new URL('../../../', import.meta.url))

/** The codes the runbook's "Reason codes" table names, one per row, in order. */
async function runbookCodes(): Promise<string[]> {
  const text = await fs.readFile(path.join(ROOT, 'docs/runbook.md'), 'utf8')
  const start = text.indexOf('\n## Reason codes\n')
  assert.ok(start >= 0, 'docs/runbook.md has a "Reason codes" section')
  const next = text.indexOf('\n## ', start + 1)
  const section = text.slice(start, next < 0 ? undefined : next)
  const codes: string[] = []
  for (const line of section.split('\n')) {
    const m = /^\| `([a-z_]+)` \|([^|]+)\|([^|]+)\|$/.exec(line)
    if (m === null) continue
    assert.ok(m[2]?.trim() !== '' && m[3]?.trim() !== '', `${m[1]}: what it means and what to do`)
    codes.push(m[1] ?? '')
  }
  return codes
}

void test('the runbook has a row for every reason code, and for no code the source does not define', async () => {
  const documented = await runbookCodes()
  const defined = new Set<string>(REASON_CODES)
  const seen = new Set(documented)
  assert.deepEqual(
    REASON_CODES.filter((c) => !seen.has(c)),
    [],
    'codes docs/runbook.md does not explain',
  )
  assert.deepEqual(
    documented.filter((c) => !defined.has(c)),
    [],
    'codes docs/runbook.md names that src/domain/reason-codes.ts does not define',
  )
  assert.equal(documented.length, seen.size, 'each code has one row')
})

void test('the codes are snake_case and unique', () => {
  for (const c of REASON_CODES) assert.match(c, /^[a-z]+(?:_[a-z]+)*$/, c)
  assert.equal(new Set(REASON_CODES).size, REASON_CODES.length)
})

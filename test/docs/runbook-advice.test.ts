// `status HOST` advises from src/cli/advice.ts: for every reason code, the
// runbook's own "what to do", its links written as paths. The two are one
// text, so the command never tells an operator otherwise than the runbook.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { ADVICE } from '../../src/cli/advice.js'

const ROOT = fileURLToPath(new URL('../../../', import.meta.url))

void test("status HOST's advice for each code is the runbook's what-to-do for it", async () => {
  const text = await fs.readFile(path.join(ROOT, 'docs/runbook.md'), 'utf8')
  const start = text.indexOf('\n## Reason codes\n')
  const next = text.indexOf('\n## ', start + 1)
  const runbook = new Map<string, string>()
  for (const line of text.slice(start, next).split('\n')) {
    const m = /^\| `([a-z_]+)` \|[^|]+\|([^|]+)\|$/.exec(line)
    if (m === null) continue
    runbook.set(m[1] ?? '', (m[2] ?? '').trim().replace(/\[([^\]]+)\]\(#([a-z0-9-]+)\)/g, '$1 (docs/runbook.md#$2)'))
  }
  assert.deepEqual(new Map(Object.entries(ADVICE)), runbook)
})

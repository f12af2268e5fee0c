// contrib/layoutd.rules.yml: promtool accepts the rules and passes their unit
// tests (contrib/layoutd.rules.test.yml); every metric a rule names is one
// the agent exports, and the README lists every metric with an example alert.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { Metrics } from '../../src/metrics/metrics.js'
import { run } from '../helpers/child.js'

const ROOT = fileURLToPath(new URL('../../../', import.meta.url))

async function promtool(...args: string[]): Promise<string> {
  try {
    const { stdout, stderr } = await run('promtool', args, { cwd: ROOT })
    return stdout + stderr
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stdout?: string; stderr?: string }
    if (e.code === 'ENOENT')
      throw new Error('promtool is not on PATH: install it (Debian: prometheus) to run this test')
    throw new Error(`promtool ${args.join(' ')} failed: ${e.stdout ?? ''}${e.stderr ?? ''}`)
  }
}

/** Every carlos_layout_* family the agent exports, by name (histograms' and counters' own names). */
async function exported(): Promise<Set<string>> {
  const text = await new Metrics().text()
  return new Set([...text.matchAll(/^# TYPE (carlos_layout_\w+) /gm)].map((m) => m[1] ?? ''))
}

void test('promtool checks the rules and passes their unit tests', async () => {
  assert.match(await promtool('check', 'rules', 'contrib/layoutd.rules.yml'), /SUCCESS: \d+ rules found/)
  assert.match(await promtool('test', 'rules', 'contrib/layoutd.rules.test.yml'), /SUCCESS/)
})

void test('every metric a rule names is exported, and the README lists every exported metric', async () => {
  const names = await exported()
  const rules = await fs.readFile(path.join(ROOT, 'contrib/layoutd.rules.yml'), 'utf8')
  const used = new Set([...rules.matchAll(/carlos_layout_\w+/g)].map((m) => m[0]))
  assert.ok(used.size >= 5, [...used].join(' '))
  assert.deepEqual(
    [...used].filter((n) => !names.has(n)),
    [],
    'rules naming a metric the agent does not export',
  )
  const readme = await fs.readFile(path.join(ROOT, 'README.md'), 'utf8')
  const section = readme.slice(readme.indexOf('## Metrics'), readme.indexOf('\n## ', readme.indexOf('## Metrics') + 1))
  assert.ok(section.length > 100, 'the README has a Metrics section')
  assert.deepEqual(
    [...names].filter((n) => !section.includes(`\`${n}\``)),
    [],
    'metrics the README does not list',
  )
})

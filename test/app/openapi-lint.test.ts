// openapi.yaml as a client's tooling reads it: Redocly's linter, with its
// recommended rules, run from node_modules (a devDependency, so no network),
// must find nothing at all, errors or warnings.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { ended, spawnFor } from '../helpers/child.js'

// Compiled to <outDir>/test/app/: the repository root is three levels up.
const ROOT = fileURLToPath(new URL('../../../', import.meta.url))
const REDOCLY = fileURLToPath(new URL('../../../node_modules/@redocly/cli/bin/cli.js', import.meta.url))

interface Report {
  totals: { errors: number; warnings: number }
  problems: Array<{ ruleId: string; message: string; location?: Array<{ pointer?: string }> }>
}

void test('npx @redocly/cli lint --extends=recommended finds no error and no warning in openapi.yaml', async (t) => {
  // Only what the linter needs to run: no telemetry, no update check.
  const env = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? ROOT,
    REDOCLY_TELEMETRY: 'off',
    REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true',
    NO_COLOR: '1',
  }
  const child = spawnFor(
    t,
    process.execPath,
    [REDOCLY, 'lint', '--extends=recommended', '--format=json', 'openapi.yaml'],
    {
      cwd: ROOT,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  )
  let stdout = ''
  let stderr = ''
  child.stdout?.setEncoding('utf8').on('data', (s: string) => (stdout += s))
  child.stderr?.setEncoding('utf8').on('data', (s: string) => (stderr += s))
  const { code } = await ended(child, 'redocly lint')
  const report = JSON.parse(stdout) as Report
  const problems = report.problems.map((p) => `${p.ruleId} at ${p.location?.[0]?.pointer ?? '?'}: ${p.message}`)
  assert.deepEqual(problems, [], 'what the linter found')
  assert.deepEqual(report.totals, { ...report.totals, errors: 0, warnings: 0 })
  assert.equal(code, 0, stderr)
})

// The console's template, stylesheet and script are files, not code: the
// build copies them beside the compiled route (which the Docker image
// takes whole, dist/src), and the package must carry them wherever it
// carries the route, or the agent would not start from it.
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import fs from 'node:fs/promises'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'

const ROOT = fileURLToPath(new URL('../../../', import.meta.url))
const ASSETS = ['page.html', 'console.css', 'console.js']

void test('the build puts the console files beside the compiled route', async () => {
  for (const name of ASSETS) {
    const built = await fs.readFile(new URL(`../../src/routes/console-page/${name}`, import.meta.url), 'utf8')
    assert.equal(
      built,
      await fs.readFile(`${ROOT}src/routes/console-page/${name}`, 'utf8'),
      `${name} as built is the source's`,
    )
  }
})

void test('npm pack carries the console files wherever it carries the console route', async () => {
  // --ignore-scripts: the list, without building again (the test runs on a build).
  const { stdout } = await promisify(execFile)('npm', ['pack', '--dry-run', '--ignore-scripts', '--json'], {
    cwd: ROOT,
    maxBuffer: 16 * 1024 * 1024,
  })
  const files = new Set(
    (JSON.parse(stdout) as Array<{ files: Array<{ path: string }> }>)[0]?.files.map((f) => f.path) ?? [],
  )
  const routes = ['src/routes/console.ts', 'dist/src/routes/console.js'].filter((f) => files.has(f))
  assert.ok(routes.length > 0, 'the package carries the console route, as source or compiled')
  for (const route of routes) {
    const dir = route.replace(/console\.[jt]s$/, 'console-page/')
    assert.deepEqual(
      ASSETS.filter((a) => !files.has(dir + a)),
      [],
      `the package carries ${route}: the console files beside it`,
    )
  }
})

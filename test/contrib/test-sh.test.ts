// What a test starts ends with it (test/helpers/child.ts): a test that times
// out under scripts/test.sh's flags (--test-timeout, --test-force-exit)
// still ends every process of the groups it started, a shell's own
// children too: the one spawnFor started when the test's t.after hooks run,
// the one spawnGroup started when the file's process exits; and the run
// itself ends.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { ended, spawnFor } from '../helpers/child.js'
import { tmpDir } from '../helpers/tmp.js'
import { until } from '../helpers/until.js'

const FIXTURE = fileURLToPath(new URL('../helpers/hang-fixture.js', import.meta.url))
const TEST_SH = fileURLToPath(new URL('../../../scripts/test.sh', import.meta.url))

/** Whether pid is still the `sleep secs` the fixture started (not a zombie, not a pid used again since). */
function sleeping(pid: number, secs: number): boolean {
  try {
    const cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8')
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    const state = stat
      .slice(stat.lastIndexOf(')') + 1)
      .trim()
      .charAt(0)
    return cmdline === `sleep\0${secs}\0` && state !== 'Z'
  } catch {
    // No such process.
    return false
  }
}

void test('scripts/test.sh gives every test a bound and ends a file once its tests are done', () => {
  const script = fs.readFileSync(TEST_SH, 'utf8')
  assert.match(script, /^TEST_TIMEOUT_MS=\d+$/m)
  assert.match(script, /^RUN_FLAGS=\(.*--test-timeout="\$TEST_TIMEOUT_MS".*--test-force-exit.*\)$/m)
  assert.equal(script.match(/exec node "\$\{RUN_FLAGS\[@\]\}"/g)?.length, 2, 'the unit set and the whole run')
})

void test('a test that times out ends what it started, its children’s children too, and its run ends', async (t) => {
  const pids = path.join(await tmpDir(t, 'layoutd-child-'), 'pids')
  // A run of its own, not a file of this one: without the runner's NODE_TEST_CONTEXT.
  const env = { ...process.env }
  delete env.NODE_TEST_CONTEXT
  const run = spawnFor(t, process.execPath, ['--test', '--test-force-exit', '--test-timeout=10000', FIXTURE], {
    env: { ...env, PIDS_FILE: pids },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  run.stdout?.setEncoding('utf8').on('data', (s: string) => (output += s))
  run.stderr?.setEncoding('utf8').on('data', (s: string) => (output += s))
  const { code } = await ended(run, 'node --test on a file that hangs')
  assert.equal(code, 1, output)
  assert.match(output, /test timed out after 10000ms/)
  const [first, second] = fs.readFileSync(pids, 'utf8').trim().split('\n').map(Number)
  assert.ok(first !== undefined && second !== undefined, output)
  for (const pid of [first, second])
    await until(`the fixture's sleep (pid ${pid}) to be gone`, () => !sleeping(pid, 1001) && !sleeping(pid, 1002))
})

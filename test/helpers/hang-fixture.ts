// A test file that hangs, for test/child.test.ts to run under `node --test`
// with a short --test-timeout: its one test starts two shells, each with a
// child of its own (a `sleep` whose pid it appends to $PIDS_FILE), one by
// spawnFor (ended by the test's t.after) and one by spawnGroup (ended when
// the file's process exits), and then waits for ever.
import fs from 'node:fs'
import { test } from 'node:test'
import { spawnFor, spawnGroup } from './child.js'
import { until } from './until.js'

const pids = process.env.PIDS_FILE ?? ''

void test('waits for ever, with two groups running', async (t) => {
  const script = (secs: number) => `sleep ${secs} & echo $! >> "$0"; wait`
  spawnFor(t, '/bin/sh', ['-c', script(1001), pids], { stdio: 'ignore' })
  spawnGroup('/bin/sh', ['-c', script(1002), pids], { stdio: 'ignore' })
  await until('both shells to say their children', () => {
    const text = fs.existsSync(pids) ? fs.readFileSync(pids, 'utf8') : ''
    return text.trim().split('\n').length === 2
  })
  await new Promise<never>(() => undefined)
})

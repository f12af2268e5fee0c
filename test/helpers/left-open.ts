// Whether a program that leaves something open still ends on its own: the
// agent's worker threads and timers are unref'd, so a process that forgets
// to close one is not kept running by it.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import fs from 'node:fs/promises'
import path from 'node:path'
import type { TestContext } from 'node:test'
import { tmpDir } from './tmp.js'

/** The href of a module of src/, for a program run in a process of its own. */
export function srcModule(relative: string): string {
  return new URL(`../../src/${relative}`, import.meta.url).href
}

/**
 * Runs program (an ES module's text) in a node of its own and fails unless
 * it prints `done` and exits by itself within 20 s. A file, not -e: node
 * run with -e exits at the end of the script whatever is left ref'd.
 */
export async function assertEndsOnItsOwn(t: TestContext, program: string): Promise<void> {
  const script = path.join(await tmpDir(t), 'left-open.mjs')
  await fs.writeFile(script, `${program}\nconsole.log('done')\n`)
  const child = spawnSync(process.execPath, [script], { encoding: 'utf8', timeout: 20_000 })
  assert.equal(child.stderr, '')
  assert.equal(child.stdout, 'done\n')
  assert.equal(child.signal, null, 'the process was still running after 20 s')
  assert.equal(child.status, 0)
}

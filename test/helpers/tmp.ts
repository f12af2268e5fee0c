// A temp directory per test, removed when the test ends.
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'

/**
 * Where an end is registered: a test's context, or a scope a whole file
 * shares (test/hostile/box.ts `fileScope`), whose ends run in node:test's
 * top-level `after`.
 */
export interface Scope {
  after(fn: () => unknown): void
  diagnostic?(message: string): void
}

export async function tmpDir(t: Scope, prefix = 'layoutd-'): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), prefix))
  // t.after hooks run in the order they were added, and this one is often
  // added before the hook that stops a process writing here; a hook that
  // throws would skip that one. So the removal retries, and a failure is
  // reported as a diagnostic instead of failing the cleanup chain.
  t.after(async () => {
    try {
      await fs.rm(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 })
    } catch (err) {
      if (t.diagnostic === undefined) throw err
      t.diagnostic(`could not remove ${dir}: ${(err as Error).message}`)
    }
  })
  return dir
}

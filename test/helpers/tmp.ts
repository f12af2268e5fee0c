// A temp directory per test, removed when the test ends.
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import type { TestContext } from 'node:test'

export async function tmpDir(t: TestContext, prefix = 'layoutd-'): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), prefix))
  // t.after hooks run in the order they were added, and this one is often
  // added before the hook that stops a process writing here; a hook that
  // throws would skip that one. So the removal retries, and a failure is
  // reported as a diagnostic instead of failing the cleanup chain.
  t.after(async () => {
    try {
      await fs.rm(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 })
    } catch (err) {
      t.diagnostic(`could not remove ${dir}: ${(err as Error).message}`)
    }
  })
  return dir
}

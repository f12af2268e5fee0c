// The C library's allocator asked to give back the pages it holds free
// (native/trim.c, in the C walk's addon): glibc keeps what the loop's
// thread, libuv's pool and every worker thread freed, in arenas of each
// thread's own, for their next allocation, and a box's footprint after a
// converge is what an operator sees and alerts on (design §9). The trim
// runs on libuv's pool; where the addon was not built, or the C library is
// not glibc, it does nothing.
import { createRequire } from 'node:module'
import { C_WALK_PATH } from './pass/c-walk.js'

type Trim = () => Promise<boolean>

function load(): Trim | undefined {
  try {
    const mod = createRequire(import.meta.url)(C_WALK_PATH) as { trimAllocator?: unknown }
    return typeof mod.trimAllocator === 'function' ? (mod.trimAllocator as Trim) : undefined
  } catch {
    return undefined
  }
}

const trim = load()

/** Whether this process can trim its allocator (the addon is built and carries the trim). */
export const allocatorTrimmable = trim !== undefined

/**
 * Gives the allocator's free pages back to the kernel, off the loop's
 * thread; true when some were. Never rejects: a trim that could not be
 * queued gives nothing back and harms nothing.
 */
export async function trimAllocator(): Promise<boolean> {
  if (trim === undefined) return false
  try {
    return await trim()
  } catch {
    return false
  }
}

// The C library's allocator asked to give back its free pages (native/trim.c): a box's footprint after a converge
// is what an operator alerts on (design §9).
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

/** False without the addon or glibc. */
export const allocatorTrimmable = trim !== undefined

/** Off the loop's thread; never rejects, as a failed trim harms nothing. */
export async function trimAllocator(): Promise<boolean> {
  if (trim === undefined) return false
  try {
    return await trim()
  } catch {
    return false
  }
}

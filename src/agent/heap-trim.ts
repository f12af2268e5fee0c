// After a run of the leg that reached 256 hosts or more, one full garbage
// collection a second later (design §9): V8 keeps old space grown to the
// peak, and the box's footprint is what an operator alerts on. A second
// later, so a request waits for the run's end or the collection, not both;
// runs close together share one; none unless the heap grew by TRIM_GROWTH_BYTES.
// What the run freed through glibc's allocator it keeps unless asked, so the
// allocator is trimmed too, on libuv's pool (allocator-trim.ts),
// ALLOCATOR_TRIM_DELAY_MS after the last such run, once what ends after a
// run (the report's build, the checkpoint thread) has freed its part.
import v8 from 'node:v8'
import vm from 'node:vm'
import { trimAllocator } from '../infra/allocator-trim.js'

/** A run that reached at least this many hosts is followed by a collection. */
export const TRIM_AFTER_HOSTS = 256

/** How long after such a run the collection comes. */
export const TRIM_DELAY_MS = 1000

/** How long after such a run the allocator is trimmed. */
export const ALLOCATOR_TRIM_DELAY_MS = 30_000

/** How much V8's total heap must have grown since the last collection here for another. */
export const TRIM_GROWTH_BYTES = 8 * 2 ** 20

let collect: (() => void) | null | undefined
let pending: NodeJS.Timeout | undefined
let allocatorPending: NodeJS.Timeout | undefined
/** The heap's total size right after the last collection made here (undefined before the first). */
let heldAfterTrim: number | undefined

/** V8's full collection, made callable for this process (null where the runtime refuses). */
function collector(): (() => void) | null {
  if (collect === undefined) {
    try {
      // The flag applies to contexts made after it: the new context's gc is V8's own.
      v8.setFlagsFromString('--expose-gc')
      const gc: unknown = vm.runInNewContext('gc')
      // The last-resort flavour gives the emptied pages back at once; a regular collection
      // leaves them held until V8's memory reducer comes, seconds later.
      const options = { type: 'major', execution: 'sync', flavor: 'last-resort' }
      collect = typeof gc === 'function' ? () => (gc as (o: typeof options) => void)(options) : null
    } catch {
      collect = null
    }
  }
  return collect
}

function trimIfGrown(gc: () => void, release: () => void): void {
  pending = undefined
  release()
  const held = v8.getHeapStatistics().total_heap_size
  if (heldAfterTrim !== undefined && held < heldAfterTrim + TRIM_GROWTH_BYTES) return
  gc()
  heldAfterTrim = v8.getHeapStatistics().total_heap_size
  void trimAllocator()
}

/**
 * Schedules (or pushes back) one collection after a run that reached `hosts`
 * hosts, with `release` called first (what the run kept for more of its
 * kind: the checkpoint thread); true when it did.
 */
export function trimHeapAfterRun(hosts: number, release: () => void = () => undefined): boolean {
  if (hosts < TRIM_AFTER_HOSTS) return false
  const gc = collector()
  if (gc === null) return false
  clearTimeout(pending)
  pending = setTimeout(() => trimIfGrown(gc, release), TRIM_DELAY_MS).unref()
  clearTimeout(allocatorPending)
  allocatorPending = setTimeout(() => void trimAllocator(), ALLOCATOR_TRIM_DELAY_MS).unref()
  return true
}

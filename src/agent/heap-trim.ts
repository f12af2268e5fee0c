// After a run of the leg that reached 256 hosts, one last-resort garbage collection
// a second later (design §9): V8 keeps old space grown to the peak, and
// operators alert on the box's footprint. The delay lets a request wait for
// the run's end or the collection, not both. glibc's allocator keeps what it
// freed unless asked, so it is trimmed too.
import v8 from 'node:v8'
import vm from 'node:vm'
import { trimAllocator } from '../infra/allocator-trim.js'

export const TRIM_AFTER_HOSTS = 256

export const TRIM_DELAY_MS = 1000

/** Late enough that what ends after a run (the report, the checkpoint) has freed its part. */
export const ALLOCATOR_TRIM_DELAY_MS = 30_000

/** No collection unless V8's total heap grew this much since the last one here. */
export const TRIM_GROWTH_BYTES = 8 * 2 ** 20

let collect: (() => void) | null | undefined
let pending: NodeJS.Timeout | undefined
let allocatorPending: NodeJS.Timeout | undefined
let heldAfterTrim: number | undefined

/** null where the runtime refuses. */
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
 * Runs close together share one collection, `release` (the checkpoint thread, the registry's caches) first, and
 * again before the allocator's trim, as what a run's end sets going may have read since; true when scheduled.
 */
export function trimHeapAfterRun(hosts: number, release: () => void = () => undefined): boolean {
  if (hosts < TRIM_AFTER_HOSTS) return false
  const gc = collector()
  if (gc === null) return false
  clearTimeout(pending)
  pending = setTimeout(() => trimIfGrown(gc, release), TRIM_DELAY_MS).unref()
  clearTimeout(allocatorPending)
  allocatorPending = setTimeout(() => {
    release()
    void trimAllocator()
  }, ALLOCATOR_TRIM_DELAY_MS).unref()
  return true
}

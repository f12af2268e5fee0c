// After a run of the leg that reached 256 hosts or more, one full garbage
// collection a second later, so the heap a converge grew is given back
// (design §9). A converge of 10,000 hosts allocates far more than it keeps
// (plans, journals, results, report builds), and V8 leaves its old space
// grown to the peak until its own idle-time reducer gets round to it; the
// box's footprint after a converge is what an operator sees and alerts on
// (design §9). One collection of a heap whose live part is some 40 MB
// blocks the loop for tens of milliseconds, once, after the last move: a
// second after the run, not in the same breath as the run's own ending
// (its results ordered, logged, and sent to a `converge --wait`), so an
// activator's request waits for one of the two, never both.
//
// Runs that end close together share one collection, a second after the
// last of them (a converge is often followed at once by the run a kick
// asked for while it went on, which moves nothing); and the collection is
// made only when the heap V8 holds has grown since the last one by at
// least TRIM_GROWTH_BYTES: after a run that moved nothing there is little
// to give back, and the collection would cost the loop as much.
import v8 from 'node:v8'
import vm from 'node:vm'

/** A run that reached at least this many hosts is followed by a collection. */
export const TRIM_AFTER_HOSTS = 256

/** How long after such a run the collection comes. */
export const TRIM_DELAY_MS = 1000

/** How much the heap V8 holds (its total size) must have grown since the last collection here for another. */
export const TRIM_GROWTH_BYTES = 8 * 2 ** 20

let collect: (() => void) | null | undefined
let pending: NodeJS.Timeout | undefined
/** The heap's total size right after the last collection made here (undefined before the first). */
let heldAfterTrim: number | undefined

/** V8's full collection, made callable for this process (null where the runtime refuses). */
function collector(): (() => void) | null {
  if (collect === undefined) {
    try {
      // The flag applies to contexts made after it: the new context's gc is V8's own.
      v8.setFlagsFromString('--expose-gc')
      const gc: unknown = vm.runInNewContext('gc')
      collect = typeof gc === 'function' ? (gc as () => void) : null
    } catch {
      collect = null
    }
  }
  return collect
}

function trimIfGrown(gc: () => void): void {
  pending = undefined
  const held = v8.getHeapStatistics().total_heap_size
  if (heldAfterTrim !== undefined && held < heldAfterTrim + TRIM_GROWTH_BYTES) return
  gc()
  heldAfterTrim = v8.getHeapStatistics().total_heap_size
}

/**
 * Schedules one full collection after a run that reached `hosts` hosts (or
 * moves one already scheduled to a second from now); true when it did. The
 * collection is skipped, when its time comes, if the heap has not grown by
 * TRIM_GROWTH_BYTES since the last.
 */
export function trimHeapAfterRun(hosts: number): boolean {
  if (hosts < TRIM_AFTER_HOSTS) return false
  const gc = collector()
  if (gc === null) return false
  clearTimeout(pending)
  pending = setTimeout(() => trimIfGrown(gc), TRIM_DELAY_MS).unref()
  return true
}

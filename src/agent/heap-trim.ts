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
import v8 from 'node:v8'
import vm from 'node:vm'

/** A run that reached at least this many hosts is followed by a collection. */
export const TRIM_AFTER_HOSTS = 256

/** How long after such a run the collection comes. */
export const TRIM_DELAY_MS = 1000

let collect: (() => void) | null | undefined

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

/** Schedules one full collection after a run that reached `hosts` hosts; true when it did. */
export function trimHeapAfterRun(hosts: number): boolean {
  if (hosts < TRIM_AFTER_HOSTS) return false
  const gc = collector()
  if (gc === null) return false
  setTimeout(gc, TRIM_DELAY_MS).unref()
  return true
}

// The loop's one budget for sliced work (design §3.3): the pass, the report
// and the status body give the event loop back through it, so a request
// waits behind one slice of all of them, not a slice of each.
import { performance } from 'node:perf_hooks'

/** The longest synchronous stretch between two turns of the loop. */
export const SLICE_MS = 4

const NOW = Promise.resolve()

/**
 * The loop's one budget for sliced work (design §3.3). Every Slicer draws on it, so however many parts
 * run at once (a pass's movers, a report build, a status body), one turn of the loop spends about one
 * slice on them, and a request waits behind one slice, not one per part. Waiters resume in the order
 * they came, one after another while the turn's slice lasts; the rest wait for the next turn.
 */
class LoopTurns {
  /** When this turn's slice began. */
  #since = performance.now()
  readonly #waiting: Array<() => void> = []
  #scheduled = false

  spent(budgetMs: number): boolean {
    return performance.now() - this.#since >= budgetMs
  }

  /** Settles in a later turn, once this one's slice is spent. */
  later(): Promise<void> {
    const turn = new Promise<void>((resolve) => this.#waiting.push(resolve))
    this.#schedule()
    return turn
  }

  #schedule(): void {
    if (this.#scheduled) return
    this.#scheduled = true
    setImmediate(() => void this.#turn())
  }

  async #turn(): Promise<void> {
    this.#scheduled = false
    this.#since = performance.now()
    for (let next = this.#waiting.shift(); next !== undefined; next = this.#waiting.shift()) {
      next()
      // Its synchronous run comes before the next is resumed.
      await NOW
      if (this.spent(SLICE_MS)) break
    }
    if (this.#waiting.length > 0) this.#schedule()
  }
}

const loopTurns = new LoopTurns()

/** A part's view of the loop's budget; a budget other than SLICE_MS is a test's. */
export class Slicer {
  readonly #budgetMs: number

  constructor(budgetMs = SLICE_MS) {
    this.#budgetMs = budgetMs
  }

  /** Goes straight on while the turn's slice lasts. */
  pause(): Promise<void> {
    return loopTurns.spent(this.#budgetMs) ? loopTurns.later() : NOW
  }

  async map<T, R>(items: readonly T[], fn: (item: T, i: number) => Promise<R> | R): Promise<R[]> {
    const out: R[] = []
    for (const [i, item] of items.entries()) {
      out.push(await fn(item, i))
      await this.pause()
    }
    return out
  }
}

export const defaultSlicer = new Slicer()

// The simulation's time and chance: one virtual clock, one queue of timers,
// one seeded random source. Nothing in a run waits on real time: a step
// takes the earliest timer, moves the clock to it, runs it, and lets every
// promise it set going settle (one turn of the event loop, which no real I/O
// or real timer shares) before the next. So one seed is one history.
import type { Clock } from '../../src/domain/ports.js'

/** The wall time a run starts at: a fixed day, so stamps in records read as dates. */
export const SIM_EPOCH = Date.parse('2026-06-01T00:00:00.000Z')

/** A small, fast, seeded generator (mulberry32): the same seed, the same numbers. */
export class Rng {
  #s: number
  constructor(seed: number) {
    this.#s = seed >>> 0 || 0x9e3779b9
  }
  /** In [0, 1). */
  next(): number {
    let t = (this.#s = (this.#s + 0x6d2b79f5) >>> 0)
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  /** An integer in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1))
  }
  chance(p: number): boolean {
    return this.next() < p
  }
  pick<T>(xs: readonly T[]): T {
    const x = xs[Math.floor(this.next() * xs.length)]
    if (x === undefined) throw new Error('pick from nothing')
    return x
  }
  /** A generator of its own, drawn from this one (a box's, the watch's jitter). */
  fork(): Rng {
    return new Rng(Math.floor(this.next() * 4294967296))
  }
}

interface Timer {
  at: number
  seq: number
  fn: () => void
  label: string
  /** Housekeeping (a request's timeout signal): run in order, but not a step of the trace. */
  quiet: boolean
  dead: boolean
}

export class Scheduler {
  now = SIM_EPOCH
  steps = 0
  readonly rng: Rng
  #heap: Timer[] = []
  #seq = 0
  /** Told each step (the replay's trace). */
  trace: ((line: string) => void) | undefined

  constructor(seed: number) {
    this.rng = new Rng(seed)
  }

  setTimer(ms: number, fn: () => void, label = 'timer', quiet = false): () => void {
    const t: Timer = { at: this.now + Math.max(0, ms), seq: this.#seq++, fn, label, quiet, dead: false }
    this.#push(t)
    return () => {
      t.dead = true
    }
  }

  /** The time of the next live timer, or undefined when none is left. */
  peek(): number | undefined {
    while (this.#heap.length > 0 && this.#heap[0]?.dead === true) this.#pop()
    return this.#heap[0]?.at
  }

  /**
   * Runs the earliest timer (and any housekeeping before it) and lets what it
   * set going settle. False when no timer is left.
   */
  async step(): Promise<boolean> {
    for (;;) {
      const t = this.#pop()
      if (t === undefined) return false
      if (t.dead) continue
      this.now = Math.max(this.now, t.at)
      t.dead = true
      if (!t.quiet) {
        this.steps++
        this.trace?.(`#${this.steps} t=${this.now - SIM_EPOCH}ms ${t.label}`)
      }
      t.fn()
      // Housekeeping's effects settle with the next step's: no request outlives its bound in the model.
      if (t.quiet) continue
      await settle()
      return true
    }
  }

  #push(t: Timer): void {
    const h = this.#heap
    h.push(t)
    let i = h.length - 1
    while (i > 0) {
      const p = (i - 1) >> 1
      const hp = h[p] as Timer
      if (before(hp, t)) break
      h[i] = hp
      i = p
    }
    h[i] = t
  }

  #pop(): Timer | undefined {
    const h = this.#heap
    const top = h[0]
    const last = h.pop()
    if (top === undefined || last === undefined || h.length === 0) return top
    let i = 0
    for (;;) {
      const l = 2 * i + 1
      if (l >= h.length) break
      const r = l + 1
      const c = r < h.length && before(h[r] as Timer, h[l] as Timer) ? r : l
      const hc = h[c] as Timer
      if (before(last, hc)) break
      h[i] = hc
      i = c
    }
    h[i] = last
    return top
  }
}

function before(a: Timer, b: Timer): boolean {
  return a.at < b.at || (a.at === b.at && a.seq < b.seq)
}

/** Every promise job queued so far, and those they queue, run: one turn of the event loop. */
export function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve))
}

/**
 * One process's clock on the scheduler: its timers go when the process is
 * killed (kill -9 runs nothing more), and a killed process sets none.
 */
export class ProcessClock implements Clock {
  readonly #s: Scheduler
  readonly #name: string
  readonly #live = new Set<() => void>()
  #dead = false

  constructor(s: Scheduler, name: string) {
    this.#s = s
    this.#name = name
  }

  get dead(): boolean {
    return this.#dead
  }

  now(): number {
    return this.#s.now
  }

  monotonic(): number {
    return this.#s.now - SIM_EPOCH
  }

  setTimer(ms: number, fn: () => void, label = 'timer'): () => void {
    if (this.#dead) return () => undefined
    const cancel = this.#s.setTimer(
      ms,
      () => {
        this.#live.delete(cancel)
        fn()
      },
      `${this.#name}: ${label}`,
    )
    this.#live.add(cancel)
    return () => {
      this.#live.delete(cancel)
      cancel()
    }
  }

  kill(): void {
    this.#dead = true
    for (const c of this.#live) c()
    this.#live.clear()
  }
}

/**
 * AbortSignal.timeout on the scheduler's clock while a run lasts: the store
 * and the follower bound each request with it, and a real timer would make
 * a slow host's run differ from a fast one's. Returns the undo.
 */
export function virtualTimeouts(s: Scheduler): () => void {
  const real = AbortSignal.timeout.bind(AbortSignal)
  // One reason for every timeout of the run: most bounds end long after their request did.
  const reason = new DOMException('The operation was aborted due to timeout', 'TimeoutError')
  AbortSignal.timeout = (ms: number): AbortSignal => {
    const ac = new AbortController()
    s.setTimer(ms, () => ac.abort(reason), 'timeout', true)
    return ac.signal
  }
  return () => {
    AbortSignal.timeout = real
  }
}

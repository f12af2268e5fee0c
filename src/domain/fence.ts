// The fence (design §1, §3 step 3): hosts the activator must not wake,
// because their files are moving or a refused move holds them down, and
// the view of wake claims the pass needs to decide whether a host is awake.
import { why, type Why } from './reason-codes.js'

/** The activator's wake claims, as the pass sees them (an unreadable claims table claims every host). */
export interface Claims {
  /** Whether host holds a wake claim now. Synchronous, so a check and a fence can share one tick. */
  claimed(host: string): boolean
  /** Asks the activator to stop host: true once its claim is released, false if signal aborts first; never rejects. */
  stop(host: string, signal: AbortSignal): Promise<boolean>
  /**
   * Whether stop can ask anyone (an activator URL is set); false: it only waits for the release. Unset counts
   * as true.
   */
  canAskStop?(): boolean
}

/** What a wake is told when it asks to pass the fence. */
export type Admission<T> = { admitted: true; value: T } | { admitted: false; generation: number }

/**
 * The fence table: host -> the generation it was fenced under. In memory
 * only: a fence that must survive a restart has a journal or hold on disk,
 * which recovery fences again. A check-then-act in one tick is atomic, so
 * a fence and a claim's `admit` can never interleave.
 */
export class FenceTable {
  readonly #gen = new Map<string, number>()
  /** When each fenced host was fenced, in ms of the table's clock. */
  readonly #since = new Map<string, number>()
  /** How long a fence has stood, on average (a moving average over the fences lifted), in ms; null before any. */
  #meanMs: number | null = null
  #listener: ((hosts: readonly string[]) => void) | null = null
  readonly #now: () => number

  /** now: the clock fences are timed by, in ms (performance.now unless a test steps it). */
  constructor(now: () => number = () => performance.now()) {
    this.#now = now
  }

  fence(hosts: Iterable<string>, generation: number): void {
    const at = this.#now()
    for (const h of hosts) {
      this.#gen.set(h, generation)
      if (!this.#since.has(h)) this.#since.set(h, at)
    }
  }

  lift(hosts: Iterable<string>): void {
    const at = this.#now()
    const listener = this.#listener
    const lifted: string[] | null = listener === null ? null : []
    for (const h of hosts) {
      if (!this.#gen.delete(h)) continue
      const since = this.#since.get(h)
      this.#since.delete(h)
      if (since !== undefined)
        this.#meanMs = this.#meanMs === null ? at - since : 0.8 * this.#meanMs + 0.2 * (at - since)
      lifted?.push(h)
    }
    if (listener !== null && lifted !== null && lifted.length > 0) listener(lifted)
  }

  /** The one listener told, in the lift's tick, which hosts were lifted (`GET /ready/:host`); it only notes them. */
  onLift(listener: ((hosts: readonly string[]) => void) | null): void {
    this.#listener = listener
  }

  /** How long host's fence may still stand (ms): the average fence's life less this one's; null when unknown. */
  expectedRemainingMs(host: string): number | null {
    const since = this.#since.get(host)
    if (since === undefined || this.#meanMs === null) return null
    return Math.max(0, this.#meanMs - (this.#now() - since))
  }

  /** The generation host is fenced under, or undefined when it is not fenced. */
  fenced(host: string): number | undefined {
    return this.#gen.get(host)
  }

  /** Runs grant only while host is not fenced, in the same tick: no fence lands between check and claim. */
  admit<T>(host: string, grant: () => T): Admission<T> {
    const g = this.#gen.get(host)
    if (g !== undefined) return { admitted: false, generation: g }
    return { admitted: true, value: grant() }
  }

  /** Every fenced host, sorted (for the report and metrics). */
  hosts(): string[] {
    return [...this.#gen.keys()].sort()
  }
}

/** A held host's reason: the hold's code, with the refusal it carries. */
export function heldDown(hold: Why): Why {
  return why(hold.code, `held down after a refused move to nested: ${hold.reason}`)
}

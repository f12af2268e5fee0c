// The fence (design §1, §3 step 3): hosts the activator must not wake, and
// the wake claims as the pass sees them.
import { why, type Why } from './reason-codes.js'

/** An unreadable claims table claims every host. */
export interface Claims {
  /** Synchronous, so a check and a fence share one tick. */
  claimed(host: string): boolean
  /** true once the claim is released; never rejects. */
  stop(host: string, signal: AbortSignal): Promise<boolean>
  /** false: stop only waits for the release. */
  canAskStop?(): boolean
}

export type Admission<T> = { admitted: true; value: T } | { admitted: false; generation: number }

/** In memory only: a fence that must outlive a restart has a journal or hold, which recovery fences again. */
export class FenceTable {
  readonly #gen = new Map<string, number>()
  readonly #since = new Map<string, number>()
  /** A moving average of lifted fences' lives. */
  #meanMs: number | null = null
  #listener: ((hosts: readonly string[]) => void) | null = null
  readonly #now: () => number

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

  /** Told in the lift's tick; it only notes them. */
  onLift(listener: ((hosts: readonly string[]) => void) | null): void {
    this.#listener = listener
  }

  /** The average fence's life less this one's. */
  expectedRemainingMs(host: string): number | null {
    const since = this.#since.get(host)
    if (since === undefined || this.#meanMs === null) return null
    return Math.max(0, this.#meanMs - (this.#now() - since))
  }

  fenced(host: string): number | undefined {
    return this.#gen.get(host)
  }

  /** grant runs in the check's tick: no fence lands between check and claim. */
  admit<T>(host: string, grant: () => T): Admission<T> {
    const g = this.#gen.get(host)
    if (g !== undefined) return { admitted: false, generation: g }
    return { admitted: true, value: grant() }
  }

  hosts(): string[] {
    return [...this.#gen.keys()].sort()
  }
}

export function heldDown(hold: Why): Why {
  return why(hold.code, `held down after a refused move to nested: ${hold.reason}`)
}

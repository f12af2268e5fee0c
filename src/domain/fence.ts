// The fence (design §1, §3 step 3): hosts the activator must not wake,
// because their files are moving or a refused move holds them down, and
// the view of wake claims the pass needs to decide whether a host is awake.

/**
 * The activator's wake claims, as the pass sees them. The agent backs
 * `claimed` with the registry's persisted wakes table (treating every host
 * as claimed when that table could not be read: a stop the pass cannot
 * prove is no stop) and `stop` with the activator client.
 */
export interface Claims {
  /** Whether host holds a wake claim now. Synchronous, so a check and a fence can share one tick. */
  claimed(host: string): boolean
  /**
   * Asks the activator to stop host and resolves true once its claim is
   * released, false when signal aborts first (the pass aborts it after
   * at most 60 s). Never rejects for a stop that did not happen: false is
   * the answer.
   */
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
 * only: a fence that must survive a restart has a journal or a hold marker
 * on disk, and recovery fences those hosts again before the activator may
 * wake anything.
 *
 * JavaScript runs one callback at a time, so a synchronous check-then-act is
 * atomic: the pass fences a host and checks its claim in one tick, and a
 * wake claim is granted through `admit` in one tick. Neither can land
 * between the other's check and act, which is what "from now no wake claim
 * is granted" needs.
 */
export class FenceTable {
  readonly #gen = new Map<string, number>()

  fence(hosts: Iterable<string>, generation: number): void {
    for (const h of hosts) this.#gen.set(h, generation)
  }

  lift(hosts: Iterable<string>): void {
    for (const h of hosts) this.#gen.delete(h)
  }

  /** The generation host is fenced under, or undefined when it is not fenced. */
  fenced(host: string): number | undefined {
    return this.#gen.get(host)
  }

  /**
   * Runs grant (synchronously) only while host is not fenced. The wake
   * API records its claim inside grant, so no fence can be raised between
   * the check and the record.
   */
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

// One run at a time, and "dirty while running": a kick while a
// run is under way marks the runner dirty, and when the run ends exactly
// one more run follows, however many kicks there were, since a run looks at
// everything afresh. The leg (design §1) runs the pass through it, and the
// intent poller its reads of the deploy store.
//
// Invariants: at most one run is under way; a kick never waits for a run;
// after stop() no run starts, and a pending one is dropped.

export interface SingleFlightOptions {
  /** One run. It must not throw: a runner has nobody to hand the error to. */
  run: () => Promise<void>
  /** Called each time the runner goes idle: no run under way, none pending. */
  onIdle?: () => void
}

export class SingleFlight {
  readonly #opts: SingleFlightOptions
  #running = false
  #dirty = false
  #stopped = false
  #idle: Promise<void> = Promise.resolve()

  constructor(opts: SingleFlightOptions) {
    this.#opts = opts
  }

  /** A run is under way. */
  get running(): boolean {
    return this.#running
  }

  /** A kick came while a run was under way: one more run follows it. */
  get pending(): boolean {
    return this.#dirty
  }

  get stopped(): boolean {
    return this.#stopped
  }

  /** Asks for a run and returns at once. A no-op after stop(). */
  kick(): void {
    if (this.#stopped) return
    if (this.#running) {
      this.#dirty = true
      return
    }
    this.#running = true
    this.#idle = this.#drain()
  }

  /** Resolves when no run is under way or pending. */
  wait(): Promise<void> {
    return this.#idle
  }

  /** Every later kick is a no-op, and a pending run is dropped; a run under way goes on (wait() tells when it ends). */
  stop(): void {
    this.#stopped = true
    this.#dirty = false
  }

  async #drain(): Promise<void> {
    // The run starts off the kicker's stack: kicks come from timers and
    // request handlers, which must not carry a run's first steps.
    await Promise.resolve()
    try {
      do {
        this.#dirty = false
        await this.#opts.run()
      } while (this.#dirty && !this.#stopped)
    } finally {
      this.#running = false
    }
    this.#opts.onIdle?.()
  }
}

// One run at a time, and "dirty while running": kicks during a run ask for
// exactly one more, since a run looks at everything afresh. A kick never
// waits; after stop() no run starts.

export interface SingleFlightOptions {
  /** Must not throw: a runner has nobody to hand the error to. */
  run: () => Promise<void>
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

  get running(): boolean {
    return this.#running
  }

  get pending(): boolean {
    return this.#dirty
  }

  get stopped(): boolean {
    return this.#stopped
  }

  kick(): void {
    if (this.#stopped) return
    if (this.#running) {
      this.#dirty = true
      return
    }
    this.#running = true
    this.#idle = this.#drain()
  }

  wait(): Promise<void> {
    return this.#idle
  }

  /** A pending run is dropped; one under way goes on. */
  stop(): void {
    this.#stopped = true
    this.#dirty = false
  }

  async #drain(): Promise<void> {
    // A kicker (a timer, a request) must not carry a run's first steps.
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

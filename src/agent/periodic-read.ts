// A read repeated on a timer, each scheduled after the last ends (never
// overlapping), or asked for at once; one at a time, and an ask during a
// read makes exactly one more after it.
import type { Clock, Logger } from '../domain/ports.js'
import { SingleFlight } from '../domain/single-flight.js'

export interface PeriodicReadOptions {
  /** A throw is logged with failure as the message. */
  read: () => Promise<void>
  failure: string
  everyMs: number
  clock: Clock
  logger: Logger
}

export class PeriodicRead {
  readonly #opts: PeriodicReadOptions
  readonly #flight: SingleFlight
  #cancelTimer: (() => void) | null = null
  #stopped = false

  constructor(opts: PeriodicReadOptions) {
    this.#opts = opts
    this.#flight = new SingleFlight({
      run: () => this.#readLogged(),
      onIdle: () => this.schedule(),
    })
  }

  schedule(): void {
    if (this.#stopped) return
    this.#cancelTimer?.()
    this.#cancelTimer = this.#opts.clock.setTimer(this.#opts.everyMs, () => this.readNow())
  }

  /** The next tick is scheduled once the reads are over. */
  readNow(): void {
    if (this.#stopped) return
    this.#cancelTimer?.()
    this.#cancelTimer = null
    this.#flight.kick()
  }

  idle(): Promise<void> {
    return this.#flight.wait()
  }

  /** A read under way ends on its own. */
  stop(): void {
    this.#stopped = true
    this.#flight.stop()
    this.#cancelTimer?.()
    this.#cancelTimer = null
  }

  async #readLogged(): Promise<void> {
    try {
      await this.#opts.read()
    } catch (err) {
      this.#opts.logger.error({ err }, this.#opts.failure)
    }
  }
}

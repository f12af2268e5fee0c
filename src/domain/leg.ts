// The leg (design §1): the single-flight runner of the layout pass, and its
// retry timer. A run may wait long on a host, so nothing waits behind it.
import { setImmediate as nextTurn } from 'node:timers/promises'
import { errorMessage } from '../errors.js'
import type { Result } from './modes.js'
import type { Clock, Logger } from './ports.js'
import type { LegRun, LegState } from './schemas.js'
import { SingleFlight } from './single-flight.js'

/** A run's results, and when the leg should come back on its own. */
export interface LegOutcome {
  results: Result[]
  /** A host waits on wall time: after the retry interval. */
  retry: boolean
  /** The run could not finish: with backoff. */
  unfinished: boolean
  /** Sooner (a wake grace). */
  retryInMs?: number
}

/** The longest backoff, in retry intervals. */
export const RETRY_BACKOFF_CAP = 10

/** Retries come up to this fraction sooner, so many boxes' retries spread out. */
export const RETRY_JITTER = 0.2

export function retryBackoff(retryMs: number, failures: number, random: number): number {
  const doubled = retryMs * 2 ** Math.min(Math.max(failures - 1, 0), 30)
  const wait = Math.min(doubled, retryMs * RETRY_BACKOFF_CAP)
  return Math.max(1, Math.round(wait * (1 - RETRY_JITTER * random)))
}

export interface LegOptions {
  /** Aborted by stop(); the run gives up at the next host. */
  run: (signal: AbortSignal) => Promise<LegOutcome>
  clock: Clock
  logger: Logger
  /** CARLOS_LAYOUT_RETRY. */
  retryMs: number
  random?: () => number
  onRunStart?: (run: LegRun) => void
  onRunEnd?: (run: LegRun, seconds: number) => void
  onRetryChange?: (at: number | null) => void
}

interface Waiter {
  after: number
  resolve: (run: LegRun | null) => void
}

function copyRun(run: LegRun): LegRun {
  return { startedAt: run.startedAt, finishedAt: run.finishedAt, results: run.results.map((r) => ({ ...r })) }
}

/** A finished run is frozen and shared: a copy per reader would hold the loop as the run ends. */
function frozenRun(run: LegRun): LegRun {
  for (const r of run.results) Object.freeze(r)
  Object.freeze(run.results)
  return Object.freeze(run)
}

export function hostsReached(results: LegRun['results']): number {
  const hosts = new Set<string>()
  for (const r of results) if (r.host !== '') hosts.add(r.host)
  return hosts.size
}

export class Leg {
  readonly #opts: LegOptions
  readonly #abort = new AbortController()
  readonly #flight: SingleFlight
  #started = 0
  #lastRun: LegRun | null = null
  #cancelRetry: (() => void) | null = null
  #retryAt: string | null = null
  #waiting: string | null = null
  /** Unfinished runs in a row. */
  #failures = 0
  readonly #waiters = new Set<Waiter>()
  /** Moves with every change of state() but running and pending. */
  #changes = 0

  constructor(opts: LegOptions) {
    this.#opts = opts
    this.#flight = new SingleFlight({
      run: () => this.#runOnce(),
      onIdle: () => {
        if (this.#flight.stopped) this.#settleWaiters()
      },
    })
  }

  kick(): void {
    this.#flight.kick()
  }

  /** The first run STARTING after the kick, once finished; null on timeout or stop. */
  kickAndWait(timeoutMs: number): Promise<LegRun | null> {
    if (this.#flight.stopped) return Promise.resolve(null)
    return new Promise((resolve) => {
      let cancel = (): void => {}
      const w: Waiter = {
        after: this.#started,
        resolve: (run) => {
          cancel()
          this.#waiters.delete(w)
          resolve(run)
        },
      }
      this.#waiters.add(w)
      cancel = this.#opts.clock.setTimer(timeoutMs, () => w.resolve(null))
      this.kick()
    })
  }

  /** The run that moved the hosts, once finished. */
  runUnderWay(): Promise<LegRun | null> | null {
    if (!this.#flight.running || this.#flight.stopped) return null
    return new Promise((resolve) => {
      const w: Waiter = {
        after: this.#started - 1,
        resolve: (run) => {
          this.#waiters.delete(w)
          resolve(run)
        },
      }
      this.#waiters.add(w)
    })
  }

  wait(): Promise<void> {
    return this.#flight.wait()
  }

  #armRetry(ms: number): void {
    if (this.#flight.stopped) return
    this.#cancelRetry?.()
    const at = this.#opts.clock.now() + ms
    this.#retryAt = new Date(at).toISOString()
    this.#changes++
    this.#cancelRetry = this.#opts.clock.setTimer(ms, () => {
      this.#cancelRetry = null
      this.#retryAt = null
      this.#changes++
      this.#hook('onRetryChange', () => this.#opts.onRetryChange?.(null))
      this.kick()
    })
    this.#hook('onRetryChange', () => this.#opts.onRetryChange?.(at))
  }

  #clearRetry(): void {
    if (this.#cancelRetry === null) return
    this.#cancelRetry()
    this.#cancelRetry = null
    this.#retryAt = null
    this.#changes++
    this.#hook('onRetryChange', () => this.#opts.onRetryChange?.(null))
  }

  /**
   * Arms the retry timer after a run (design §5.1): the interval (or a sooner grace) when a host waits on
   * wall time, backoff when the run was unfinished, the earlier when both; a clean run disarms it.
   */
  #scheduleAfter(outcome: LegOutcome): void {
    const { retryMs, logger, random = Math.random } = this.#opts
    const soonest = Math.min(retryMs, Math.max(1, outcome.retryInMs ?? retryMs))
    if (!outcome.unfinished) {
      this.#failures = 0
      if (outcome.retry) this.#armRetry(soonest)
      else this.#clearRetry()
      return
    }
    this.#failures++
    const backoff = retryBackoff(retryMs, this.#failures, random())
    this.#armRetry(outcome.retry ? Math.min(backoff, soonest) : backoff)
    logger.info(
      { retryAt: this.#retryAt, attempt: this.#failures },
      `layout: leg run could not finish; ` +
        `the leg comes back at ${this.#retryAt ?? 'no time: it is stopping'} (attempt ${this.#failures})`,
    )
  }

  /** The run finishes its host; wait() tells the end. */
  stop(): void {
    if (this.#flight.stopped) return
    this.#flight.stop()
    this.#clearRetry()
    this.#abort.abort(new Error('layout leg stopped'))
    if (!this.#flight.running) this.#settleWaiters()
  }

  /** Shown until the run's own answer replaces it. */
  progress(result: Result): void {
    if (this.#flight.running && this.#lastRun !== null && this.#lastRun.finishedAt === null) {
      this.#lastRun.results.push(result)
      this.#changes++
    }
  }

  /** Equal keys, equal state()s; constant time. */
  stateKey(): string {
    return `${this.#flight.running ? 1 : 0}${this.#flight.pending ? 1 : 0}.${this.#changes}`
  }

  busy(): { running: boolean; pending: boolean } {
    return { running: this.#flight.running, pending: this.#flight.pending }
  }

  /** In words; null once it waits no more. */
  waiting(what: string | null): void {
    this.#waiting = this.#flight.running ? what : null
  }

  state(): LegState {
    return {
      running: this.#flight.running,
      pending: this.#flight.pending,
      // The run under way still grows, so it is copied.
      lastRun:
        this.#lastRun === null ? null : this.#lastRun.finishedAt === null ? copyRun(this.#lastRun) : this.#lastRun,
      retryAt: this.#retryAt,
      ...(this.#waiting === null ? {} : { waiting: this.#waiting }),
    }
  }

  async #runOnce(): Promise<void> {
    const { clock, logger } = this.#opts
    const seq = ++this.#started
    const startMs = clock.now()
    const run: LegRun = { startedAt: new Date(startMs).toISOString(), finishedAt: null, results: [] }
    this.#lastRun = run
    this.#changes++
    this.#hook('onRunStart', () => this.#opts.onRunStart?.(copyRun(run)))
    let outcome: LegOutcome
    try {
      outcome = await this.#opts.run(this.#abort.signal)
    } catch (err) {
      // Recorded as its one result and retried with backoff: the fault may pass.
      const reason = errorMessage(err)
      if (this.#flight.stopped) {
        // Stopping the agent is not a fault of the run.
        logger.info({ err, code: 'run_stopped' }, `layout: leg run ended by shutdown: ${reason}`)
        outcome = {
          results: [{ host: '', outcome: 'failed', code: 'run_stopped', reason }],
          retry: false,
          unfinished: false,
        }
      } else {
        logger.error({ err, code: 'run_failed' }, `layout: leg run failed: ${reason}`)
        outcome = {
          results: [{ host: '', outcome: 'failed', code: 'run_failed', reason }],
          retry: false,
          unfinished: true,
        }
      }
    }
    this.#waiting = null
    const endMs = clock.now()
    const done = frozenRun({
      startedAt: run.startedAt,
      finishedAt: new Date(endMs).toISOString(),
      results: outcome.results,
    })
    this.#lastRun = done
    this.#changes++
    if (!this.#flight.stopped) this.#scheduleAfter(outcome)
    await nextTurn()
    this.#hook('onRunEnd', () => this.#opts.onRunEnd?.(done, (endMs - startMs) / 1000))
    await nextTurn()
    for (const w of this.#waiters) if (w.after < seq) w.resolve(done)
  }

  /** A metrics hook that throws is logged; it never stops the leg. */
  #hook(name: string, fn: () => void): void {
    try {
      fn()
    } catch (err) {
      const reason = errorMessage(err)
      this.#opts.logger.error({ hook: name, err }, `layout: leg ${name} hook failed: ${reason}`)
    }
  }

  #settleWaiters(): void {
    for (const w of this.#waiters) w.resolve(null)
  }
}

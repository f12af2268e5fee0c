// The leg (design §1): the single-flight runner of the layout pass, its
// retry timer, its waiters and the record of its last run. A pass may wait a
// minute per host, so nothing else (poller, API, wakes) waits behind it; kicks
// during a run ask for one more run, which re-evaluates every host (SingleFlight).
//
// One retry timer, set by the last run (design §5.1): a host waiting on wall
// time brings the leg back after CARLOS_LAYOUT_RETRY, an unfinished run with
// jittered backoff, the earlier of the two when both; a clean run disarms it.
import { setImmediate as nextTurn } from 'node:timers/promises'
import { errorMessage } from '../errors.js'
import type { Result } from './modes.js'
import type { Clock, Logger } from './ports.js'
import type { LegRun, LegState } from './schemas.js'
import { SingleFlight } from './single-flight.js'

/** What one run of the leg answers: its results, and whether and how the leg should come back on its own. */
export interface LegOutcome {
  results: Result[]
  /** A host waits on something that clears in wall time: come back after the retry interval. */
  retry: boolean
  /** The run could not finish (an unreadable read, a failed result): come back with backoff. */
  unfinished: boolean
  /** What the run waits on ends sooner than the retry interval (a host's wake grace): come back after this. */
  retryInMs?: number
}

/** The longest a run that could not finish waits for its retry, in retry intervals. */
export const RETRY_BACKOFF_CAP = 10

/** How much sooner than its backoff a retry may come, as a fraction of it: runs of many boxes spread out. */
export const RETRY_JITTER = 0.2

/** The wait before the nth unfinished run's retry: retryMs doubled per failure, capped, then jittered sooner. */
export function retryBackoff(retryMs: number, failures: number, random: number): number {
  const doubled = retryMs * 2 ** Math.min(Math.max(failures - 1, 0), 30)
  const wait = Math.min(doubled, retryMs * RETRY_BACKOFF_CAP)
  return Math.max(1, Math.round(wait * (1 - RETRY_JITTER * random)))
}

export interface LegOptions {
  /** One run. signal is aborted by stop(); the run should give up at the next host. */
  run: (signal: AbortSignal) => Promise<LegOutcome>
  clock: Clock
  logger: Logger
  /** How long after a run that asked for it the leg runs again on its own (CARLOS_LAYOUT_RETRY). */
  retryMs: number
  /** The jitter's source, in [0, 1); Math.random unless a test fixes it. */
  random?: () => number
  onRunStart?: (run: LegRun) => void
  onRunEnd?: (run: LegRun, seconds: number) => void
  /** The retry timer was armed (for when, in ms since the epoch) or cleared (null). */
  onRetryChange?: (at: number | null) => void
}

interface Waiter {
  /** How many runs had started when the kick was made: the run it waits for is the next one. */
  after: number
  resolve: (run: LegRun | null) => void
}

function copyRun(run: LegRun): LegRun {
  return { startedAt: run.startedAt, finishedAt: run.finishedAt, results: run.results.map((r) => ({ ...r })) }
}

/** A finished run, frozen and shared with every reader: a copy per reader would hold the loop as the run ends. */
function frozenRun(run: LegRun): LegRun {
  for (const r of run.results) Object.freeze(r)
  Object.freeze(run.results)
  return Object.freeze(run)
}

/** How many hosts a run's results reach: each once, the run's own result (host '') not at all. */
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
  /** Runs in a row that could not finish: the backoff's exponent. */
  #failures = 0
  readonly #waiters = new Set<Waiter>()
  /**
   * Moves with every change of what state() answers but running and pending: a run started or ended, a
   * result, the retry timer.
   */
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

  /** Asks for a run and returns at once. A no-op after stop(). */
  kick(): void {
    this.#flight.kick()
  }

  /**
   * Kicks and resolves with the first run that STARTS after the kick, once
   * finished (a run under way predates the ask); null on timeout or stop.
   */
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

  /**
   * The run under way, once finished (null when none, or the leg stops): the
   * run that moved the hosts, answered beside the next run that finds them done.
   */
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

  /** Resolves when no run is running or pending. */
  wait(): Promise<void> {
    return this.#flight.wait()
  }

  /** The one retry timer, armed for ms from now in place of any armed before. */
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

  /** What the run that just finished asks of the retry timer: backoff, the retry interval, or nothing. */
  #scheduleAfter(outcome: LegOutcome): void {
    const { retryMs, logger, random = Math.random } = this.#opts
    // A wake grace that runs out before the interval brings the leg back when it does.
    const soonest = Math.min(retryMs, Math.max(1, outcome.retryInMs ?? retryMs))
    if (!outcome.unfinished) {
      this.#failures = 0
      if (outcome.retry) this.#armRetry(soonest)
      else this.#clearRetry()
      return
    }
    this.#failures++
    // A host waiting on wall time is re-checked within the interval (the seed's rule): the earlier of the two.
    const backoff = retryBackoff(retryMs, this.#failures, random())
    this.#armRetry(outcome.retry ? Math.min(backoff, soonest) : backoff)
    logger.info(
      { retryAt: this.#retryAt, attempt: this.#failures },
      `layout: leg run could not finish; ` +
        `the leg comes back at ${this.#retryAt ?? 'no time: it is stopping'} (attempt ${this.#failures})`,
    )
  }

  /** Cancels the timer, aborts the run (it finishes its host), makes later kicks no-ops; wait() tells the end. */
  stop(): void {
    if (this.#flight.stopped) return
    this.#flight.stop()
    this.#clearRetry()
    this.#abort.abort(new Error('layout leg stopped'))
    if (!this.#flight.running) this.#settleWaiters()
  }

  /** A result of the run under way, shown as progress; the run's own answer replaces these when it ends. */
  progress(result: Result): void {
    if (this.#flight.running && this.#lastRun !== null && this.#lastRun.finishedAt === null) {
      this.#lastRun.results.push(result)
      this.#changes++
    }
  }

  /** A constant-time key of what state() would answer: equal keys, equal states. */
  stateKey(): string {
    return `${this.#flight.running ? 1 : 0}${this.#flight.pending ? 1 : 0}.${this.#changes}`
  }

  /** Whether a run is under way or due, without copying the last run as state() does. */
  busy(): { running: boolean; pending: boolean } {
    return { running: this.#flight.running, pending: this.#flight.pending }
  }

  /**
   * What the run under way waits on, in words (`the activator to stop t01 (awake, force)`); null once it
   * waits no more.
   */
  waiting(what: string | null): void {
    this.#waiting = this.#flight.running ? what : null
  }

  state(): LegState {
    return {
      running: this.#flight.running,
      pending: this.#flight.pending,
      // A finished run is frozen and shared; the one under way still grows.
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
      // A run that throws is recorded as its one result and retried with backoff: the fault may pass.
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

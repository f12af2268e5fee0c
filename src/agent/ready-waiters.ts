// The waits of `GET /ready/:host?wait=` (design §6.4): held until the host
// is ready or never, or the wait ends; bounded per host and in all, woken by
// the fence's lifts and asked again each second for what no lift announces.
import type { GateAnswer } from '../agent-api.js'
import type { FenceTable } from '../domain/fence.js'
import { NOT_YET } from '../domain/gate-state.js'
import { errors } from '../errors.js'
import type { Metrics } from '../metrics/metrics.js'

/** Waits per host and in all; beyond them, `too_many_waiters`. */
export const MAX_WAITERS_PER_HOST = 64
export const MAX_WAITERS = 1024

const RECHECK_MS = 1000

export interface ReadyWaitersDeps {
  fence: Pick<FenceTable, 'onLift'>
  /** Its answer ends a wait once it is not `not yet`. */
  judge: (host: string) => GateAnswer | Promise<GateAnswer>
  metrics: Pick<Metrics, 'setReadyWaiters'>
  perHost?: number
  total?: number
}

interface Waiter {
  host: string
  /** What the wait ends with should its host not be judged again. */
  first: GateAnswer
  resolve: (answer: GateAnswer) => void
  timer: NodeJS.Timeout
  signal: AbortSignal
  onAbort: () => void
}

export class ReadyWaiters {
  readonly #deps: ReadyWaitersDeps
  readonly #byHost = new Map<string, Set<Waiter>>()
  #count = 0
  /** Asked on the next turn of the loop: the pass is still in its tick. */
  readonly #lifted = new Set<string>()
  #flushing = false
  #recheck: NodeJS.Timeout | null = null

  constructor(deps: ReadyWaitersDeps) {
    this.#deps = deps
    deps.fence.onLift((hosts) => {
      if (this.#count === 0) return
      for (const h of hosts) if (this.#byHost.has(h)) this.#lifted.add(h)
      if (this.#lifted.size === 0 || this.#flushing) return
      this.#flushing = true
      setImmediate(() => this.#flushLifted())
    })
  }

  get size(): number {
    return this.#count
  }

  /** Host's answer once ready or never, or as it is when ms ends or the client goes. */
  wait(host: string, ms: number, signal: AbortSignal): Promise<GateAnswer> {
    const now = this.#deps.judge(host)
    if (now instanceof Promise) return now.then((answer) => this.#begin(host, ms, signal, answer))
    return this.#begin(host, ms, signal, now)
  }

  /** Throws (does not reject) beyond the bounds. */
  #begin(host: string, ms: number, signal: AbortSignal, now: GateAnswer): Promise<GateAnswer> {
    if (!NOT_YET.has(now.state) || signal.aborted) return Promise.resolve(now)
    const set = this.#byHost.get(host)
    if ((set?.size ?? 0) >= (this.#deps.perHost ?? MAX_WAITERS_PER_HOST))
      throw errors.tooManyWaiters(host, `for this host (${this.#deps.perHost ?? MAX_WAITERS_PER_HOST})`)
    if (this.#count >= (this.#deps.total ?? MAX_WAITERS))
      throw errors.tooManyWaiters(host, `on this agent (${this.#deps.total ?? MAX_WAITERS})`)
    return new Promise((resolve) => {
      const waiter: Waiter = {
        host,
        first: now,
        resolve,
        signal,
        timer: setTimeout(() => this.#judge(host, (answer) => this.#end(waiter, answer ?? now)), ms),
        onAbort: () => this.#end(waiter, now),
      }
      signal.addEventListener('abort', waiter.onAbort, { once: true })
      const waiters = set ?? new Set<Waiter>()
      if (set === undefined) this.#byHost.set(host, waiters)
      waiters.add(waiter)
      this.#count++
      this.#deps.metrics.setReadyWaiters(this.#count)
      this.#recheck ??= setInterval(() => this.changed(), RECHECK_MS).unref()
    })
  }

  /** Something a wait may be waiting for changed (the agent is ready): every host is asked again. */
  changed(): void {
    for (const host of [...this.#byHost.keys()]) this.#ask(host)
  }

  /** The agent stops: every wait ends with its host's answer now. */
  close(): void {
    for (const [host, set] of [...this.#byHost]) {
      const waiters = [...set]
      this.#judge(host, (answer) => {
        for (const w of waiters) this.#end(w, answer ?? w.first)
      })
    }
  }

  /** undefined on a registry fault: the wait ends as it began, and the next request meets the fault. */
  #judge(host: string, then: (answer: GateAnswer | undefined) => void): void {
    let answer: GateAnswer | Promise<GateAnswer>
    try {
      answer = this.#deps.judge(host)
    } catch {
      then(undefined)
      return
    }
    if (answer instanceof Promise) answer.then(then, () => then(undefined))
    else then(answer)
  }

  #flushLifted(): void {
    this.#flushing = false
    const hosts = [...this.#lifted]
    this.#lifted.clear()
    for (const h of hosts) this.#ask(h)
  }

  #ask(host: string): void {
    if (!this.#byHost.has(host)) return
    this.#judge(host, (answer) => {
      if (answer === undefined || NOT_YET.has(answer.state)) return
      for (const w of [...(this.#byHost.get(host) ?? [])]) this.#end(w, answer)
    })
  }

  #end(w: Waiter, answer: GateAnswer): void {
    const set = this.#byHost.get(w.host)
    if (set?.delete(w) !== true) return
    if (set.size === 0) this.#byHost.delete(w.host)
    clearTimeout(w.timer)
    w.signal.removeEventListener('abort', w.onAbort)
    this.#count--
    this.#deps.metrics.setReadyWaiters(this.#count)
    if (this.#count === 0 && this.#recheck !== null) {
      clearInterval(this.#recheck)
      this.#recheck = null
    }
    w.resolve(answer)
  }
}

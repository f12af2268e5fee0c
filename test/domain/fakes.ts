// Small fakes for the domain's ports, for tests where the outside thing is
// the subject: a store that fails or hangs, a clock that moves on command.
import type { Clock, DeployStore, IsolationGate, Logger } from '../../src/domain/ports.js'
import type { IntentRecord } from '../../src/domain/schemas.js'

export interface LogLine {
  level: 'debug' | 'info' | 'warn' | 'error'
  fields: Record<string, unknown>
  msg: string
}

export class FakeLogger implements Logger {
  readonly lines: LogLine[] = []
  debug(fields: Record<string, unknown>, msg: string): void {
    this.lines.push({ level: 'debug', fields, msg })
  }
  info(fields: Record<string, unknown>, msg: string): void {
    this.lines.push({ level: 'info', fields, msg })
  }
  warn(fields: Record<string, unknown>, msg: string): void {
    this.lines.push({ level: 'warn', fields, msg })
  }
  error(fields: Record<string, unknown>, msg: string): void {
    this.lines.push({ level: 'error', fields, msg })
  }
  msgs(): string[] {
    return this.lines.map((l) => l.msg)
  }
}

interface Timer {
  at: number
  fn: () => void
  live: boolean
}

/** A clock that moves only when advance() is called. */
export class FakeClock implements Clock {
  #now: number
  /** The monotonic clock: moved by advance, never by step. */
  #mono = 0
  #timers: Timer[] = []
  constructor(start = Date.parse('2026-11-30T08:00:00Z')) {
    this.#now = start
  }
  now(): number {
    return this.#now
  }
  monotonic(): number {
    return this.#mono
  }
  /** Steps the wall clock alone by ms (back when negative), as an NTP step or an operator's `date -s` does. */
  step(ms: number): void {
    this.#now += ms
  }
  setTimer(ms: number, fn: () => void): () => void {
    const t: Timer = { at: this.#now + ms, fn, live: true }
    this.#timers.push(t)
    return () => {
      t.live = false
    }
  }
  /** Timers armed and not yet fired or cancelled. */
  pending(): number {
    return this.#timers.filter((t) => t.live).length
  }
  /** Moves time on by ms, firing every timer that falls due, in order. */
  advance(ms: number): void {
    const until = this.#now + ms
    for (;;) {
      const due = this.#timers.filter((t) => t.live && t.at <= until).sort((a, b) => a.at - b.at)[0]
      if (due === undefined) break
      due.live = false
      this.#mono += due.at - this.#now
      this.#now = due.at
      due.fn()
    }
    this.#mono += until - this.#now
    this.#now = until
  }
}

export function intent(over: Partial<IntentRecord> = {}): IntentRecord {
  return {
    id: '20261130T080000.000Z-a',
    mode: 'nested',
    force: false,
    recordedAt: '2026-11-30T08:00:00Z',
    by: 'test',
    ...over,
  }
}

/**
 * A read that never answers until signal aborts. It holds the event loop
 * open as a real pending request would: AbortSignal.timeout's timer does
 * not, and a test with nothing else pending would end before it fires.
 */
export function hangUntilAborted<T>(signal: AbortSignal): Promise<T> {
  return new Promise((_resolve, reject) => {
    const pendingIo = setInterval(() => undefined, 60_000)
    signal.addEventListener(
      'abort',
      () => {
        clearInterval(pendingIo)
        reject(signal.reason instanceof Error ? signal.reason : new Error('aborted'))
      },
      { once: true },
    )
  })
}

/** A deploy store holding records, or failing every read with err. Counts its reads. */
export class FakeStore implements DeployStore {
  reads = 0
  constructor(
    private readonly records: IntentRecord[] | Error,
    private readonly hang = false,
  ) {}
  list(signal: AbortSignal): Promise<IntentRecord[]> {
    this.reads++
    if (this.hang) return hangUntilAborted(signal)
    if (this.records instanceof Error) return Promise.reject(this.records)
    return Promise.resolve([...this.records])
  }
  record(): Promise<void> {
    return Promise.reject(new Error('FakeStore does not record'))
  }
  describe(): string {
    return 'fake store'
  }
  close(): Promise<void> {
    return Promise.resolve()
  }
}

/** A gate whose verdict the test sets, counting how often it was asked. */
export class FakeGate implements IsolationGate {
  asked = 0
  /** Whether the gate's checks have all run once (false: its `not yet run` is no verdict yet). */
  hasJudged = true
  constructor(public verdict: string | null = null) {}
  check(): string | null {
    this.asked++
    return this.verdict
  }
  judged(): boolean {
    return this.hasJudged
  }
}

/** A promise with its resolve in hand: a latch a fake blocks on until the test releases it. */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void
  const promise = new Promise<T>((r) => {
    resolve = r
  })
  return { promise, resolve }
}

// A small AgentApi the HTTP tests steer by hand, and the app built around
// it. The routes are the subject here, so the agent's answers are whatever
// a test sets; the real Agent is tested on a temp data dir elsewhere.
import { Writable } from 'node:stream'
import type { TestContext } from 'node:test'
import type { AgentApi, GateAnswer, Readiness, WakeAnswer, WakeList, WakeSet } from '../../src/agent-api.js'
import { buildApp, type App, type Timeouts } from '../../src/app.js'
import { NOT_YET, refusedState } from '../../src/domain/gate-state.js'
import type { HostMint } from '../../src/domain/mint.js'
import type { Mode } from '../../src/domain/modes.js'
import type { IntentRecord, LayoutReport, LegRun, LegState } from '../../src/domain/schemas.js'
import { createLogger } from '../../src/logger.js'
import { Metrics } from '../../src/metrics/metrics.js'
import type { AgentIdentity } from '../../src/routes/agent-identity.js'
import { authorise, TEST_TOKEN, type Inject } from './authorised.js'

export const HOST = 'a.example.com'

export function sampleRun(): LegRun {
  return {
    startedAt: '2025-01-01T00:00:00.000Z',
    finishedAt: '2025-01-01T00:00:01.000Z',
    results: [{ host: HOST, outcome: 'moved', code: '', reason: '', to: 'nested' }],
  }
}

export function sampleReport(): LayoutReport {
  return {
    box: 'kass-1',
    mode: 'nested',
    default: false,
    defaultBlocked: '',
    rows: { [HOST]: { layout: 'nested', code: '', reason: '', note: '' } },
    leg: { running: false, pending: false, lastRun: sampleRun(), retryAt: null },
    warnings: [],
  }
}

/** A converge call the test has not answered yet. */
export interface PendingConverge {
  timeoutMs: number
  finish(run: LegRun | null): void
}

export class FakeAgent implements AgentApi {
  readinessValue: Readiness = {
    ready: false,
    phase: 'recovering',
    checks: [
      { name: 'registry', ok: true, detail: '' },
      { name: 'recovery', ok: false, detail: 'recovering 2 journals' },
    ],
    nested: { allowed: false, reason: 'isolation probe: not yet run' },
    isolation: [],
  }
  reportValue: LayoutReport = sampleReport()
  /** The record the console names as the intent's, with who recorded it and why. */
  intentValue: IntentRecord | null = null
  legValue: LegState = { running: false, pending: false, lastRun: null, retryAt: null }
  /** What mint() answers: a mode, or an error it throws. */
  mintValue: Mode | Error = 'nested'
  /** When set, report() and reportTag() throw it. */
  reportError: Error | undefined
  kicks = 0
  /** How many times the report's tag was asked (each GET /layout/status asks it once). */
  reportReads = 0
  /** A version per report object: setting reportValue to a new object is a change of the report. */
  readonly #versions = new WeakMap<LayoutReport, number>()
  #lastVersion = 0

  private readonly calls: PendingConverge[] = []
  private readonly callWaiters: Array<(c: PendingConverge) => void> = []

  readiness(): Readiness {
    return this.readinessValue
  }

  report(): LayoutReport {
    if (this.reportError !== undefined) throw this.reportError
    return this.reportValue
  }

  reportTag(): string {
    this.reportReads++
    return this.#tag()
  }

  /** Builds answered, one per GET /layout/status that found its version unserved. */
  reportBuilds = 0

  reportSoon(): Promise<{ report: LayoutReport; tag: string }> {
    this.reportBuilds++
    return Promise.resolve().then(() => ({ report: this.report(), tag: this.#tag() }))
  }

  #tag(): string {
    if (this.reportError !== undefined) throw this.reportError
    let version = this.#versions.get(this.reportValue)
    if (version === undefined) this.#versions.set(this.reportValue, (version = ++this.#lastVersion))
    return `fake.${version}`
  }

  kick(): LegState {
    this.kicks++
    return { ...this.legValue, running: true }
  }

  converge(timeoutMs: number): Promise<LegRun | null> {
    this.kicks++
    return new Promise((resolve) => {
      const call: PendingConverge = { timeoutMs, finish: resolve }
      const waiter = this.callWaiters.shift()
      if (waiter !== undefined) waiter(call)
      else this.calls.push(call)
    })
  }

  /** What runUnderWay() answers: a run under way when a converge is asked, or none. */
  underWay: Promise<LegRun | null> | null = null

  runUnderWay(): Promise<LegRun | null> | null {
    return this.underWay
  }

  /** The next converge call, as soon as a request makes it. */
  nextConverge(): Promise<PendingConverge> {
    const call = this.calls.shift()
    if (call !== undefined) return Promise.resolve(call)
    return new Promise((resolve) => this.callWaiters.push(resolve))
  }

  intentRecord(): IntentRecord | null {
    return this.intentValue
  }

  legState(): LegState {
    return this.legValue
  }

  async mint(): Promise<Mode> {
    await Promise.resolve()
    if (this.mintValue instanceof Error) throw this.mintValue
    return this.mintValue
  }

  /** What mintFor(host) answers: mint()'s mode, found nowhere, unless a host is here (an Error is thrown). */
  readonly mintForValues = new Map<string, HostMint | Error>()

  async mintFor(host: string): Promise<HostMint> {
    const value = this.mintForValues.get(host)
    if (value instanceof Error) throw value
    return value ?? { mode: await this.mint(), found: 'none' }
  }

  /** What claimWake and readyFor answer for a host; a host not here is refused as unknown. An Error is thrown. */
  readonly wakeAnswers = new Map<string, WakeAnswer | Error>()
  /** Hosts claimed, released, and the sets replaced, in the order asked. */
  readonly claims: string[] = []
  readonly releases: string[] = []
  readonly replaced: string[][] = []
  /** What replaceWakes answers about stopping (an Error is thrown). */
  stopValue: WakeSet['stop'] | Error = []
  awake = new Set<string>()

  #answer(host: string): WakeAnswer {
    const a = this.wakeAnswers.get(host)
    if (a instanceof Error) throw a
    return (
      a ?? {
        granted: false,
        refusal: {
          host,
          layout: 'unknown',
          code: 'unknown_host',
          reason: `unknown host: ${host} is not in the registry`,
        },
      }
    )
  }

  async claimWake(host: string): Promise<WakeAnswer> {
    await Promise.resolve()
    this.claims.push(host)
    const a = this.#answer(host)
    if (a.granted) this.awake.add(host)
    return a
  }

  readyFor(host: string): Promise<WakeAnswer> {
    return Promise.resolve().then(() => this.#answer(host))
  }

  /** What a not-yet answer's Retry-After says, in seconds. */
  retryAfterValue = 3
  /** The waits asked (host, ms), in order; each answers the gate at once. */
  readonly waits: Array<{ host: string; ms: number }> = []

  gate(host: string): Promise<GateAnswer> {
    return Promise.resolve().then(() => this.gateOf(this.#answer(host)))
  }

  gateOf(answer: WakeAnswer): GateAnswer {
    if (answer.granted) return { answer, state: 'ready', retryAfter: null }
    const state = refusedState(answer.refusal, this.readinessValue.phase)
    return { answer, state, retryAfter: NOT_YET.has(state) ? this.retryAfterValue : null }
  }

  waitGate(host: string, ms: number): Promise<GateAnswer> {
    this.waits.push({ host, ms })
    return Promise.resolve().then(() => this.gate(host))
  }

  readyRetryAfter(): number {
    return this.retryAfterValue
  }

  releaseWake(host: string): void {
    const a = this.wakeAnswers.get(host)
    if (a instanceof Error) throw a
    this.releases.push(host)
    this.awake.delete(host)
  }

  replaceWakes(awake: readonly string[]): WakeSet {
    if (this.stopValue instanceof Error) throw this.stopValue
    this.replaced.push([...awake])
    this.awake = new Set(awake)
    return { awake: [...this.awake].sort(), stop: this.stopValue }
  }

  wakes(): WakeList {
    return { awake: [...this.awake].sort(), swept: true }
  }
}

export interface Built {
  /** The app; its inject sends the token unless a request names its own Authorization header. */
  app: App
  /** An inject that sends no token: a mutation through it is refused. */
  anonymous: Inject
  agent: FakeAgent
  metrics: Metrics
  /** Every log line the app wrote, as written. */
  logs: string[]
}

export interface BuildOptions {
  /** The token the app requires; TEST_TOKEN by default, empty for an app that takes no change. */
  token?: string
  bodyLimit?: number
  timeouts?: Partial<Timeouts>
  bodyBudget?: number
  /** What GET /agent answers: the data root this fake says it holds; none (404) by default. */
  identity?: AgentIdentity
}

/** The app around a FakeAgent, closed when the test ends. */
export async function build(t: TestContext, opts: BuildOptions = {}): Promise<Built> {
  const logs: string[] = []
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      logs.push(chunk.toString('utf8'))
      done()
    },
  })
  const agent = new FakeAgent()
  const metrics = new Metrics()
  const app = await buildApp({
    api: agent,
    metrics,
    logger: createLogger('info', sink),
    token: opts.token ?? TEST_TOKEN,
    bodyLimit: opts.bodyLimit,
    timeouts: opts.timeouts,
    bodyBudget: opts.bodyBudget,
    identity: opts.identity,
  })
  const anonymous = authorise(app, opts.token ?? TEST_TOKEN)
  t.after(() => app.close())
  return { app, anonymous, agent, metrics, logs }
}

/** The error envelope of a response, checked for its shape. */
export function errorOf(body: string): { code: string; message: string } {
  const parsed = JSON.parse(body) as { error?: { code?: unknown; message?: unknown } }
  const { code, message } = parsed.error ?? {}
  if (typeof code !== 'string' || typeof message !== 'string') throw new Error(`not an error envelope: ${body}`)
  return { code, message }
}

/** The app around a FakeAgent listening on a loopback port, for a client that talks HTTP to it; closed when the test ends. */
export async function listen(t: TestContext, opts: BuildOptions = {}): Promise<Built & { url: string }> {
  const built = await build(t, opts)
  const address = await built.app.listen({ host: '127.0.0.1', port: 0 })
  return { ...built, url: address }
}

// The agent: its phase, the start-up order (design §4.4), shutdown, and the
// wiring of its parts: the leg, the intent poller, the wake desk,
// readiness, the report and the instance keys. compose.ts hands in its adapters.
import type { AgentApi, GateAnswer, Phase, Readiness, WakeAnswer, WakeList, WakeSet } from '../agent-api.js'
import { asError, errorMessage, errors } from '../errors.js'
import { NOT_YET, refusedState, retryAfterSeconds } from '../domain/gate-state.js'
import { IntentState } from '../domain/intent-state.js'
import type { Leg } from '../domain/leg.js'
import { logLayoutResults } from '../domain/leg-run.js'
import { layoutDefault } from '../domain/layout-default.js'
import { requireValidHost } from '../domain/hostname.js'
import { mintLayoutIntentWith, mintWhereFilesAre, type HostMint } from '../domain/mint.js'
import type { IntentMode, Mode, ReportMode } from '../domain/modes.js'
import type { LayoutPass } from '../domain/ports.js'
import { reportFigures, type ReportFigures, type SummaryAsk } from '../report/figures.js'
import type { IntentRecord, LayoutReport, LegRun, LegState } from '../domain/schemas.js'
import { startupRecoveryIntent } from '../domain/startup.js'
import { hostFiles } from '../infra/host-files.js'
import { packageVersion } from '../infra/package-version.js'
import { BoxPublisher } from './box-publisher.js'
import { IntentPoller, POLL_FAILED } from './intent-poller.js'
import { InstanceKeys } from './instance-key-backfill.js'
import { trimHeapAfterRun } from './heap-trim.js'
import { buildLeg, intentInputs } from './leg-runner.js'
import type { AgentParts } from './parts.js'
import { PeriodicRead } from './periodic-read.js'
import { readinessOf } from './readiness.js'
import { ReadyWaiters } from './ready-waiters.js'
import { lookAtFiles } from '../infra/row-files.js'
import { FileLooks } from './file-looks.js'
import { ReportView, type ReportPass } from '../report/report-view.js'
import { WakeDesk } from './wake-desk.js'

/** A retry's run is awaited this long at most; past it, the summary's next run answers the retry. */
const RUN_AGAIN_WAIT_MS = 60 * 60_000

export class Agent implements AgentApi {
  #phase: Phase = 'starting'
  readonly #parts: AgentParts
  readonly #state = new IntentState()
  readonly #leg: Leg
  readonly #view: ReportView
  readonly #desk: WakeDesk
  readonly #waiters: ReadyWaiters
  /** The intent poller, or with no activator armed the <data>/layout listing. */
  #reads: { stop(): void } | null = null
  #pass: LayoutPass | null = null
  #reportPass: ReportPass | null = null
  /** The last look at each row's files (design §6.1). */
  readonly #files: FileLooks
  #instanceKeys: InstanceKeys | null = null
  /** The backfill after start; the leg moves nothing before it ends. */
  #keys: Promise<void> = Promise.resolve()
  readonly #life = new AbortController()
  /** This box's summary in the deploy store (design §7.3). */
  readonly #summary: BoxPublisher
  /** Hosts the last run deferred for their wake grace: a release of one is a serial move. */
  #deferred: ReadonlySet<string> = new Set()
  /** Released mid-run: the run may have deferred them before they slept. */
  readonly #releasedMidRun = new Set<string>()
  /** The last intent read, for the console's who and why. */
  #intentRecord: IntentRecord | null = null

  constructor(parts: AgentParts) {
    this.#parts = parts
    const { config, registry, gate, metrics } = parts
    this.#view = new ReportView({ config, registry, layoutDir: parts.layoutDir, state: this.#state, gate })
    this.#files = new FileLooks({
      dirs: config,
      registry,
      fenced: (host) => parts.fence.fenced(host) !== undefined,
      logger: parts.logger,
    })
    let version: Promise<string> | undefined
    this.#summary = new BoxPublisher({
      ...parts,
      figures: (ask) => this.#figures(ask),
      tag: () => this.reportTag(),
      legBusy: () => this.#leg.busy(),
      mode: () => this.#state.lastIntent(),
      version: () => (version ??= packageVersion().catch(() => 'unknown')),
      signal: this.#life.signal,
    })
    this.#leg = buildLeg({
      ...parts,
      state: this.#state,
      pass: () => this.#pass,
      keys: () => this.#keysBeforeRun(),
      onRunEnd: (run) => {
        this.#deferred = deferredHosts(run)
        const missed = [...this.#releasedMidRun].some((h) => this.#deferred.has(h))
        this.#releasedMidRun.clear()
        if (missed) this.#leg.kick()
        this.#view.noteFinishedRun(run)
        // Where every row's files rest after the run's moves (design §6.1).
        void this.#files.lookAtEvery()
        this.#summary.update()
        trimHeapAfterRun(run.results.length, () => {
          registry.releaseCheckpointThread()
          registry.releaseCaches()
        })
      },
      figures: () => this.#figures(null),
    })
    this.#desk = new WakeDesk({
      claims: parts.claims,
      fence: parts.fence,
      metrics,
      registry,
      facts: () => ({
        armed: gate !== null,
        phase: this.#phase,
        pass: this.#pass,
        rows: () => registry.snapshot(),
        gate,
        dirs: config,
      }),
      lookFiles: lookAtFiles,
      looks: this.#files,
    })
    this.#waiters = new ReadyWaiters({ fence: parts.fence, judge: (host) => this.gate(host), metrics })
    // Read at scrape time, so a row the CLI added shows with no run of the leg.
    metrics.beforeScrape(async () => {
      const { counts, held, deferred, needingOperator } = await this.#figures(null)
      metrics.setRows(counts)
      metrics.setHeldHosts(held)
      metrics.setDeferredHosts(deferred)
      metrics.setRowsNeedingOperator(needingOperator)
    })
    this.#state.onChange((s) => {
      this.#recordIntentMetrics(s.intent, s.default.applied)
      metrics.setDefaultBlocked(s.default.blockedBy)
      // The summary's mode is the one this box's own page says.
      this.#summary.update()
    })
    // Set from the first scrape: an unarmed box is unmanaged for good, an armed one starts at none.
    const first = this.#state.snapshot()
    this.#recordIntentMetrics(gate === null ? 'unmanaged' : first.intent, first.default.applied)
  }

  /** With nothing recovered no intent was read, so the line names no intent rather than `none`. */
  #logRecovered(intent: IntentMode, swept: boolean, recovered: number): void {
    const nothing = recovered === 0
    const under = nothing
      ? 'nothing to recover (no journal, no hold marker; the first run reads the intent)'
      : `under intent ${intent}`
    this.#parts.logger.info(
      { ...(nothing ? { intentRead: false } : { intent, intentRead: true }), swept, recovered },
      `layout: start-up recovery done: ${under}` +
        `${swept ? '' : ' (wake claims unreadable: every host counts as awake)'}`,
    )
  }

  get phase(): Phase {
    return this.#phase
  }

  /** The start-up order (design §4.4); a rejected `readyAfter` (design §7.5) fails it. */
  async start(opts: { readyAfter?: Promise<void> } = {}): Promise<void> {
    const { config, logger, gate, claims } = this.#parts
    // First: a symlinked D/layout would hand recovery a journal planted behind it (design §2.1).
    await this.#parts.layoutDir.verifyRoots()
    if (gate === null) {
      logger.info(
        { activator: 'none' },
        'layout: no activator armed on this box; the report is unmanaged and nothing moves',
      )
      await this.#view.listLayoutDir()
      await opts.readyAfter
      if (this.#life.signal.aborted) return
      this.#phase = 'ready'
      const listing = (this.#reads = new PeriodicRead({
        read: () => this.#view.listLayoutDir(),
        failure: POLL_FAILED,
        everyMs: config.pollMs,
        ...this.#parts,
      }))
      if (!this.#life.signal.aborted) listing.schedule()
      return
    }
    gate.start()
    this.#phase = 'recovering'
    // Until the pass is published, a host a journal names reads fenced, never flat.
    await this.#view
      .listLayoutDir()
      .catch((err: unknown) =>
        logger.error({ err }, 'layout: list <data>/layout at start failed; recovery reads it again'),
      )
    const swept = claims.sweep()
    const intent = await startupRecoveryIntent({
      layoutDir: this.#parts.layoutDir,
      openStore: () => Promise.resolve(this.#parts.store),
      ...intentInputs(config, gate),
      state: this.#state,
      logger,
      signal: this.#life.signal,
    })
    const pass = await this.#parts.makePass(
      (result) => this.#leg.progress(result),
      (what) => this.#leg.waiting(what),
    )
    const defaultOptedOut = layoutDefault(config.layoutDefault).mode === 'flat'
    // Recovery touches few hosts, once per start: each is worth a line at info.
    const recovered = await pass.recover(intent, { defaultOptedOut })
    const restored = await pass.restoreHolds(intent, defaultOptedOut)
    logLayoutResults(recovered, logger, 'info')
    logLayoutResults(restored, logger, 'info')
    this.#logRecovered(intent, swept, recovered.length + restored.length)
    // Before any wake, so a row whose files are elsewhere reads fenced from the first answer (design §6.1).
    await this.#files.lookAtEvery()
    this.#pass = pass
    this.#reportPass = this.#files.reportPass(pass)
    await opts.readyAfter
    if (this.#life.signal.aborted) return
    this.#phase = 'ready'
    logger.info({ phase: 'ready' }, 'layout: ready: the activator may wake')
    this.#waiters.changed()
    // Ready first, then the instance keys (design §4.4).
    this.#startKeys(pass)
    const poller = (this.#reads = new IntentPoller({
      ...this.#parts,
      box: config.box,
      pollMs: config.pollMs,
      signal: this.#life.signal,
      kickLeg: () => this.#leg.kick(),
      onRead: (intent) => {
        this.#intentRecord = intent
        this.#summary.noteIntent(intent)
      },
    }))
    void poller.start()
  }

  /** The instance keys at start (design §4.5), after the claims' index: the backfill classifies every row. */
  #startKeys(pass: LayoutPass): void {
    const { logger } = this.#parts
    const keys = (this.#instanceKeys = new InstanceKeys({
      ...this.#parts,
      pass,
      slots: this.#desk.slots,
      signal: this.#life.signal,
    }))
    // In slices: the backfill's first classify would build the index in one stretch (design §3.3).
    const warmed = (pass.warmClaims?.() ?? Promise.resolve()).catch((err: unknown) => {
      logger.warn({ err }, `layout: path claims not indexed ahead: ${errorMessage(err)} (the first classify does it)`)
    })
    this.#keys = warmed
      .then(() => keys.atStart())
      .catch((err: unknown) => {
        logger.error({ err }, `agent: instance keys: ${errorMessage(err)} (the next run tries again)`)
      })
  }

  /** Stops accepting work; a run of the leg finishes its current host. */
  async stop(): Promise<void> {
    this.#phase = 'stopping'
    this.#life.abort()
    this.#waiters.close()
    this.#reads?.stop()
    this.#parts.gate?.stop()
    this.#leg.stop()
    await this.#leg.wait()
    await this.#keys
  }

  /** So no instance key lands in a directory the run renames (design §4.5). */
  async #keysBeforeRun(): Promise<void> {
    await this.#keys
    await this.#instanceKeys?.sinceLastLook().catch((err: unknown) => {
      this.#parts.logger.error({ err }, `agent: instance keys: ${errorMessage(err)} (the next run tries again)`)
    })
  }

  /** A serial move (design §5), once ready. */
  gateChanged(): void {
    if (this.#phase === 'ready') this.#leg.kick()
  }

  /**
   * A rollout's `retry` of this box (design §7.6): a serial move, once ready; the end of the run it made,
   * so the follower need not tell it from the run before by its time. Not ready, the start-up run answers.
   */
  runAgain(): Promise<string | null> | undefined {
    if (this.#phase !== 'ready') return undefined
    return this.#leg.kickAndWait(RUN_AGAIN_WAIT_MS).then((run) => run?.finishedAt ?? null)
  }

  #recordIntentMetrics(intent: ReportMode, defaultApplied: boolean): void {
    const { metrics } = this.#parts
    metrics.setIntentMode(intent)
    metrics.setDefaultApplied(defaultApplied)
  }

  // ---- what the HTTP API asks ---------------------------------------------

  readiness(): Readiness {
    const { registry, claims, gate } = this.#parts
    return readinessOf({ phase: this.#phase, armed: gate !== null, registry, claims, gate })
  }

  report(): LayoutReport {
    return this.#view.report(this.#phase, this.#reportPass, this.#leg)
  }

  intentRecord(): IntentRecord | null {
    return this.#intentRecord
  }

  reportTag(): string {
    return this.#view.tag(this.#phase, this.#reportPass, this.#leg)
  }

  reportSoon(): Promise<{ report: LayoutReport; tag: string }> {
    return this.#view.reportSoon(this.#phase, this.#reportPass, this.#leg)
  }

  /** How many reports have begun to be built. */
  get reportBuilds(): number {
    return this.#view.builds
  }

  async #figures(ask: SummaryAsk | null): Promise<ReportFigures> {
    return reportFigures(await this.#view.reportSoon(this.#phase, this.#reportPass, this.#leg), ask)
  }

  kick(): LegState {
    this.#requireReady().kick()
    return this.#leg.state()
  }

  async converge(timeoutMs: number): Promise<LegRun | null> {
    return this.#requireReady().kickAndWait(timeoutMs)
  }

  runUnderWay(): Promise<LegRun | null> | null {
    return this.#requireReady().runUnderWay()
  }

  #requireReady(): Leg {
    if (this.#phase !== 'ready') throw errors.notReady(this.#phase)
    return this.#leg
  }

  legState(): LegState {
    return this.#leg.state()
  }

  mint(): Promise<Mode> {
    const { config, store, registry, gate } = this.#parts
    return mintLayoutIntentWith({
      store,
      dirs: config,
      routes: () => registry.snapshot().routes,
      ...intentInputs(config, gate),
    })
  }

  async mintFor(host: string): Promise<HostMint> {
    requireValidHost(host)
    const mode = await this.mint()
    return mintWhereFilesAre(host, mode, await hostFiles(this.#parts.config, host))
  }

  // ---- wake claims: the wake desk's ---------------------------------------

  claimWake(host: string): Promise<WakeAnswer> {
    return this.#desk.claim(host)
  }

  readyFor(host: string): Promise<WakeAnswer> {
    return settled(() => this.#desk.readyNow(host))
  }

  gate(host: string): Promise<GateAnswer> {
    return settled(() => this.gateOf(this.#desk.readyNow(host)))
  }

  gateOf(answer: WakeAnswer): GateAnswer {
    if (answer.granted) return { answer, state: 'ready', retryAfter: null }
    const state = refusedState(answer.refusal, this.#phase)
    if (!NOT_YET.has(state)) return { answer, state, retryAfter: null }
    const fenceRemainingMs = this.#parts.fence.expectedRemainingMs(answer.refusal.host)
    return {
      answer,
      state,
      retryAfter: retryAfterSeconds({ state, fenceRemainingMs, pollMs: this.#parts.config.pollMs }),
    }
  }

  waitGate(host: string, ms: number, signal: AbortSignal): Promise<GateAnswer> {
    return this.#waiters.wait(host, ms, signal)
  }

  readyRetryAfter(): number {
    return retryAfterSeconds({
      state: this.#phase === 'ready' ? 'registry' : 'starting',
      pollMs: this.#parts.config.pollMs,
    })
  }

  releaseWake(host: string): void {
    this.#desk.release(host)
    this.#asleep([host])
  }

  replaceWakes(awake: readonly string[]): WakeSet {
    const before = this.#deferred
    const set = this.#desk.replace(awake)
    const keep = new Set(awake)
    this.#asleep([...before].filter((h) => !keep.has(h)))
    return set
  }

  /** Deferred hosts fell asleep: a serial move now, so they move while they sleep (design §3 step 2). */
  #asleep(hosts: readonly string[]): void {
    if (this.#phase !== 'ready') return
    if (this.#leg.busy().running) for (const h of hosts) this.#releasedMidRun.add(h)
    if (hosts.some((h) => this.#deferred.has(h))) this.#leg.kick()
  }

  wakes(): WakeList {
    return this.#desk.list()
  }
}

function deferredHosts(run: LegRun): ReadonlySet<string> {
  const out = new Set<string>()
  for (const r of run.results) if (r.outcome === 'deferred' && r.code === 'awake_grace') out.add(r.host)
  return out
}

/** fn's answer or throw as a promise: the API's asks are promises, these are answered at once. */
function settled<T>(fn: () => T): Promise<T> {
  try {
    return Promise.resolve(fn())
  } catch (err) {
    return Promise.reject(asError(err))
  }
}

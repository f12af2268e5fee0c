// The background worker: the start-up order of DESIGN §4 (seed
// startActivator / activatorStart.Run, instance keys included), the poller
// that turns a new intent into a serial move, the leg, the activator's wake
// claims (DESIGN §6), and shutdown. One object owns what the seed
// kept in package-level atomics: the armed pass, the intent seen, the
// default's state, the gate.
import type { AgentApi, Phase, Readiness, ReadyCheck, WakeAnswer, WakeList, WakeSet } from './agent-api.js'
import type { Config } from './config.js'
import { AppError, errors } from './errors.js'
import { FenceTable } from './domain/fence.js'
import { hostError, requireValidHost } from './domain/hostname.js'
import { loadLayoutIntent } from './domain/intent.js'
import { IntentState } from './domain/intent-state.js'
import { Leg } from './domain/leg.js'
import { layoutLegWith, logLayoutResults } from './domain/leg-run.js'
import { layoutDefault, type DefaultInputs } from './domain/layout-default.js'
import { mintLayoutIntentWith } from './domain/mint.js'
import { validMode, type Mode, type Result, type RowLayout } from './domain/modes.js'
import { activatorManaged } from './domain/paths.js'
import type { Clock, DeployStore, Logger, RowsSnapshot } from './domain/ports.js'
import { systemClock } from './domain/ports.js'
import { layoutStatusReport, unmanagedLayoutReport } from './domain/report.js'
import type { LayoutReport, LegRun, LegState } from './domain/schemas.js'
import { startupRecoveryIntent } from './domain/startup.js'
import { judgeWake, NO_ACTIVATOR, type WakeVerdict } from './domain/wake-verdict.js'
import { withheldBy, withheldReasons } from './domain/withheld-reasons.js'
import { groupId, SOCKETS_GROUP } from './infra/groups.js'
import { failpointFrom } from './infra/failpoint.js'
import { backfillInstanceKeys, HostSlots } from './infra/instance-keys.js'
import { Isolation } from './infra/isolation.js'
import { layoutDirectory } from './infra/layout-dir.js'
import { Pass } from './infra/pass/pass.js'
import type { Registry } from './infra/registry.js'
import { WakeClaims } from './infra/wake-claims.js'
import type { Metrics, RecoveryAction as MetricRecoveryAction } from './metrics.js'
import type { RecoveryAction } from './domain/pass-plan.js'

export interface AgentDeps {
  config: Config
  logger: Logger
  metrics: Metrics
  registry: Registry
  /** The deploy store, opened once and kept for the poller, the leg and the mint. */
  store: DeployStore
  clock?: Clock
  /** Asks the edge to reload its routes; optional (CARLOS_EDGE_RELOAD_URL). */
  reload?: () => Promise<void>
  /** How long a move waits for an awake host's release after asking for its stop; 60 s unless a test shortens it. */
  stopTimeoutMs?: number
}

/** The recovered_journals_total label of each DESIGN §4 action. */
const RECOVERY_LABEL: Record<RecoveryAction['kind'], MetricRecoveryAction> = {
  'redo-move': 'redone',
  rollback: 'rolled_back',
  'redo-row': 'committed',
  'redo-finish': 'finished',
  keep: 'kept_fenced',
}

export class Agent implements AgentApi {
  #phase: Phase = 'starting'
  readonly #deps: AgentDeps
  readonly #clock: Clock
  readonly #state = new IntentState()
  readonly #fence = new FenceTable()
  readonly #claims: WakeClaims
  /** Each host's preparation slot: its instance key is minted in it, and a wake claim waits for it. */
  readonly #slots = new HostSlots()
  /** The instance-key backfill after start; the leg moves nothing before it ends. */
  #keys: Promise<void> = Promise.resolve()
  /** The last finished run's results that withheld a host, by host: the report's row reasons. */
  #withheld = new Map<string, Result>()
  readonly #gate: Isolation | null
  readonly #leg: Leg
  readonly #layoutDir
  #pass: Pass | null = null
  #pollTimer: (() => void) | null = null
  #polling = false
  #pollAgain = false
  #lastPolled = ''
  #unmanagedFenced = { journals: new Set<string>(), holds: new Set<string>() }
  readonly #life = new AbortController()

  constructor(deps: AgentDeps) {
    this.#deps = deps
    this.#clock = deps.clock ?? systemClock
    const { config, logger } = deps
    this.#layoutDir = layoutDirectory(config.dataDir)
    this.#claims = new WakeClaims({ store: deps.registry.claimStore(), activatorUrl: config.activatorUrl, logger, now: () => new Date(this.#clock.now()) })
    // The gate exists only where an activator is armed: with none, nothing
    // could wake nested and the default does not apply (seed layoutDefaultGate).
    this.#gate =
      config.activator === 'none'
        ? null
        : new Isolation(config, logger, () => {
            // A change of the gate's answer is a serial move (DESIGN §5).
            if (this.#phase === 'ready') this.#leg.kick()
          })
    this.#leg = new Leg({
      run: (signal) => this.#runLeg(signal),
      clock: this.#clock,
      logger,
      retryMs: config.retryMs,
      onRunStart: () => deps.metrics.setLegRunning(true),
      onRunEnd: (run, seconds) => {
        deps.metrics.setLegRunning(false)
        deps.metrics.legRun(seconds)
        this.#withheld = withheldBy(run)
        this.#updateGauges(run)
      },
    })
    this.#state.onChange((s) => {
      deps.metrics.setIntentMode(s.intent)
      deps.metrics.setDefaultApplied(s.default.applied)
    })
  }

  get phase(): Phase {
    return this.#phase
  }

  /**
   * The start-up order: sweep (the persisted wake claims) → the start-up
   * intent (read only when a journal or hold marker is there) → Recover →
   * RestoreHolds → publish the pass → ready (the activator may wake) →
   * kick the leg once. The HTTP server serves /livez and a 503 /ready
   * throughout.
   */
  async start(): Promise<void> {
    const { config, logger } = this.#deps
    if (config.activator === 'none') {
      logger.info({ activator: 'none' }, 'layout: no activator armed on this box; the report is unmanaged and nothing moves')
      await this.#listUnmanaged()
      this.#phase = 'ready'
      this.#schedulePoll()
      return
    }
    const gate = this.#gate
    if (gate === null) throw new Error('an armed activator has a gate')
    gate.start()
    this.#phase = 'recovering'
    // Until the pass is published the report judges rows by what
    // <data>/layout holds, so a host a journal names reads fenced while
    // recovery runs, never flat.
    await this.#listUnmanaged().catch((err: unknown) => logger.error({ err }, 'layout: list <data>/layout at start failed; recovery reads it again'))
    const swept = this.#claims.sweep()
    const intent = await startupRecoveryIntent({
      layoutDir: this.#layoutDir,
      openStore: () => Promise.resolve(this.#deps.store),
      ...this.#intentInputs(),
      state: this.#state,
      logger,
      signal: this.#life.signal,
    })
    const pass = new Pass({
      dirs: config,
      registry: this.#deps.registry,
      fence: this.#fence,
      claims: this.#claims,
      gate,
      logger,
      clock: this.#clock,
      graceMs: config.graceMs,
      socketsGid: await groupId(SOCKETS_GROUP),
      failpoint: failpointFrom(config.failpoint),
      onMove: (to, outcome, seconds) => this.#deps.metrics.observeMove(to, outcome, seconds),
      onRecover: (action) => this.#deps.metrics.recoveredJournal(RECOVERY_LABEL[action]),
      onResult: (r) => this.#leg.progress(r),
      reload: this.#deps.reload,
      stopTimeoutMs: this.#deps.stopTimeoutMs,
    })
    const defaultOptedOut = layoutDefault(config.layoutDefault).mode === 'flat'
    const recovered = await pass.recover(intent, { defaultOptedOut })
    logLayoutResults(recovered, logger)
    logLayoutResults(await pass.restoreHolds(intent, defaultOptedOut), logger)
    logger.info({ intent, swept }, `layout: start-up recovery done under intent ${intent}${swept ? '' : ' (wake claims unreadable: every host counts as awake)'}`)
    this.#pass = pass
    if (this.#life.signal.aborted) return
    this.#phase = 'ready'
    // Seed activatorStart.Run: Start (the activator may wake), then the
    // instance keys, each in its host's preparation slot.
    this.#keys = this.#backfillKeys(pass).catch((err: unknown) => {
      logger.error({ err }, `agent: instance keys: ${(err as Error).message} (each host's next start mints its key)`)
    })
    void this.#firstPoll()
  }

  /**
   * Gives every activator-managed tenant without an instance key its key.
   * The leg waits for this before its first run (#runLeg), so no key is
   * ever written into a directory the pass is renaming; a wake claim for a
   * host waits only for that host's own mint.
   */
  async #backfillKeys(pass: Pass): Promise<void> {
    const { logger } = this.#deps
    let hosts: string[]
    try {
      hosts = this.#rows()
        .routes.filter((r) => activatorManaged(r) && r.dir !== '' && hostError(r.host) === null)
        .map((r) => r.host)
    } catch (err) {
      logger.error({ err }, `agent: instance keys: list routes: ${(err as Error).message} (each host's next start mints its key)`)
      return
    }
    const counts = await backfillInstanceKeys({
      hosts,
      slots: this.#slots,
      target: (host) => {
        // Read again in the slot: the row may have changed since the list.
        const rt = this.#deps.registry.get(host)
        if (rt === undefined || !activatorManaged(rt) || rt.dir === '') return { skip: 'no longer an activator-managed row with a directory' }
        const word = pass.classify(rt, this.#rows().routes)
        // A fenced host's files may be between two directories, and a
        // conflicting row's directory is not its own alone.
        if (word.layout === 'fenced' || word.layout === 'conflict') return { skip: `${word.layout}: ${word.reason}` }
        return { dir: rt.dir }
      },
      logger,
      signal: this.#life.signal,
    })
    if (counts.minted + counts.skipped + counts.failed > 0) {
      logger.info(
        { ...counts },
        `agent: instance keys: ${counts.minted} minted, ${counts.present} present, ${counts.skipped} skipped, ${counts.failed} failed`,
      )
    }
  }

  /**
   * The poller's first read comes before the leg's first run, so that any
   * intent recorded after it differs from what it saw and kicks the leg: the
   * other order could see a new intent first and an old one in the run, and
   * never come back for the new one.
   */
  async #firstPoll(): Promise<void> {
    try {
      await this.#poll()
    } catch (err) {
      this.#deps.logger.error({ err }, 'layout: intent poll failed')
    }
    this.#leg.kick()
    this.#schedulePoll()
    // A store that pushes makes the poll come at once; the poll still
    // decides whether anything changed.
    this.#deps.store.watch?.(() => this.#pollNow(), this.#life.signal)
  }

  /** Reads the intent now rather than at the next tick; the tick after it is rescheduled. */
  #pollNow(): void {
    if (this.#life.signal.aborted) return
    // A push during a read may be about a record the read missed: read again
    // straight after it.
    if (this.#polling) {
      this.#pollAgain = true
      return
    }
    this.#pollTimer?.()
    this.#pollTimer = null
    this.#polling = true
    this.#poll()
      .catch((err: unknown) => this.#deps.logger.error({ err }, 'layout: intent poll failed'))
      .finally(() => {
        this.#polling = false
        if (this.#pollAgain) {
          this.#pollAgain = false
          this.#pollNow()
        } else {
          this.#schedulePoll()
        }
      })
  }

  /** Stops accepting work; a run of the leg finishes its current host. */
  async stop(): Promise<void> {
    this.#phase = 'stopping'
    this.#life.abort()
    this.#pollTimer?.()
    this.#pollTimer = null
    this.#gate?.stop()
    this.#leg.stop()
    await this.#leg.wait()
    await this.#keys
  }

  // ---- the leg ----------------------------------------------------------

  async #runLeg(signal: AbortSignal): Promise<{ results: Result[]; retry: boolean }> {
    const pass = this.#pass
    if (pass === null) return { results: [], retry: false }
    await this.#keys
    const { logger, metrics } = this.#deps
    // The gate's self-check and mounts are evaluated fresh for every run;
    // the probe keeps its own schedule.
    await this.#gate?.refresh({ probe: false })
    const outcome = await layoutLegWith(
      {
        store: this.#deps.store,
        ...this.#intentInputs(),
        state: this.#state,
        logger,
        converge: (mode: Mode, force: boolean, s: AbortSignal) => pass.converge(mode, { deferAwake: !force, signal: s }),
      },
      signal,
    )
    const s = this.#state.snapshot()
    metrics.intentRead(s.intent === 'unreadable' ? 'unreadable' : s.intent === 'none' || s.default.applied ? 'none' : 'recorded')
    return outcome
  }

  #updateGauges(run: LegRun): void {
    const { metrics } = this.#deps
    const report = this.report()
    const counts: Partial<Record<RowLayout, number>> = {}
    for (const row of Object.values(report.rows)) counts[row.layout as RowLayout] = (counts[row.layout as RowLayout] ?? 0) + 1
    metrics.setRows(counts)
    metrics.setDeferredHosts(run.results.filter((r) => r.outcome === 'deferred').length)
    const pass = this.#pass
    metrics.setHeldHosts(pass === null ? 0 : Object.keys(report.rows).filter((host) => pass.held(host) !== undefined).length)
  }

  // ---- the poller ---------------------------------------------------------

  /** Reads the intent every pollMs, each read scheduled after the last ends; a change is a serial move. */
  #schedulePoll(): void {
    if (this.#life.signal.aborted) return
    this.#pollTimer?.()
    this.#pollTimer = this.#clock.setTimer(this.#deps.config.pollMs, () => this.#pollNow())
  }

  async #poll(): Promise<void> {
    if (this.#pass === null) {
      await this.#listUnmanaged()
      return
    }
    const { metrics } = this.#deps
    let seen: string
    try {
      const read = await loadLayoutIntent(this.#deps.store, this.#deps.config.box, this.#life.signal)
      seen = read.found ? `${read.intent.id}/${read.intent.mode}/${String(read.intent.force)}` : 'none'
      metrics.intentRead(!read.found ? 'none' : validMode(read.intent.mode) ? 'recorded' : 'unreadable')
    } catch (err) {
      seen = `unreadable: ${(err as Error).message}`
      metrics.intentRead('unreadable')
    }
    if (seen !== this.#lastPolled) {
      // The first read only learns what the leg's first run acts on.
      if (this.#lastPolled !== '') this.#leg.kick()
      this.#lastPolled = seen
    }
  }

  async #listUnmanaged(): Promise<void> {
    const [journals, holds] = await Promise.all([this.#layoutDir.journalHosts(), this.#layoutDir.holdHosts()])
    this.#unmanagedFenced = { journals: new Set(journals), holds: new Set(holds) }
  }

  // ---- what the HTTP API asks ---------------------------------------------

  readiness(): Readiness {
    const phase = this.#phase
    const checks: ReadyCheck[] = [
      this.#registryCheck(),
      {
        name: 'wake-claims',
        ok: phase === 'ready' && (this.#deps.config.activator === 'none' || this.#claims.swept),
        detail: this.#deps.config.activator === 'none' ? 'no activator armed' : this.#claims.swept ? 'loaded' : phase === 'ready' ? 'unreadable: every host counts as awake' : 'not yet loaded',
      },
      { name: 'recovery', ok: phase === 'ready', detail: phase === 'ready' ? 'done' : phase },
    ]
    const shut = this.#gate === null ? 'no activator is armed on this box' : this.#gate.check()
    const readiness: Readiness = {
      // Wake claims that could not be read do not hold the box down: the
      // pass treats every host as awake, and flat wakes go on. A registry
      // that cannot answer does: no claim could be judged.
      ready: phase === 'ready' && checks[0]?.ok === true,
      phase,
      checks,
      nested: { allowed: shut === null, reason: shut ?? '' },
    }
    if (this.#gate !== null) readiness.isolation = this.#gate.report()
    return readiness
  }

  /** The registry answers a query (its data_version: no rows read). */
  #registryCheck(): ReadyCheck {
    try {
      this.#deps.registry.ping()
      return { name: 'registry', ok: true, detail: this.#deps.registry.file }
    } catch (err) {
      return { name: 'registry', ok: false, detail: `${this.#deps.registry.file}: ${(err as Error).message}` }
    }
  }

  report(): LayoutReport {
    const { config } = this.#deps
    const { routes } = this.#rows()
    if (this.#pass === null) {
      const report = unmanagedLayoutReport({
        box: config.box,
        routes,
        dirs: config,
        journalHosts: this.#unmanagedFenced.journals,
        holdHosts: this.#unmanagedFenced.holds,
        leg: this.#leg.state(),
      })
      if (config.activator === 'none') return report
      // An armed box still recovering: rows judged as the unmanaged report
      // judges them (journals and holds first), under the intent seen so far.
      return {
        ...report,
        mode: this.#state.lastIntent(),
        warnings: [`start-up recovery is running (${this.#phase}): nothing may wake until it is done`, ...report.warnings],
      }
    }
    const leg = this.#leg.state()
    const report = layoutStatusReport({ box: config.box, routes, pass: this.#pass, state: this.#state, leg })
    return withheldReasons(report, this.#withheld, this.#gate?.check() ?? null)
  }

  /**
   * The registry's rows, listed again only when someone has committed to
   * it since the last look (the claim store's data_version): a claim is
   * answered from the rows as they are at that tick without listing a
   * registry of thousands of rows for each one, and the report and the
   * claims share one path index in the pass.
   */
  #rows(): RowsSnapshot {
    return this.#deps.registry.snapshot()
  }

  // ---- wake claims --------------------------------------------------------

  async claimWake(host: string): Promise<WakeAnswer> {
    const { metrics } = this.#deps
    try {
      requireValidHost(host)
      // The host's preparation slot (its key being minted): a claim never
      // starts an instance whose key is half made.
      for (let busy = this.#slots.busy(host); busy !== undefined; busy = this.#slots.busy(host)) await busy
      // From here to the claim's record, one synchronous stretch: no fence
      // can be raised between the judgement, the fence check and the record.
      const j = this.#judge(host)
      if (!j.ok) {
        metrics.wakeClaim(j.kind)
        return { granted: false, refusal: j.refusal }
      }
      const admitted = this.#fence.admit(host, () => this.#claims.claim(host))
      if (!admitted.admitted) {
        metrics.wakeClaim('fenced')
        return { granted: false, refusal: { host, layout: 'fenced', reason: `fenced: fenced for its move (generation ${admitted.generation})` } }
      }
      metrics.wakeClaim('granted')
      return { granted: true, grant: j.grant }
    } catch (err) {
      metrics.wakeClaim(err instanceof AppError && err.code === 'invalid_host' ? 'unknown_host' : 'error')
      throw err
    }
  }

  readyFor(host: string): WakeAnswer {
    requireValidHost(host)
    const j = this.#judge(host)
    return j.ok ? { granted: true, grant: j.grant } : { granted: false, refusal: j.refusal }
  }

  releaseWake(host: string): void {
    requireValidHost(host)
    this.#claims.release(host)
  }

  replaceWakes(awake: readonly string[]): WakeSet {
    if (this.#deps.config.activator === 'none') throw errors.conflict(NO_ACTIVATOR)
    if (this.#phase !== 'ready') throw errors.notReady(this.#phase)
    for (const h of awake) requireValidHost(h)
    const hosts = [...new Set(awake)].sort()
    // Recorded as they are: a host the activator has awake is awake, and
    // the pass must not move its files whatever a claim for it would get.
    this.#claims.replace(hosts)
    const stop: WakeSet['stop'] = []
    for (const h of hosts) {
      const j = this.#judge(h)
      if (!j.ok) stop.push({ host: h, reason: j.refusal.reason })
    }
    return { awake: this.#claims.list(), stop }
  }

  wakes(): WakeList {
    return { awake: this.#claims.list(), swept: this.#claims.swept }
  }

  /** What a claim for host gets now, without recording it (design §6). */
  #judge(host: string): WakeVerdict {
    return judgeWake(host, {
      armed: this.#deps.config.activator !== 'none',
      phase: this.#phase,
      pass: this.#pass,
      rows: () => this.#rows(),
      gate: this.#gate,
    })
  }

  kick(): LegState {
    if (this.#phase !== 'ready') throw errors.notReady(this.#phase)
    this.#leg.kick()
    return this.#leg.state()
  }

  async converge(timeoutMs: number): Promise<LegRun | null> {
    if (this.#phase !== 'ready') throw errors.notReady(this.#phase)
    return this.#leg.kickAndWait(timeoutMs)
  }

  legState(): LegState {
    return this.#leg.state()
  }

  mint(): Promise<Mode> {
    const { config, store } = this.#deps
    return mintLayoutIntentWith({ store, dirs: config, routes: () => this.#rows().routes, ...this.#intentInputs() })
  }

  /** What every reading of the intent needs: whose it is, and what stands in when none is recorded. */
  #intentInputs(): { box: string } & DefaultInputs {
    const { box, layoutDefault, build } = this.#deps.config
    return { box, layoutDefault, build, gate: this.#gate }
  }
}

// The background worker: the start-up order of DESIGN §4 (seed
// startActivator / activatorStart.Run), the poller that turns a new intent
// into a serial move, the leg, and shutdown. One object owns what the seed
// kept in package-level atomics: the armed pass, the intent seen, the
// default's state, the gate.
import type { AgentApi, Phase, Readiness, ReadyCheck } from './agent-api.js'
import type { Config } from './config.js'
import { errors } from './errors.js'
import { FenceTable } from './domain/fence.js'
import { loadLayoutIntent } from './domain/intent.js'
import { IntentState } from './domain/intent-state.js'
import { Leg } from './domain/leg.js'
import { layoutLegWith, logLayoutResults } from './domain/leg-run.js'
import { layoutDefault, type DefaultInputs } from './domain/layout-default.js'
import { mintLayoutIntentWith } from './domain/mint.js'
import type { Mode, Result, RowLayout } from './domain/modes.js'
import type { Clock, DeployStore, Logger } from './domain/ports.js'
import { systemClock } from './domain/ports.js'
import { layoutStatusReport, unmanagedLayoutReport } from './domain/report.js'
import type { LayoutReport, LegRun, LegState } from './domain/schemas.js'
import { startupRecoveryIntent } from './domain/startup.js'
import { groupId, SOCKETS_GROUP } from './infra/groups.js'
import { failpointFrom } from './infra/failpoint.js'
import { Isolation } from './infra/isolation.js'
import { layoutDirectory } from './infra/layout-dir.js'
import { Pass } from './infra/pass.js'
import type { Registry } from './infra/registry.js'
import { WakeClaims } from './infra/wake-claims.js'
import type { Metrics } from './metrics.js'

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
}

export class Agent implements AgentApi {
  #phase: Phase = 'starting'
  readonly #deps: AgentDeps
  readonly #clock: Clock
  readonly #state = new IntentState()
  readonly #fence = new FenceTable()
  readonly #claims: WakeClaims
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
    this.#claims = new WakeClaims(deps.registry, config.activatorUrl, logger)
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
      reload: this.#deps.reload,
    })
    const defaultOptedOut = layoutDefault(config.layoutDefault).mode === 'flat'
    const recovered = await pass.recover(intent, { defaultOptedOut })
    for (const r of recovered) this.#deps.metrics.recoveredJournal(r.outcome === 'recovered' ? 'finished' : r.outcome === 'released' ? 'rolled_back' : 'kept_fenced')
    logLayoutResults(recovered, logger)
    logLayoutResults(await pass.restoreHolds(intent, defaultOptedOut), logger)
    logger.info({ intent, swept }, `layout: start-up recovery done under intent ${intent}${swept ? '' : ' (wake claims unreadable: every host counts as awake)'}`)
    this.#pass = pass
    if (this.#life.signal.aborted) return
    this.#phase = 'ready'
    void this.#firstPoll()
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
  }

  // ---- the leg ----------------------------------------------------------

  async #runLeg(signal: AbortSignal): Promise<{ results: Result[]; retry: boolean }> {
    const pass = this.#pass
    if (pass === null) return { results: [], retry: false }
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
    metrics.setHeldHosts(Object.values(report.rows).filter((r) => r.reason.startsWith('held')).length)
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
    let seen: string
    try {
      const read = await loadLayoutIntent(this.#deps.store, this.#deps.config.box, this.#life.signal)
      seen = read.found ? `${read.intent.id}/${read.intent.mode}/${String(read.intent.force)}` : 'none'
    } catch (err) {
      seen = `unreadable: ${(err as Error).message}`
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
      { name: 'registry', ok: true, detail: this.#deps.registry.file },
      {
        name: 'wake-claims',
        ok: phase === 'ready' && (this.#deps.config.activator === 'none' || this.#claims.swept),
        detail: this.#deps.config.activator === 'none' ? 'no activator armed' : this.#claims.swept ? 'loaded' : phase === 'ready' ? 'unreadable: every host counts as awake' : 'not yet loaded',
      },
      { name: 'recovery', ok: phase === 'ready', detail: phase === 'ready' ? 'done' : phase },
    ]
    const gate = this.#gate?.check() ?? 'no activator is armed on this box'
    return {
      // Wake claims that could not be read do not hold the box down: the
      // pass treats every host as awake, and flat wakes go on.
      ready: phase === 'ready',
      phase,
      checks,
      nested: { allowed: this.#gate !== null && this.#gate.check() === null, reason: this.#gate?.check() === null ? '' : gate },
    }
  }

  report(): LayoutReport {
    const { config, registry } = this.#deps
    const routes = registry.list()
    if (this.#pass === null) {
      return unmanagedLayoutReport({
        box: config.box,
        routes,
        dirs: config,
        journalHosts: this.#unmanagedFenced.journals,
        holdHosts: this.#unmanagedFenced.holds,
        leg: this.#leg.state(),
      })
    }
    return layoutStatusReport({ box: config.box, routes, pass: this.#pass, state: this.#state, leg: this.#leg.state() })
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
    const { config, registry, store } = this.#deps
    return mintLayoutIntentWith({ store, dirs: config, routes: () => registry.list(), ...this.#intentInputs() })
  }

  /** What every reading of the intent needs: whose it is, and what stands in when none is recorded. */
  #intentInputs(): { box: string } & DefaultInputs {
    const { box, layoutDefault, build } = this.#deps.config
    return { box, layoutDefault, build, gate: this.#gate }
  }
}

// The layout pass (design §3–§4): moves activator-managed hosts between
// the flat and nested layouts and finishes every journal exactly after a
// crash. Here: what the report and a wake read, start-up, the converge loop.
import { performance } from 'node:perf_hooks'
import { classifyWith, PathClaims } from '../../domain/classify.js'
import { claimsOfRows, followRows, followSome, type ClaimsOf } from './claims-follower.js'
import type { IntentMode, Mode, Result } from '../../domain/modes.js'
import { inBatches, inRowOrder, planRow, sortByClaim, type MoveCandidate } from '../../domain/pass-plan.js'
import { activatorManaged } from '../../domain/paths.js'
import type { Classification, LayoutPass, PassFacts } from '../../domain/ports.js'
import { why, type Why } from '../../domain/reason-codes.js'
import type { Route } from '../../domain/schemas.js'
import { errorMessage } from '../../errors.js'
import { verifyDataRoots } from '../layout-dir.js'
import { GraceBook } from './grace.js'
import { listLayout } from './journal.js'
import { AwakeStop } from './awake-stop.js'
import { holdEdgeModes } from './edge-modes.js'
import { MoveEndings } from './move-endings.js'
import { MoveSteps } from './move-steps.js'
import { PassContext, type PassDeps } from './pass-context.js'
import { PassState } from './pass-state.js'
import { Recovery, removeUnfinishedTemps } from './recovery.js'

export { BATCH_SIZE, STOP_TIMEOUT_MS, type PassDeps } from './pass-context.js'

interface LoadedParts {
  grace: GraceBook
  steps: MoveSteps
  awake: AwakeStop
  recovery: Recovery
}

const CATCH_UP_HOSTS = 32
/** Rows the first index takes between two looks at the slice's clock. */
const WARM_ROWS = 64

/** The first index of path claims, part built. */
interface Warming {
  routes: readonly Route[]
  claims: PathClaims
  next: number
}

export class Pass implements LayoutPass {
  readonly #ctx: PassContext
  readonly #state: PassState
  #loaded: Promise<LoadedParts> | undefined
  #claimsFor: ClaimsOf | undefined
  #warming: Warming | undefined
  #catchingUp = false
  #graceEnds: number | undefined

  constructor(deps: PassDeps) {
    this.#ctx = new PassContext(deps)
    this.#state = new PassState(deps.dirs, deps.fence, this.#ctx.slicer)
    this.#ctx.afterCommit = () => void this.#catchUpClaims()
  }

  // ---- what the report and a wake read: memory only --------------------

  classify(route: Route, routes: readonly Route[]): Classification {
    this.#warmed()
    // Indexed once per list, then followed by the rows that changed.
    if (this.#claimsFor?.routes !== routes) this.#claimsFor = followRows(this.#claimsFor, routes)
    return classifyWith(route, this.#claimsFor.claims, {
      dirs: this.#ctx.deps.dirs,
      fenced: (host) => this.#state.fencedReason(host),
    })
  }

  /**
   * The first index of path claims, built in slices (design §3.3): built by the first classify, it would hold
   * the loop for the whole list while a wake waits. A classify meanwhile finishes it in its own stretch.
   */
  async warmClaims(): Promise<void> {
    if (this.#claimsFor !== undefined || this.#warming !== undefined) return
    const routes = this.#ctx.deps.registry.snapshot().routes
    const warming: Warming = (this.#warming = { routes, claims: new PathClaims(), next: 0 })
    while (this.#warming === warming && warming.next < routes.length) {
      const end = Math.min(warming.next + WARM_ROWS, routes.length)
      while (warming.next < end) warming.claims.add(routes[warming.next++] as Route)
      await this.#ctx.slicer.pause()
    }
    this.#warmed()
  }

  /** The rows the warm-up has not indexed yet, in this stretch. */
  #warmed(): void {
    const warming = this.#warming
    if (warming === undefined) return
    const { routes, claims } = warming
    while (warming.next < routes.length) claims.add(routes[warming.next++] as Route)
    this.#warming = undefined
    this.#claimsFor = claimsOfRows(routes, claims)
  }

  /** After a commit: the claims followed to the rewritten rows, a slice at a time (design §3.6). */
  async #catchUpClaims(): Promise<void> {
    if (this.#catchingUp) return
    this.#catchingUp = true
    try {
      for (;;) {
        const claims = this.#claimsFor
        const routes = this.#ctx.deps.registry.snapshot().routes
        if (claims === undefined || claims.routes === routes) return
        const next = followSome(claims, routes, CATCH_UP_HOSTS)
        if (next === undefined) return
        this.#claimsFor = next
        await this.#ctx.slicer.pause()
      }
    } catch (err) {
      // The next wake follows them; nothing is decided here.
      this.#ctx.deps.logger.debug({ err }, `layout: path claims not caught up after a commit: ${errorMessage(err)}`)
    } finally {
      this.#catchingUp = false
    }
  }

  held(host: string): Why | undefined {
    const hold = this.#state.hold(host)
    return hold === undefined ? undefined : why(hold.code, hold.reason)
  }

  note(host: string): string {
    return this.#state.note(host) ?? ''
  }

  changes(): number {
    return this.#state.changes
  }

  facts(): PassFacts {
    return this.#state.facts()
  }

  // ---- start-up ---------------------------------------------------------

  /** Finishes every journal exactly (design §4); defaultOptedOut: intent `none` wants flat. */
  async recover(intent: IntentMode, opts: { defaultOptedOut?: boolean } = {}): Promise<Result[]> {
    const { recovery } = await this.#load()
    return recovery.recoverJournals(intent, opts.defaultOptedOut ?? false, true)
  }

  /** Re-fences held hosts whose hold still stands, drops the others (design §4). */
  async restoreHolds(intent: IntentMode, defaultOptedOut = false): Promise<Result[]> {
    const { recovery } = await this.#load()
    return recovery.restoreHolds(intent, defaultOptedOut)
  }

  // ---- converge ---------------------------------------------------------

  /** When the soonest deferred grace runs out (ms since the epoch), or null. */
  graceEndsAt(): number | null {
    return this.#graceEnds ?? null
  }

  async converge(mode: Mode, opts: { deferAwake: boolean; signal: AbortSignal }): Promise<Result[]> {
    this.#graceEnds = undefined
    const parts = await this.#load()
    const { grace } = parts
    const { dirs, gate, logger, registry } = this.#ctx.deps
    // Checked before each run, as at start (design §2.1).
    await verifyDataRoots(dirs.dataDir)
    const results: Result[] = []
    // Kept journals are asked again under this mode first.
    results.push(...(await parts.recovery.recoverJournals(mode, false, false)))

    // Carried over this agent's rewrites: no run lists every row again.
    const rows = registry.snapshot().routes
    const settled: Route[] = []
    const candidates = await this.#planRows(rows, mode, grace, results, settled)

    // Two batches at a time (design §3.3): the next walks while this one moves.
    let ahead: Promise<void> | undefined
    let failure: { err: unknown } | undefined
    for (const planned of inBatches(candidates, this.#ctx.batchSize)) {
      if (opts.signal.aborted || failure !== undefined) break
      let batch = planned
      // The gate can shut mid-run: stop no host for a move the box would refuse to wake.
      const shut = mode === 'nested' ? gate.check() : null
      if (shut !== null) {
        for (const candidate of batch)
          results.push(
            this.#ctx.resultWithMetrics(
              candidate.record.host,
              'refused',
              why('gate_shut', `isolation not ready: ${shut}`),
              mode,
            ),
          )
        batch = []
      }
      let walked = (): void => undefined
      const isWalked = new Promise<void>((resolve) => (walked = resolve))
      const going = this.#moveBatch(batch, mode, opts, parts, walked).then(
        (moved) => {
          results.push(...moved)
        },
        (err: unknown) => {
          failure ??= { err }
        },
      )
      await Promise.all([Promise.race([isWalked, going]), ahead])
      ahead = going
    }
    await ahead
    if (failure !== undefined) throw failure.err
    if (!opts.signal.aborted) await this.#holdEdgeModes(settled)
    await grace.save().catch((err: unknown) => {
      logger.error({ err }, `layout: grace book not saved: ${errorMessage(err)}`)
    })
    return inRowOrder(results, rows, () => this.#ctx.slicer.pause())
  }

  /** Step 1 for each managed row no journal governs: moves answered, other results pushed. */
  async #planRows(
    rows: readonly Route[],
    mode: Mode,
    grace: GraceBook,
    results: Result[],
    settled: Route[],
  ): Promise<MoveCandidate[]> {
    const ctx = this.#ctx
    const { dirs, gate } = ctx.deps
    // Planned in slices, so a large box never holds a wake.
    const claims = await this.#claimsToPlan(rows)
    const gateAnswer = mode === 'nested' ? gate.check() : null
    const managed = rows.filter((row) => activatorManaged(row) && !this.#state.journaled(row.host))
    grace.retain(mode, new Set(managed.map((row) => row.host)))

    const candidates: MoveCandidate[] = []
    const release: string[] = []
    for (const row of managed) {
      await ctx.slicer.pause()
      const hold = this.#state.hold(row.host)
      if (hold?.corrupt === true) {
        results.push(ctx.resultWithMetrics(row.host, 'held', hold, mode))
        continue
      }
      const classification = classifyWith(row, claims, { dirs, fenced: () => undefined })
      const plan = planRow(row, mode, { dirs, classification, hold: hold?.to, gate: gateAnswer, claims })
      switch (plan.kind) {
        case 'unchanged':
          grace.end(row.host)
          if (mode === 'nested') settled.push(row)
          results.push(ctx.resultWithMetrics(row.host, 'unchanged', undefined, mode))
          break
        case 'refused':
          results.push(ctx.resultWithMetrics(row.host, 'refused', plan, mode))
          break
        case 'release':
          grace.end(row.host)
          release.push(row.host)
          results.push(ctx.resultWithMetrics(row.host, 'released', plan, mode))
          break
        case 'move':
          candidates.push({
            record: { host: row.host, to: mode, from: plan.from, dest: plan.dest },
            wasHeld: hold !== undefined,
          })
          break
      }
    }
    if (release.length > 0) {
      await this.#state.releaseHolds(release)
      await ctx.reloadEdge()
    }
    return candidates
  }

  /** The wakes' claims followed to rows (built per slice when none); a wake may move them mid-plan (§3.3). */
  async #claimsToPlan(rows: readonly Route[]): Promise<PathClaims> {
    if (this.#claimsFor !== undefined) {
      if (this.#claimsFor.routes !== rows) this.#claimsFor = followRows(this.#claimsFor, rows)
      return this.#claimsFor.claims
    }
    const claims = new PathClaims()
    for (const row of rows) {
      claims.add(row)
      await this.#ctx.slicer.pause()
    }
    // A wake's own, made meanwhile, is kept.
    this.#claimsFor ??= claimsOfRows(rows, claims)
    return claims
  }

  /** One batch: sleeping hosts fenced and moved together, then awake ones stopped and moved one by one. */
  async #moveBatch(
    batch: readonly MoveCandidate[],
    mode: Mode,
    opts: { deferAwake: boolean; signal: AbortSignal },
    parts: LoadedParts,
    walked: () => void,
  ): Promise<Result[]> {
    const ctx = this.#ctx
    const { claims, clock, graceMs, registry } = ctx.deps
    const results: Result[] = []
    // One tick from the claim checks to the fence (FenceTable.admit): a host found asleep is fenced asleep.
    const now = clock.now()
    const sorted = sortByClaim(batch, {
      claimed: (host) => claims.claimed(host),
      deferAwake: opts.deferAwake,
      graceLeft: (host) => parts.grace.left(host, mode, now, graceMs),
    })
    for (const { candidate, because, leftMs } of sorted.deferred) {
      results.push(ctx.resultWithMetrics(candidate.record.host, 'deferred', because, mode))
      this.#graceEnds = Math.min(this.#graceEnds ?? Infinity, now + leftMs)
    }
    if (sorted.sleeping.length > 0) {
      const generation = registry.nextGeneration()
      this.#state.fence(
        sorted.sleeping.map((candidate) => candidate.record.host),
        generation,
      )
      ctx.failpoint('after-fence')
      const fencedAt = performance.now()
      const startedAt = new Date(now).toISOString()
      const moves = sorted.sleeping.map((candidate) => ({
        journal: { v: 1 as const, ...candidate.record, generation, startedAt },
        wasHeld: candidate.wasHeld,
        fencedAt,
      }))
      results.push(...(await parts.steps.move(moves, walked)))
    }
    for (const candidate of sorted.awake) {
      if (opts.signal.aborted) break
      const why = candidate.wasHeld ? 'held' : opts.deferAwake ? 'grace over' : 'force'
      results.push(...(await parts.awake.stopAndMove(candidate, opts.signal, why)))
    }
    return results
  }

  /** Rows already nested keep the modes a move gives (design §2); a failure is only logged. */
  async #holdEdgeModes(settled: readonly Route[]): Promise<void> {
    const { claims, dirs, logger, socketsGid } = this.#ctx.deps
    try {
      const { repaired, left } = await holdEdgeModes(settled, {
        dirs,
        gid: await socketsGid(),
        slicer: this.#ctx.slicer,
        free: (host) => !claims.claimed(host) && this.#state.fencedReason(host) === undefined,
        logger,
      })
      if (repaired.length > 0 || left.length > 0)
        logger.info(
          { repaired: repaired.length, left: left.length },
          `layout: ${repaired.length} nested root(s) given mode 0710 for the edge, data/ closed to it` +
            (left.length > 0 ? `; ${left.length} awake, fenced or failed, left for a later run` : ''),
        )
    } catch (err) {
      logger.error({ err }, `layout: nested modes not held for the edge: ${errorMessage(err)}`)
    }
  }

  // ---- plumbing ---------------------------------------------------------

  #load(): Promise<LoadedParts> {
    this.#loaded ??= this.#loadOnce()
    return this.#loaded
  }

  async #loadOnce(): Promise<LoadedParts> {
    const ctx = this.#ctx
    await verifyDataRoots(ctx.deps.dirs.dataDir)
    const listing = await listLayout(ctx.deps.dirs)
    await removeUnfinishedTemps(ctx, listing)
    await this.#state.load(listing.holds)
    const grace = await GraceBook.load(ctx.deps.dirs, ctx.deps.logger, ctx.deps.clock)
    const endings = new MoveEndings(ctx, this.#state, grace)
    const steps = new MoveSteps(ctx, this.#state, endings)
    const awake = new AwakeStop(ctx, this.#state, steps)
    const recovery = new Recovery(ctx, this.#state, { steps, endings, awake })
    return { grace, steps, awake, recovery }
  }
}

// The layout pass (design §3–§4): moves activator-managed hosts between
// the flat and nested layouts and finishes every journal exactly after a
// crash. This file owns what the report and a wake ask, the start-up entry
// points and the converge loop (sleeping hosts in batches, awake ones one at
// a time); the other parts are their own files here.
//
// Many sleeping hosts share each durable write (design §3 "Many hosts"): a
// batch is fenced together, its journals are written with one directory
// fsync, its rows are rewritten in one registry transaction, and its
// journals removed with one fsync.
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

/** The parts that need what is on disk: built once it is loaded. */
interface LoadedParts {
  grace: GraceBook
  steps: MoveSteps
  awake: AwakeStop
  recovery: Recovery
}

/** Hosts the claims' catch-up follows between two looks at the slicer. */
const CATCH_UP_HOSTS = 32

export class Pass implements LayoutPass {
  readonly #ctx: PassContext
  readonly #state: PassState
  #loaded: Promise<LoadedParts> | undefined
  #claimsFor: ClaimsOf | undefined
  #catchingUp = false
  /** When the soonest grace of a host the last converge deferred runs out (wall clock, ms); undefined: none. */
  #graceEnds: number | undefined

  constructor(deps: PassDeps) {
    this.#ctx = new PassContext(deps)
    this.#state = new PassState(deps.dirs, deps.fence, this.#ctx.slicer)
    this.#ctx.afterCommit = () => void this.#catchUpClaims()
  }

  // ---- what the report and a wake read: memory only --------------------

  classify(route: Route, routes: readonly Route[]): Classification {
    // The report classifies every row against the same list: index it once,
    // and follow a new list by the rows that changed in it.
    if (this.#claimsFor?.routes !== routes) this.#claimsFor = followRows(this.#claimsFor, routes)
    return classifyWith(route, this.#claimsFor.claims, {
      dirs: this.#ctx.deps.dirs,
      fenced: (host) => this.#state.fencedReason(host),
    })
  }

  /**
   * After a batch's commit: the path claims followed to the rewritten rows,
   * CATCH_UP_HOSTS at a time between the slicer's turns, so the next wake
   * does not follow a whole batch while it waits (design §3.6); a wake that
   * comes first follows the rest itself.
   */
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

  /**
   * Finishes every journal exactly (design §4). defaultOptedOut: the
   * deployment's default is flat, so intent `none` wants flat (a move to
   * nested caught mid-way is rolled back rather than finished).
   */
  async recover(intent: IntentMode, opts: { defaultOptedOut?: boolean } = {}): Promise<Result[]> {
    const { recovery } = await this.#load()
    return recovery.recoverJournals(intent, opts.defaultOptedOut ?? false, true)
  }

  /** Re-fences every held host whose hold still stands under intent, and drops the others (design §4). */
  async restoreHolds(intent: IntentMode, defaultOptedOut = false): Promise<Result[]> {
    const { recovery } = await this.#load()
    return recovery.restoreHolds(intent, defaultOptedOut)
  }

  // ---- converge ---------------------------------------------------------

  /** When the soonest grace of a host the last converge deferred runs out (ms since the epoch), or null. */
  graceEndsAt(): number | null {
    return this.#graceEnds ?? null
  }

  async converge(mode: Mode, opts: { deferAwake: boolean; signal: AbortSignal }): Promise<Result[]> {
    this.#graceEnds = undefined
    const parts = await this.#load()
    const { grace } = parts
    const { dirs, gate, logger, registry } = this.#ctx.deps
    // Every path of the run is built from these roots: checked again before
    // each run, as at start (design §2.1), a failed check fails the run.
    await verifyDataRoots(dirs.dataDir)
    const results: Result[] = []
    // A journal recovery kept, or one an operator has since resolved: the
    // table is asked again under this mode before any row is planned.
    results.push(...(await parts.recovery.recoverJournals(mode, false, false)))

    // As listed, or carried over this agent's own rewrites since: a run
    // that starts on a box of 10,000 rows does not list them all again.
    const rows = registry.snapshot().routes
    const settled: Route[] = []
    const candidates = await this.#planRows(rows, mode, grace, results, settled)

    // Two batches at a time (design §3.3): the next is started once this
    // one is walked, so its walk goes on while this one is prepared,
    // renamed, committed and finished. Each host is at one numbered step
    // at every moment, whichever batch it is in.
    let ahead: Promise<void> | undefined
    let failure: { err: unknown } | undefined
    for (const planned of inBatches(candidates, this.#ctx.batchSize)) {
      if (opts.signal.aborted || failure !== undefined) break
      let batch = planned
      // The gate can shut while a long run is under way; no host is stopped
      // for a nested move the box would then refuse to wake.
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

  /**
   * Step 1 for every managed row no journal governs: the rows to move are
   * answered, every other row's result is pushed, and the holds of rows
   * already where the mode wants them are released. Rows already nested
   * as the mode wants are pushed to settled.
   */
  async #planRows(
    rows: readonly Route[],
    mode: Mode,
    grace: GraceBook,
    results: Result[],
    settled: Route[],
  ): Promise<MoveCandidate[]> {
    const ctx = this.#ctx
    const { dirs, gate } = ctx.deps
    // Every row planned in turn, giving the event loop back between slices:
    // a box of 10,000 rows never holds a wake.
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

  /**
   * The path claims a plan classifies its rows against: the ones the wakes
   * follow, followed to rows (after a converge, by the rows the pass
   * rewrote), not an index of every row built again at each run (its maps
   * of 10,000 hosts grown and its garbage made as the converge starts).
   * When there are none yet (the first run after a start, before any wake)
   * they are built a row at a time, giving the loop back between slices,
   * and kept for the wakes. A wake that follows them to a newer list (a
   * row another process added) while the plan goes on moves them under
   * it: the rows planned after that meet the claims of the rows as they
   * are now, the newer row's among them (design §3.3).
   */
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
    // A wake that came meanwhile made its own: it is kept, and this one plans.
    this.#claimsFor ??= claimsOfRows(rows, claims)
    return claims
  }

  /** One batch: its sleeping hosts fenced and moved together, then its awake ones stopped and moved one at a time. */
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
    // One tick from the claim checks to the fence: no wake can be granted
    // between them (FenceTable.admit), so a host found asleep here is
    // fenced asleep.
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
      // Why an awake host is stopped rather than left its grace, for what the run says it waits on.
      const why = candidate.wasHeld ? 'held' : opts.deferAwake ? 'grace over' : 'force'
      results.push(...(await parts.awake.stopAndMove(candidate, opts.signal, why)))
    }
    return results
  }

  /**
   * Rows already nested keep the modes a move gives (design §2), whatever
   * build nested them: a root left 0750 by an earlier build is repaired
   * here, a claimed or fenced host at a later run (edge-modes.ts). A
   * failure is logged: it changes no row and holds no move back.
   */
  async #holdEdgeModes(settled: readonly Route[]): Promise<void> {
    const { claims, dirs, logger, socketsGid } = this.#ctx.deps
    try {
      const { repaired, left } = await holdEdgeModes(settled, {
        dirs,
        gid: socketsGid,
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

  /** Loads what the pass keeps in memory (holds, notes, the grace book), once, and builds the parts that use it. */
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

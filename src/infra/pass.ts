// The layout pass (seed `layout.Pass`, DESIGN §3–§4): moves activator-
// managed hosts between the flat and nested layouts, one move at a time in
// the order of the steps, and finishes every journal exactly after a crash.
//
// Many sleeping hosts share each durable write (DESIGN §3 "Many hosts"): a
// batch is fenced together, its journals are written with one directory
// fsync, its rows are rewritten in one registry transaction, and its
// journals removed with one fsync. Every host of a batch is always at one
// of the numbered steps, each one covered by the §4 table, so a crash
// anywhere in a batch recovers each host exactly as it would a lone move.
import path from 'node:path'
import { performance } from 'node:perf_hooks'
import { classifyWith, PathClaims } from '../domain/classify.js'
import type { Claims, FenceTable } from '../domain/fence.js'
import type { IntentMode, Mode, Outcome, Result } from '../domain/modes.js'
import {
  awakeReason,
  holdStands,
  inRowOrder,
  otherMode,
  planRow,
  recoveryAction,
  rowAt,
  wantedMode,
  type RecoveryAction,
  type RecoveryFacts,
} from '../domain/pass-plan.js'
import { activatorManaged, isFlat, isNested, journalPath, type Dirs } from '../domain/paths.js'
import type { Classification, Clock, IsolationGate, LayoutPass, Logger, RouteStore } from '../domain/ports.js'
import type { Route } from '../domain/schemas.js'
import { fsyncDirs, mapLimit, present, unlinkMany } from './fsutil.js'
import { GraceBook } from './grace.js'
import { loadAsideNotes, readHold, removeHolds, writeHolds, type Hold, type HoldMarker } from './holds.js'
import { layoutDir, listLayout, readJournal, removeJournals, writeJournals, type Journal } from './journal.js'
import { clearDestination, prepareParents, preflight, renameDir, syncParents } from './mover.js'

/** How long a stop may take before the move gives up on the host (DESIGN §3 step 3). */
export const STOP_TIMEOUT_MS = 60_000

/** Sleeping hosts per group commit: large enough to amortise the fsyncs, small enough that few hosts wait fenced at once. */
export const BATCH_SIZE = 128

/** Hosts of a batch whose independent file work (checks, preflight, parents) runs at once. */
const HOST_CONCURRENCY = 8

export interface PassDeps {
  dirs: Dirs
  registry: RouteStore
  fence: FenceTable
  claims: Claims
  gate: IsolationGate
  logger: Logger
  clock: Clock
  /** CARLOS_LAYOUT_AWAKE_GRACE. */
  graceMs: number
  /** The carlos-sockets group's id for nested run/ directories; -1 leaves the group alone. */
  socketsGid: number
  /** Called at each step of a move (FAILPOINT_STEPS, once per batch; and `after-rename:<host>` after each rename); the crash suite kills the process there. */
  failpoint?: (step: string) => void
  /**
   * Called for every result that names a mode, except `unchanged`.
   * seconds is how long the host was fenced for the move (0 when nothing was fenced).
   */
  onMove?: (to: Mode, outcome: Outcome, seconds: number) => void
  /** Called with every result as it is decided, so a run's progress can be shown while it goes on. */
  onResult?: (r: Result) => void
  /** Called once per journal recovery acts on, and once per change of a kept journal's reason. */
  onRecover?: (action: RecoveryAction['kind']) => void
  /** Asks the edge to reload its routes after rows were rewritten or released. */
  reload?: () => Promise<void>
  stopTimeoutMs?: number
  batchSize?: number
}

/** One host between its journal and its journal's removal. */
interface Flight {
  j: Journal
  /** Held before this run reached it: a failure leaves it fenced and held, as it was. */
  wasHeld: boolean
  /** performance.now() when it was fenced. */
  t0: number
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err)
}

const HOLD_AFTER_REVERT =
  'revert completed while the intent was unreadable: kept down rather than released flat, since the fleet may want it nested'

export class Pass implements LayoutPass {
  readonly #d: PassDeps
  readonly #stopTimeoutMs: number
  readonly #batchSize: number
  /** Journals on disk whose move this run is carrying out. */
  readonly #open = new Map<string, Journal>()
  /** Hosts whose journal recovery could not finish: fenced, with why. */
  readonly #kept = new Map<string, string>()
  readonly #holds = new Map<string, Hold>()
  readonly #notes = new Map<string, string>()
  #grace: GraceBook | undefined
  #loaded: Promise<void> | undefined
  #claimsFor: { routes: readonly Route[]; claims: PathClaims } | undefined

  constructor(deps: PassDeps) {
    this.#d = deps
    this.#stopTimeoutMs = deps.stopTimeoutMs ?? STOP_TIMEOUT_MS
    this.#batchSize = Math.max(1, deps.batchSize ?? BATCH_SIZE)
  }

  // ---- what the report and a wake read: memory only --------------------

  classify(route: Route, routes: readonly Route[]): Classification {
    // The report classifies every row against the same list: index it once.
    if (this.#claimsFor?.routes !== routes) this.#claimsFor = { routes, claims: new PathClaims(routes) }
    return classifyWith(route, this.#claimsFor.claims, { dirs: this.#d.dirs, fenced: (h) => this.#fencedReason(h) })
  }

  held(host: string): string | undefined {
    return this.#holds.get(host)?.reason
  }

  note(host: string): string {
    return this.#notes.get(host) ?? ''
  }

  #fencedReason(host: string): string | undefined {
    const kept = this.#kept.get(host)
    if (kept !== undefined) return kept
    const j = this.#open.get(host)
    if (j !== undefined) return `layout move to ${j.to} in flight; see ${journalPath(this.#d.dirs, host)}`
    const h = this.#holds.get(host)
    if (h !== undefined) {
      if (h.corrupt) return h.reason
      return h.reason === HOLD_AFTER_REVERT ? `held down: ${h.reason}` : `held down after a refused move to ${h.to}: ${h.reason}`
    }
    const g = this.#d.fence.fenced(host)
    if (g !== undefined) return `fenced for its move (generation ${g})`
    return undefined
  }

  // ---- start-up ---------------------------------------------------------

  /**
   * Finishes every journal exactly (DESIGN §4). defaultOptedOut: the
   * deployment's default is flat, so intent `none` wants flat (a move to
   * nested caught mid-way is rolled back rather than finished).
   */
  async recover(intent: IntentMode, opts: { defaultOptedOut?: boolean } = {}): Promise<Result[]> {
    await this.#load()
    return this.#recoverJournals(intent, opts.defaultOptedOut ?? false, true)
  }

  /**
   * Re-fences every held host whose hold still stands under intent, and
   * drops the others (DESIGN §4): a hold stands under nested and
   * unreadable, and drops under a recorded flat or under none with the
   * default opted out (the host is flat already; it wakes flat).
   */
  async restoreHolds(intent: IntentMode, defaultOptedOut = false): Promise<Result[]> {
    await this.#load()
    const rows = new Map(this.#d.registry.list().map((r) => [r.host, r]))
    const results: Result[] = []
    const keep: string[] = []
    const drop: string[] = []
    for (const h of [...this.#holds.values()].sort((a, b) => (a.host < b.host ? -1 : 1))) {
      // A journal governs its host; recovery has fenced it already.
      if (this.#open.has(h.host) || this.#kept.has(h.host)) continue
      const rt = rows.get(h.host)
      if (h.corrupt) {
        keep.push(h.host)
        results.push(this.#result(h.host, 'held', h.reason))
        continue
      }
      if (rt === undefined) {
        drop.push(h.host)
        results.push(this.#result(h.host, 'released', 'hold dropped: the row is gone from the registry', h.to))
        continue
      }
      const shape: Mode | undefined = isNested(this.#d.dirs, rt) ? 'nested' : isFlat(this.#d.dirs, rt) ? 'flat' : undefined
      const s = holdStands(h.to, shape, intent, defaultOptedOut)
      if (s.stands) {
        keep.push(h.host)
        results.push(this.#result(h.host, 'held', h.reason, h.to))
      } else {
        drop.push(h.host)
        results.push(this.#result(h.host, 'released', `hold dropped: ${s.reason}`, h.to))
      }
    }
    if (keep.length > 0) this.#d.fence.fence(keep, this.#d.registry.nextGeneration())
    if (drop.length > 0) await this.#dropHolds(drop)
    return results
  }

  // ---- converge ---------------------------------------------------------

  async converge(mode: Mode, opts: { deferAwake: boolean; signal: AbortSignal }): Promise<Result[]> {
    await this.#load()
    const grace = this.#grace as GraceBook
    const results: Result[] = []
    // A journal recovery kept, or one an operator has since resolved: the
    // table is asked again under this mode before any row is planned.
    results.push(...(await this.#recoverJournals(mode, false, false)))

    const rows = this.#d.registry.list()
    const claims = new PathClaims(rows)
    const gate = mode === 'nested' ? this.#d.gate.check() : null
    const managed = rows.filter((r) => activatorManaged(r) && !this.#open.has(r.host) && !this.#kept.has(r.host))
    grace.retain(mode, new Set(managed.map((r) => r.host)))

    const candidates: Array<{ rt: Route; j: Omit<Journal, 'generation' | 'startedAt'>; wasHeld: boolean }> = []
    const release: string[] = []
    for (const rt of managed) {
      const hold = this.#holds.get(rt.host)
      if (hold?.corrupt === true) {
        results.push(this.#result(rt.host, 'held', hold.reason, mode))
        continue
      }
      const word = classifyWith(rt, claims, { dirs: this.#d.dirs, fenced: () => undefined })
      const plan = planRow(rt, mode, { dirs: this.#d.dirs, classification: word, hold: hold?.to, gate, claims })
      switch (plan.kind) {
        case 'unchanged':
          grace.end(rt.host)
          results.push(this.#result(rt.host, 'unchanged', '', mode))
          break
        case 'refused':
          results.push(this.#result(rt.host, 'refused', plan.reason, mode))
          break
        case 'release':
          grace.end(rt.host)
          release.push(rt.host)
          results.push(this.#result(rt.host, 'released', plan.reason, mode))
          break
        case 'move':
          candidates.push({ rt, j: { v: 1, host: rt.host, to: mode, from: plan.from, dest: plan.dest }, wasHeld: hold !== undefined })
          break
      }
    }
    if (release.length > 0) {
      await this.#dropHolds(release)
      await this.#reload()
    }

    for (let i = 0; i < candidates.length && !opts.signal.aborted; i += this.#batchSize) {
      let chunk = candidates.slice(i, i + this.#batchSize)
      // The gate can shut while a long run is under way; no host is stopped
      // for a nested move the box would then refuse to wake.
      const shut = mode === 'nested' ? this.#d.gate.check() : null
      if (shut !== null) {
        for (const c of chunk) results.push(this.#result(c.rt.host, 'refused', `isolation not ready: ${shut}`, mode))
        chunk = []
      }
      // One tick from the claim checks to the fence: no wake can be granted
      // between them (FenceTable.admit), so a host found asleep here is
      // fenced asleep.
      const now = this.#d.clock.now()
      const sleeping: typeof chunk = []
      const awake: typeof chunk = []
      for (const c of chunk) {
        if (!this.#d.claims.claimed(c.rt.host)) {
          sleeping.push(c)
          continue
        }
        if (opts.deferAwake && !c.wasHeld) {
          const left = grace.left(c.rt.host, mode, now, this.#d.graceMs)
          if (left > 0) {
            results.push(this.#result(c.rt.host, 'deferred', awakeReason(left), mode))
            continue
          }
        }
        awake.push(c)
      }
      if (sleeping.length > 0) {
        const generation = this.#d.registry.nextGeneration()
        this.#d.fence.fence(
          sleeping.map((c) => c.rt.host),
          generation,
        )
        this.#fp('after-fence')
        const t0 = performance.now()
        const startedAt = new Date(now).toISOString()
        results.push(...(await this.#move(sleeping.map((c) => ({ j: { ...c.j, generation, startedAt }, wasHeld: c.wasHeld, t0 })))))
      }
      for (const c of awake) {
        if (opts.signal.aborted) break
        results.push(...(await this.#stopAndMove(c, opts.signal)))
      }
    }
    await grace.save().catch((err: unknown) => {
      this.#d.logger.error({ err: message(err) }, `layout: grace book not saved: ${message(err)}`)
    })
    return inRowOrder(results, rows)
  }

  /** Steps 3 (stop) and on for one host that holds a wake claim. */
  async #stopAndMove(
    c: { rt: Route; j: Omit<Journal, 'generation' | 'startedAt'>; wasHeld: boolean },
    signal: AbortSignal,
  ): Promise<Result[]> {
    const host = c.rt.host
    const generation = this.#d.registry.nextGeneration()
    this.#d.fence.fence([host], generation)
    this.#fp('after-fence')
    const t0 = performance.now()
    // The claim may have been released since the batch was sorted; then
    // the host is asleep, and fenced asleep.
    if (this.#d.claims.claimed(host)) {
      if (!(await this.#stop(host, signal))) {
        if (!c.wasHeld) this.#d.fence.lift([host])
        const secs = Math.round(this.#stopTimeoutMs / 1000)
        const why = signal.aborted
          ? 'stop abandoned: the run was cancelled; it keeps running where it is'
          : `stop timed out: still awake after ${secs}s; it keeps running where it is, and the next run tries again`
        return [this.#result(host, 'failed', why, c.j.to, this.#since(t0))]
      }
      this.#fp('after-stop')
    }
    const startedAt = new Date(this.#d.clock.now()).toISOString()
    return this.#move([{ j: { ...c.j, generation, startedAt }, wasHeld: c.wasHeld, t0 }])
  }

  /**
   * Asks the activator to stop host and waits, at most the stop timeout, for
   * its claim's release. True only when the claim is proven gone.
   */
  async #stop(host: string, signal: AbortSignal): Promise<boolean> {
    const ac = new AbortController()
    const cancel = this.#d.clock.setTimer(this.#stopTimeoutMs, () => ac.abort(new Error('stop timed out')))
    const onAbort = (): void => ac.abort(signal.reason)
    signal.addEventListener('abort', onAbort, { once: true })
    try {
      const stopped = await this.#d.claims.stop(host, ac.signal)
      return stopped && !this.#d.claims.claimed(host)
    } catch (err) {
      this.#d.logger.error({ host, err: message(err) }, `layout: ${host}: stop failed: ${message(err)}`)
      return false
    } finally {
      cancel()
      signal.removeEventListener('abort', onAbort)
    }
  }

  /**
   * Steps 4–9 for fenced, stopped hosts. What is already at a destination
   * is set aside before the journal is written, not after: with a journal
   * on disk, files at both ends read as ambiguous (§4), and a crash between
   * the journal and the aside must not turn a plain move into a case for an
   * operator.
   */
  async #move(flights: Flight[]): Promise<Result[]> {
    const results: Result[] = []
    const ready: Flight[] = []
    const cleared = await mapLimit(flights, HOST_CONCURRENCY, async (f) => {
      try {
        // No source, nothing to move: and what is at the destination may
        // then be the very files an operator is looking for, so it stays.
        if (!(await present(f.j.from.dir))) return this.#missing(f)
        await this.#clear(f)
        return null
      } catch (err) {
        return `destination not cleared: ${message(err)}`
      }
    })
    for (const [i, f] of flights.entries()) {
      const why = cleared[i]
      if (why === null || why === undefined) {
        ready.push(f)
        continue
      }
      this.#release([f])
      results.push(this.#result(f.j.host, 'failed', why, f.j.to, this.#since(f.t0)))
    }
    this.#fp('after-aside')
    if (ready.length === 0) return results
    try {
      await writeJournals(this.#d.dirs, ready.map((f) => f.j))
    } catch (err) {
      // Each journal that did reach the disk names a move whose files have
      // not moved; removing them now (or recovery, if this fails too)
      // leaves every host exactly where it was.
      results.push(...(await this.#abandon(ready, `journal not written: ${message(err)}`)))
      return results
    }
    for (const f of ready) this.#open.set(f.j.host, f.j)
    this.#fp('after-journal')
    results.push(...(await this.#carry(ready, 'preflight', 'moved', undefined)))
    return results
  }

  /**
   * The rest of a journaled move, from step 5, 8 or 9. Any error this does
   * not expect leaves its hosts fenced with their journals on disk, for
   * recovery (or the next run) to finish from where the files are.
   */
  async #carry(flights: Flight[], from: 'preflight' | 'row' | 'finish', outcome: 'moved' | 'recovered', intent: IntentMode | undefined): Promise<Result[]> {
    const results: Result[] = []
    try {
      let go = flights
      if (from === 'preflight') {
        go = await this.#preflight(go, results)
        go = await this.#prepare(go, results)
        go = await this.#rename(go, results)
      }
      if (from !== 'finish') go = await this.#commitRows(go, results)
      results.push(...(await this.#finish(go, outcome, intent)))
    } catch (err) {
      for (const f of flights) {
        if (!this.#open.has(f.j.host)) continue
        this.#open.delete(f.j.host)
        const why = `move interrupted: ${message(err)}; its journal stays for recovery`
        this.#kept.set(f.j.host, why)
        results.push(this.#result(f.j.host, 'failed', why, f.j.to, this.#since(f.t0)))
      }
      this.#d.logger.error({ err: message(err), hosts: flights.map((f) => f.j.host) }, `layout: move interrupted: ${message(err)}`)
    }
    return results
  }

  /** Step 5. A tenant's doing holds the host; anything else fails the move with nothing moved. */
  async #preflight(flights: Flight[], results: Result[]): Promise<Flight[]> {
    const go: Flight[] = []
    const held: Array<{ f: Flight; reason: string }> = []
    const failed: Array<{ f: Flight; reason: string }> = []
    const found = await mapLimit(flights, HOST_CONCURRENCY, async (f) => {
      try {
        const p = await preflight(f.j.from.dir)
        return p.kind === 'missing' ? { kind: 'failed' as const, reason: await this.#missing(f) } : p
      } catch (err) {
        return { kind: 'failed' as const, reason: `preflight: ${message(err)}` }
      }
    })
    for (const [i, f] of flights.entries()) {
      const p = found[i]
      if (p?.kind === 'ok') go.push(f)
      else if (p?.kind === 'held') held.push({ f, reason: p.reason })
      else failed.push({ f, reason: p?.reason ?? 'preflight: no answer' })
    }
    this.#fp('after-preflight')
    if (held.length > 0) results.push(...(await this.#hold(held)))
    for (const { f, reason } of failed) results.push(...(await this.#abandon([f], reason)))
    return go
  }

  /** Holds hosts: marker first, then the journal goes; the host stays fenced and stopped. */
  async #hold(held: ReadonlyArray<{ f: Flight; reason: string }>): Promise<Result[]> {
    const at = new Date(this.#d.clock.now()).toISOString()
    await writeHolds(
      this.#d.dirs,
      held.map(({ f, reason }): HoldMarker => ({ v: 1, host: f.j.host, to: f.j.to, reason, heldAt: at })),
    )
    for (const { f, reason } of held) this.#holds.set(f.j.host, { host: f.j.host, to: f.j.to, reason, corrupt: false })
    this.#fp('after-hold')
    await removeJournals(this.#d.dirs, held.map(({ f }) => f.j.host))
    for (const { f } of held) this.#open.delete(f.j.host)
    return held.map(({ f, reason }) => this.#result(f.j.host, 'held', reason, f.j.to, this.#since(f.t0)))
  }

  /** Step 6: the destination's parents, and anything that appeared at it since it was cleared. */
  async #prepare(flights: Flight[], results: Result[]): Promise<Flight[]> {
    const go: Flight[] = []
    const sync: string[] = []
    const prepared = await mapLimit(flights, HOST_CONCURRENCY, async (f) => {
      try {
        await this.#clear(f)
        return { ok: true as const, sync: await prepareParents(this.#d.dirs, f.j.host, f.j.to, f.j.dest, this.#d.socketsGid) }
      } catch (err) {
        return { ok: false as const, why: `destination not prepared: ${message(err)}` }
      }
    })
    for (const [i, f] of flights.entries()) {
      const p = prepared[i]
      if (p?.ok === true) {
        go.push(f)
        sync.push(...p.sync)
      } else {
        results.push(...(await this.#abandon([f], p?.why ?? 'destination not prepared')))
      }
    }
    await fsyncDirs(sync)
    this.#fp('after-prepare')
    return go
  }

  /** Step 7: rename(2) each directory, then fsync every parent once. */
  async #rename(flights: Flight[], results: Result[]): Promise<Flight[]> {
    const go: Flight[] = []
    for (const f of flights) {
      try {
        await renameDir(f.j.from.dir, f.j.dest.dir)
      } catch (err) {
        // rename(2) is atomic: when it fails, nothing moved.
        results.push(...(await this.#abandon([f], `rename: ${message(err)}`)))
        continue
      }
      go.push(f)
      this.#fp(`after-rename:${f.j.host}`)
    }
    await syncParents(go.map((f) => ({ from: f.j.from.dir, to: f.j.dest.dir })))
    this.#fp('after-rename')
    return go
  }

  /**
   * Step 8, the commit point: every row of the batch in one transaction.
   * Should the batch's transaction fail (a row removed by `routes rm` while
   * its host moved fails all of it), each row is committed on its own, so
   * one row does not undo its neighbours' moves.
   */
  async #commitRows(flights: Flight[], results: Result[]): Promise<Flight[]> {
    if (flights.length === 0) return flights
    const rowOf = (f: Flight) => ({ host: f.j.host, ...f.j.dest })
    let done = flights
    try {
      this.#d.registry.setPaths(flights.map(rowOf))
    } catch (batchErr) {
      this.#d.logger.warn({ err: message(batchErr) }, `layout: rows not updated together (${message(batchErr)}); committing them one by one`)
      done = []
      const failed: Array<{ f: Flight; err: unknown }> = []
      for (const f of flights) {
        try {
          this.#d.registry.setPaths([rowOf(f)])
          done.push(f)
        } catch (err) {
          failed.push({ f, err })
        }
      }
      // Those rows still say from: putting the files back there is as exact
      // as finishing, and needs no registry.
      for (const { f } of failed) await renameDir(f.j.dest.dir, f.j.from.dir)
      await syncParents(failed.map(({ f }) => ({ from: f.j.dest.dir, to: f.j.from.dir })))
      for (const { f, err } of failed) {
        const why = `registry not updated: ${message(err)}`
        this.#d.logger.error({ host: f.j.host, err: message(err) }, `layout: ${f.j.host}: ${why}; files moved back`)
        results.push(...(await this.#abandon([f], `${why}; the files were moved back`)))
      }
    }
    this.#fp('after-row')
    return done
  }

  /**
   * Step 9: journals removed, fences lifted, the edge asked to reload. A
   * revert completed under an unreadable intent is kept down as a hold
   * instead of being released flat (DESIGN §4).
   */
  async #finish(flights: Flight[], outcome: 'moved' | 'recovered', intent: IntentMode | undefined): Promise<Result[]> {
    if (flights.length === 0) return []
    const keep = intent === 'unreadable' ? flights.filter((f) => f.j.to === 'flat') : []
    const lift = flights.filter((f) => !keep.includes(f))
    if (keep.length > 0) {
      const at = new Date(this.#d.clock.now()).toISOString()
      await writeHolds(this.#d.dirs, keep.map((f): HoldMarker => ({ v: 1, host: f.j.host, to: 'nested', reason: HOLD_AFTER_REVERT, heldAt: at })))
      for (const f of keep) this.#holds.set(f.j.host, { host: f.j.host, to: 'nested', reason: HOLD_AFTER_REVERT, corrupt: false })
    }
    // A hold the move has now outgrown goes before the journal: should the
    // journal outlive it, recovery only redoes this step.
    const stale = lift.filter((f) => this.#holds.has(f.j.host)).map((f) => f.j.host)
    await removeHolds(this.#d.dirs, stale)
    for (const h of stale) this.#holds.delete(h)
    await removeJournals(this.#d.dirs, flights.map((f) => f.j.host))
    for (const f of flights) this.#open.delete(f.j.host)
    this.#fp('after-journal-remove')
    this.#d.fence.lift(lift.map((f) => f.j.host))
    for (const f of lift) this.#grace?.end(f.j.host)
    this.#fp('after-lift')
    await this.#reload()
    return [
      ...lift.map((f) => this.#result(f.j.host, outcome, outcome === 'recovered' ? `finished the move to ${f.j.to}` : '', f.j.to, this.#since(f.t0))),
      ...keep.map((f) => this.#result(f.j.host, 'held', HOLD_AFTER_REVERT, f.j.to, this.#since(f.t0))),
    ]
  }

  async #missing(f: Flight): Promise<string> {
    const there = await present(f.j.dest.dir)
    return `files missing: ${f.j.from.dir} does not exist${there ? ` (${f.j.dest.dir} does; an operator decides)` : ''}`
  }

  /** Sets aside what is at a flight's destination, and notes it. */
  async #clear(f: Flight): Promise<void> {
    const aside = await clearDestination(this.#d.dirs, f.j.host, f.j.to, f.j.dest, this.#d.clock.now())
    if (aside === undefined) return
    this.#notes.set(f.j.host, aside.note)
    this.#d.logger.warn({ host: f.j.host, aside: aside.dir, names: aside.names }, `layout: ${f.j.host}: ${aside.note}`)
  }

  /**
   * Gives up on moves whose files have not moved: journals removed, fences
   * lifted (a host that was held stays held). When even the removal fails
   * the journal stays, and the host stays fenced for recovery.
   */
  async #abandon(flights: readonly Flight[], reason: string): Promise<Result[]> {
    try {
      await removeJournals(this.#d.dirs, flights.map((f) => f.j.host))
    } catch (err) {
      const why = `${reason}; its journal could not be removed (${message(err)}) and stays for recovery`
      return flights.map((f) => {
        this.#open.delete(f.j.host)
        this.#kept.set(f.j.host, why)
        return this.#result(f.j.host, 'failed', why, f.j.to, this.#since(f.t0))
      })
    }
    for (const f of flights) this.#open.delete(f.j.host)
    this.#release(flights)
    return flights.map((f) => this.#result(f.j.host, 'failed', reason, f.j.to, this.#since(f.t0)))
  }

  /** Lifts the fences of hosts that were not held before the run. */
  #release(flights: readonly Flight[]): void {
    this.#d.fence.lift(flights.filter((f) => !f.wasHeld).map((f) => f.j.host))
  }

  async #dropHolds(hosts: readonly string[]): Promise<void> {
    await removeHolds(this.#d.dirs, hosts)
    for (const h of hosts) this.#holds.delete(h)
    this.#d.fence.lift(hosts)
  }

  // ---- recovery ---------------------------------------------------------

  /**
   * Runs the §4 table over every journal in `<data>/layout`: at start-up
   * (report: strays are reported too), and at the head of each converge for
   * the journals recovery had to keep, so an operator's fix is picked up
   * without a restart.
   */
  async #recoverJournals(intent: IntentMode, defaultOptedOut: boolean, atStart: boolean): Promise<Result[]> {
    const listing = await listLayout(this.#d.dirs)
    const results: Result[] = []
    if (atStart) {
      for (const name of listing.strays) {
        this.#d.logger.error({ file: name }, `layout: ${name}: not named for a valid host; left alone`)
        results.push({ host: '', outcome: 'failed', reason: `${path.join(layoutDir(this.#d.dirs), name)}: not named for a valid host; left alone` })
      }
    }
    const onDisk = new Set(listing.journals)
    // A kept journal an operator has removed: they decided; the host wakes as its row says.
    for (const host of [...this.#kept.keys()]) {
      if (onDisk.has(host)) continue
      this.#kept.delete(host)
      if (!this.#holds.has(host)) this.#d.fence.lift([host])
      results.push(this.#result(host, 'released', 'its journal was removed by an operator'))
    }
    if (listing.journals.length === 0) return results

    const rows = new Map(this.#d.registry.list().map((r) => [r.host, r]))
    const wants = wantedMode(intent, defaultOptedOut)
    const t0 = performance.now()
    const buckets: Record<Exclude<RecoveryAction['kind'], 'keep'>, Flight[]> = { 'redo-move': [], rollback: [], 'redo-row': [], 'redo-finish': [] }
    for (const host of listing.journals) {
      let read
      try {
        read = await readJournal(this.#d.dirs, host)
      } catch (err) {
        this.#d.logger.warn({ host, err: message(err) }, `layout: ${host}: journal vanished while being read: ${message(err)}`)
        continue
      }
      if (!read.ok) {
        const why = `journal ${journalPath(this.#d.dirs, host)} ${read.reason}; the host stays fenced and nothing is changed`
        this.#d.fence.fence([host], this.#d.fence.fenced(host) ?? this.#d.registry.nextGeneration())
        if (this.#kept.get(host) !== why) {
          this.#d.logger.error({ host }, `layout: ${host}: ${why}`)
          this.#d.onRecover?.('keep')
        }
        this.#kept.set(host, why)
        results.push(this.#result(host, 'held', why))
        continue
      }
      const j = read.journal
      this.#d.fence.fence([host], j.generation)
      let facts: RecoveryFacts
      try {
        facts = { fromExists: await present(j.from.dir), destExists: await present(j.dest.dir), row: rowAt(rows.get(host), j) }
      } catch (err) {
        const why = `cannot tell where its files are (${message(err)}); the host stays fenced`
        this.#d.logger.error({ host }, `layout: ${host}: ${why}`)
        this.#kept.set(host, why)
        results.push(this.#result(host, 'held', why, j.to))
        continue
      }
      const action = recoveryAction(j, facts, wants)
      if (action.kind === 'keep') {
        if (this.#kept.get(host) !== action.reason) {
          this.#d.logger.warn({ host, to: j.to, ...facts }, `layout: ${host}: journal to ${j.to} kept -> ${action.reason}`)
          this.#d.onRecover?.('keep')
        }
        this.#kept.set(host, action.reason)
        results.push(this.#result(host, 'held', action.reason, j.to))
        continue
      }
      this.#d.logger.info({ host, to: j.to, action: action.kind, ...facts }, `layout: ${host}: journal to ${j.to} -> ${action.kind}`)
      this.#d.onRecover?.(action.kind)
      this.#kept.delete(host)
      this.#open.set(host, j)
      buckets[action.kind].push({ j, wasHeld: this.#holds.has(host), t0 })
    }

    if (buckets.rollback.length > 0) {
      const rb = buckets.rollback
      await removeJournals(this.#d.dirs, rb.map((f) => f.j.host))
      for (const f of rb) this.#open.delete(f.j.host)
      this.#release(rb)
      await this.#reload()
      for (const f of rb) {
        results.push(this.#result(f.j.host, 'recovered', `rolled back to ${otherMode(f.j.to)}: the intent (${intent}) wants it there`, f.j.to, this.#since(f.t0)))
      }
    }
    results.push(...(await this.#carry(buckets['redo-finish'], 'finish', 'recovered', intent)))
    results.push(...(await this.#carry(buckets['redo-row'], 'row', 'recovered', intent)))
    // Files move again only for hosts proven asleep: a claim the activator
    // kept through our restart is stopped first, like any awake host.
    const asleep: Flight[] = []
    for (const f of buckets['redo-move']) {
      if (!this.#d.claims.claimed(f.j.host) || (await this.#stop(f.j.host, new AbortController().signal))) {
        asleep.push(f)
        continue
      }
      const why = 'awake: its claim was not released, so its files were not moved; the journal stays'
      this.#open.delete(f.j.host)
      this.#kept.set(f.j.host, why)
      results.push(this.#result(f.j.host, 'held', why, f.j.to))
    }
    results.push(...(await this.#carry(asleep, 'preflight', 'recovered', intent)))
    return results
  }

  // ---- plumbing ---------------------------------------------------------

  /** Loads what the pass keeps in memory: holds, notes, the grace book. Once. */
  #load(): Promise<void> {
    this.#loaded ??= this.#loadOnce()
    return this.#loaded
  }

  async #loadOnce(): Promise<void> {
    const { dirs, logger } = this.#d
    const listing = await listLayout(dirs)
    if (listing.temps.length > 0) {
      // A temporary file is a write that never reached its rename: the
      // journal or hold it would have been never existed.
      logger.info({ files: listing.temps }, `layout: removing ${listing.temps.length} unfinished temporary file(s) in ${layoutDir(dirs)}`)
      await unlinkMany(layoutDir(dirs), listing.temps)
    }
    for (const host of listing.holds) {
      const h = await readHold(dirs, host)
      if (h !== undefined) this.#holds.set(host, h)
    }
    for (const [host, note] of await loadAsideNotes(dirs)) this.#notes.set(host, note)
    this.#grace = await GraceBook.load(dirs, logger)
  }

  #result(host: string, outcome: Outcome, reason: string, to?: Mode, seconds = 0): Result {
    if (to !== undefined && outcome !== 'unchanged') this.#d.onMove?.(to, outcome, seconds)
    const r: Result = to === undefined ? { host, outcome, reason } : { host, outcome, reason, to }
    this.#d.onResult?.(r)
    return r
  }

  #since(t0: number): number {
    return (performance.now() - t0) / 1000
  }

  #fp(step: string): void {
    this.#d.failpoint?.(step)
  }

  async #reload(): Promise<void> {
    if (this.#d.reload === undefined) return
    try {
      await this.#d.reload()
    } catch (err) {
      this.#d.logger.warn({ err: message(err) }, `layout: edge reload failed: ${message(err)}; the edge's own poll picks the rows up`)
    }
  }
}

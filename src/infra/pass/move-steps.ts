// The steps of a move for fenced, stopped hosts (design §3 steps 4–9), a
// batch at a time. Every host is always at a numbered step, so a crash
// recovers each as a lone move.
import type { IntentMode, Result } from '../../domain/modes.js'
import { why, type Why } from '../../domain/reason-codes.js'
import { errorMessage } from '../../errors.js'
import type { FsyncName } from '../failpoint.js'
import { present } from '../fsutil.js'
import { clearFound, syncPairs, type InTheWay } from './mover.js'
import type { PassContext } from './pass-context.js'
import type { Looked, Walked } from './pass-io.js'
import type { DirIdentity, Preflight } from './preflight.js'
import { lstatSyncOrUndefined, renameDirSync } from './sliced-fs.js'
import type { MoveEndings, MoveInFlight } from './move-endings.js'
import type { PassState } from './pass-state.js'

/** The step a journaled move is continued from (design §3's numbers). */
export enum FromStep {
  Preflight = 5,
  CommitRow = 8,
  Finish = 9,
}

export class MoveSteps {
  readonly #ctx: PassContext
  readonly #state: PassState
  readonly #endings: MoveEndings

  constructor(ctx: PassContext, state: PassState, endings: MoveEndings) {
    this.#ctx = ctx
    this.#state = state
    this.#endings = endings
  }

  /** Steps 4–9; what is in the way is set aside first, as under a journal files at both ends are ambiguous (§4). */
  async move(moves: MoveInFlight[], onWalked?: () => void): Promise<Result[]> {
    const ctx = this.#ctx
    const results: Result[] = []
    const ready: MoveInFlight[] = []
    // The generation is on disk before a journal names it (design §3.5), or a later batch could reuse the name.
    const generationSynced = ctx.deps.registry.sync().then(
      () => undefined,
      (err: unknown) => err,
    )
    // Looked at first, acted on once every look is in (design §3.6); the walks start now (§3.3).
    const looking = this.#look(moves, true)
    const walkingAll = this.#walk(moves)
    const looks = await looking
    const cleared = await ctx.slicer.map(moves, async (move, i) => {
      try {
        const look = looks[i]
        if (look instanceof Error || look === undefined) throw look ?? new Error('no look answered')
        // No source: what is at the destination may be the files an operator looks for, so it stays.
        if (look.kind === 'missing') return this.#missing(move)
        await this.#setAsideWhatIsInTheWay(move, look)
        return null
      } catch (err) {
        return why('dest_not_cleared', `destination not cleared: ${errorMessage(err)}`)
      }
    })
    const readyAt: number[] = []
    for (const [i, move] of moves.entries()) {
      const because = cleared[i]
      if (because === null || because === undefined) {
        ready.push(move)
        readyAt.push(i)
        continue
      }
      this.#endings.liftUnheld([move])
      results.push(
        ctx.resultWithMetrics(move.journal.host, 'failed', because, move.journal.to, ctx.secondsSince(move.fencedAt)),
      )
    }
    ctx.failpoint('after-aside')
    // No walk of the batch outlives it.
    if (ready.length === 0) return walkingAll.then(() => results)
    const walking = walkingAll.then((walked) => readyAt.map((i) => walked[i] ?? new Error('no answer')))
    try {
      const notSynced = await generationSynced
      if (notSynced !== undefined) throw new Error(`generation not on disk: ${errorMessage(notSynced)}`)
      await this.#state.openJournals(ready.map((move) => move.journal))
    } catch (err) {
      // Journals that reached the disk name moves not begun: removing them leaves every host where it was.
      await walking
      results.push(
        ...(await this.#endings.abandon(
          ready,
          why('journal_not_written', `journal not written: ${errorMessage(err)}`),
        )),
      )
      return this.#settled(results)
    }
    ctx.failpoint('after-journal')
    results.push(...(await this.continueFrom(FromStep.Preflight, ready, 'moved', undefined, { walking, onWalked })))
    return results
  }

  /** From step 5, 8 or 9; an unexpected error keeps the journals for recovery. */
  async continueFrom(
    step: FromStep,
    moves: MoveInFlight[],
    outcome: 'moved' | 'recovered',
    intent: IntentMode | undefined,
    walk: { walking?: Promise<Walked>; onWalked?: () => void } = {},
  ): Promise<Result[]> {
    const ctx = this.#ctx
    const results: Result[] = []
    try {
      let going = moves
      if (step === FromStep.Preflight) {
        const seen = new Map<string, DirIdentity>()
        going = await this.#preflight(going, seen, results, walk.walking ?? this.#walk(going))
        walk.onWalked?.()
        going = await this.#prepare(going, results)
        going = await this.#rename(going, seen, results)
      }
      if (step !== FromStep.Finish) going = await this.#endings.commitRows(going, results)
      results.push(...(await this.#endings.finish(going, outcome, intent)))
    } catch (err) {
      const reported = new Set(results.map((r) => r.host))
      for (const move of moves) {
        const host = move.journal.host
        if (!this.#state.inFlight(host)) {
          // Its journal is gone, so the move finished (step 9): lift and report it, never leave it fenced.
          if (reported.has(host) || this.#state.keptReason(host) !== undefined) continue
          if (this.#state.hold(host) === undefined) this.#state.lift([host])
          const finished = why(
            'finish_interrupted',
            `move finished, then interrupted: ${errorMessage(err)}; the next run checks it`,
          )
          results.push(
            ctx.resultWithMetrics(host, 'failed', finished, move.journal.to, ctx.secondsSince(move.fencedAt)),
          )
          continue
        }
        const kept = why('move_interrupted', `move interrupted: ${errorMessage(err)}; its journal stays for recovery`)
        this.#state.keepJournal(host, kept)
        results.push(ctx.resultWithMetrics(host, 'failed', kept, move.journal.to, ctx.secondsSince(move.fencedAt)))
      }
      ctx.deps.logger.error(
        { err, code: 'move_interrupted', hosts: moves.map((move) => move.journal.host) },
        `layout: move interrupted: ${errorMessage(err)}`,
      )
    }
    return this.#settled(results)
  }

  /** A host whose journal file could not go is answered failed, kept for recovery. */
  async #settled(results: Result[]): Promise<Result[]> {
    await this.#endings.settle()
    const unsettled = this.#endings.takeUnsettled(results.map((r) => r.host))
    if (unsettled.size === 0) return results
    return results.map((r) => {
      const reason = unsettled.get(r.host)
      return reason === undefined ? r : this.#ctx.resultWithMetrics(r.host, 'failed', why('journal_kept', reason), r.to)
    })
  }

  /** Step 5: a tenant's doing holds the host, anything else fails it. */
  async #preflight(
    moves: MoveInFlight[],
    seen: Map<string, DirIdentity>,
    results: Result[],
    walking: Promise<Walked>,
  ): Promise<MoveInFlight[]> {
    const going: MoveInFlight[] = []
    const held: Array<{ move: MoveInFlight; because: Why }> = []
    const failed: Array<{ move: MoveInFlight; because: Why }> = []
    const walked = await walking
    const found = await this.#ctx.slicer.map(
      moves,
      async (move, i): Promise<Exclude<Preflight, { kind: 'missing' }> | { kind: 'failed'; because: Why }> => {
        const checked = walked[i] ?? new Error('no answer')
        if (checked instanceof Error)
          return { kind: 'failed', because: why('preflight_error', `preflight: ${checked.message}`) }
        return checked.kind === 'missing' ? { kind: 'failed', because: await this.#missing(move) } : checked
      },
    )
    for (const [i, move] of moves.entries()) {
      const checked = found[i]
      if (checked?.kind === 'ok') {
        going.push(move)
        seen.set(move.journal.host, checked.seen)
      } else if (checked?.kind === 'held') held.push({ move, because: why(checked.code, checked.reason) })
      else failed.push({ move, because: checked?.because ?? why('preflight_error', 'preflight: no answer') })
    }
    this.#ctx.failpoint('after-preflight')
    if (held.length > 0) results.push(...(await this.#endings.hold(held)))
    for (const { move, because } of failed) results.push(...(await this.#endings.abandon([move], because)))
    return going
  }

  #walk(moves: readonly MoveInFlight[]): Promise<Walked> {
    return this.#ctx.io.walk(moves.map((move) => move.journal.from.dir))
  }

  /** Step 6: the parents, and what appeared at the destination since it was cleared. */
  async #prepare(moves: MoveInFlight[], results: Result[]): Promise<MoveInFlight[]> {
    const { dirs, socketsGid } = this.#ctx.deps
    const going: MoveInFlight[] = []
    const sync: Array<readonly [string, FsyncName]> = []
    // One host at a time: a set-aside makes shared directories (aside/) whose fsyncs the next relies on.
    const looks = await this.#look(moves, false)
    const cleared = await this.#ctx.slicer.map(moves, async (move, i): Promise<Why | undefined> => {
      try {
        const look = looks[i]
        if (look instanceof Error || look === undefined) throw look ?? new Error('no look answered')
        if (look.kind === 'found') await this.#setAsideWhatIsInTheWay(move, look)
        return undefined
      } catch (err) {
        return why('dest_not_prepared', `destination not prepared: ${errorMessage(err)}`)
      }
    })
    const asked = moves.filter((_, i) => cleared[i] === undefined)
    const prepared = await this.#ctx.io.prepare(
      dirs,
      asked.map(({ journal: { host, to, from, dest } }) => ({ host, to, from: from.dir, dest })),
      await socketsGid(),
    )
    let next = 0
    for (const [i, move] of moves.entries()) {
      const refused = cleared[i]
      const done = refused === undefined ? prepared[next++] : undefined
      if (done?.ok === true) {
        going.push(move)
        sync.push(...done.sync)
        continue
      }
      const because =
        refused ??
        why('dest_not_prepared', `destination not prepared${done === undefined ? '' : `: ${done.err.message}`}`)
      results.push(...(await this.#endings.abandon([move], because)))
    }
    // One round: the parents that gained an entry, and run/ for its mode (design §3.5).
    await this.#ctx.io.fsync(sync)
    this.#ctx.failpoint('after-prepare')
    return going
  }

  /** Step 7: renames checked against preflight, parents fsynced once; a swapped source is renamed back, held. */
  async #rename(
    moves: MoveInFlight[],
    seen: ReadonlyMap<string, DirIdentity>,
    results: Result[],
  ): Promise<MoveInFlight[]> {
    const going: MoveInFlight[] = []
    const swapped: Array<{ move: MoveInFlight; because: Why }> = []
    let rest = moves
    while (rest.length > 0) {
      const run = await this.#ctx.io.rename(
        rest.map(({ journal: { host, from, dest } }) => ({
          host,
          from: from.dir,
          dest: dest.dir,
          seen: seen.get(host),
        })),
      )
      going.push(...rest.slice(0, run.done))
      const stop = run.stop
      if (stop === undefined) break
      // A failpoint's fault after a clean rename is thrown as the step's own.
      if (stop.kind === 'fault') throw stop.err
      const move = rest[run.done] as MoveInFlight
      rest = rest.slice(run.done + 1)
      if (stop.kind === 'failed') {
        results.push(...(await this.#renameFailed(move, stop.err)))
        continue
      }
      const undone = this.#undoSwap(move, stop.found)
      if ('stuck' in undone) results.push(undone.stuck)
      else swapped.push({ move, because: undone.because })
    }
    await this.#ctx.io.fsync(
      syncPairs(
        [...going, ...swapped.map(({ move }) => move)].map((move) => ({
          from: move.journal.from.dir,
          to: move.journal.dest.dir,
        })),
      ),
    )
    if (swapped.length > 0) {
      this.#ctx.deps.logger.error(
        { hosts: swapped.map(({ move }) => move.journal.host), code: 'source_swapped' },
        `layout: ${swapped.map(({ because }) => because.reason).join('; ')}`,
      )
      results.push(...(await this.#endings.hold(swapped)))
    }
    this.#ctx.failpoint('after-rename')
    return going
  }

  /** A failed rename moved nothing (rename(2) is atomic); a source gone since its walk is missing. */
  async #renameFailed(move: MoveInFlight, err: NodeJS.ErrnoException): Promise<Result[]> {
    const gone = err.code === 'ENOENT' && lstatSyncOrUndefined(move.journal.from.dir) === undefined
    return this.#endings.abandon(
      [move],
      gone ? await this.#missing(move) : why('rename_failed', `rename: ${errorMessage(err)}`),
    )
  }

  /** The rename moved what preflight did not see: moved back, or the journal kept for an operator. */
  #undoSwap(move: MoveInFlight, found: string): { because: Why } | { stuck: Result } {
    const { host, from, dest } = move.journal
    const swap = `${from.dir} was swapped after preflight: what the rename moved is ${found}`
    try {
      renameDirSync(dest.dir, from.dir)
    } catch (err) {
      // Something new at from: both ends hold files, so the journal stays for an operator.
      const stuck = why(
        'swap_not_undone',
        `${swap}; it could not be moved back (${errorMessage(err)}), so its journal stays and an operator decides`,
      )
      this.#state.keepJournal(host, stuck)
      return {
        stuck: this.#ctx.resultWithMetrics(
          host,
          'failed',
          stuck,
          move.journal.to,
          this.#ctx.secondsSince(move.fencedAt),
        ),
      }
    }
    return { because: why('source_swapped', `${swap}; it was moved back, and the row kept`) }
  }

  async #missing(move: MoveInFlight): Promise<Why> {
    const { from, dest } = move.journal
    const there = await present(dest.dir)
    return why(
      'files_missing',
      `files missing: ${from.dir} does not exist${there ? ` (${dest.dir} does; an operator decides)` : ''}`,
    )
  }

  /** Steps 4 and 6's lstats for a batch, all made before any is acted on. */
  #look(moves: readonly MoveInFlight[], source: boolean): Promise<Looked> {
    const { io, deps } = this.#ctx
    const looks = moves.map(({ journal: { host, to, from, dest } }) => ({
      host,
      to,
      dest,
      ...(source ? { from: from.dir } : {}),
    }))
    return io.look(deps.dirs, looks)
  }

  async #setAsideWhatIsInTheWay(move: MoveInFlight, found: InTheWay): Promise<void> {
    const { dirs, clock, logger } = this.#ctx.deps
    const { host } = move.journal
    const aside = await clearFound(dirs, host, found, clock.now())
    if (aside === undefined) return
    this.#state.setNote(host, aside.note)
    logger.warn({ host, aside: aside.dir, names: aside.names }, `layout: ${host}: ${aside.note}`)
  }
}

// How a journaled move ends (design §3 steps 5, 8, 9): committed and
// finished, held by a marker (a tenant's doing), or abandoned with nothing
// moved.
import type { IntentMode, Result } from '../../domain/modes.js'
import { why, type Why } from '../../domain/reason-codes.js'
import type { GraceBook } from './grace.js'
import type { HoldMarker } from './holds.js'
import type { Journal } from './journal.js'
import { removeEmptyNestedRoots, renameDir, syncParents } from './mover.js'
import { setTimeout as sleep } from 'node:timers/promises'
import { errorMessage } from '../../errors.js'
import { isBusy } from '../registry.js'
import type { PassContext } from './pass-context.js'
import { HOLD_AFTER_REVERT, type PassState } from './pass-state.js'

export interface MoveInFlight {
  journal: Journal
  /** Held before this run: a failure leaves it held. */
  wasHeld: boolean
  /** performance.now() when it was fenced. */
  fencedAt: number
}

export class MoveEndings {
  readonly #ctx: PassContext
  readonly #state: PassState
  readonly #grace: GraceBook
  readonly #unsettled = new Map<string, string>()
  /** One settle at a time, so each file is planned and removed by one. */
  #settling: Promise<unknown> = Promise.resolve()

  constructor(ctx: PassContext, state: PassState, grace: GraceBook) {
    this.#ctx = ctx
    this.#state = state
    this.#grace = grace
  }

  /** Step 8, the commit point: the rows in one transaction, else one by one, so one bad row undoes no neighbour. */
  async commitRows(moves: MoveInFlight[], results: Result[]): Promise<MoveInFlight[]> {
    if (moves.length === 0) return moves
    const { registry, logger } = this.#ctx.deps
    const rowOf = (move: MoveInFlight) => ({ host: move.journal.host, ...move.journal.dest })
    let done = moves
    try {
      await whileLocked(() => registry.setPaths(moves.map(rowOf)))
      this.#ctx.afterCommit()
    } catch (batchErr) {
      done = []
      const failed: Array<{ move: MoveInFlight; err: unknown }> = []
      if (isBusy(batchErr)) {
        // Locked by another process past the wait: no row would commit on its own either.
        for (const move of moves) failed.push({ move, err: batchErr })
      } else {
        logger.warn(
          { err: batchErr },
          `layout: rows not updated together (${errorMessage(batchErr)}); committing them one by one`,
        )
        for (const move of moves) {
          try {
            registry.setPaths([rowOf(move)])
            done.push(move)
          } catch (err) {
            failed.push({ move, err })
          }
        }
      }
      // Those rows still say from: moving the files back is as exact as finishing, and needs no registry.
      for (const { move } of failed) await renameDir(move.journal.dest.dir, move.journal.from.dir)
      await syncParents(failed.map(({ move }) => ({ from: move.journal.dest.dir, to: move.journal.from.dir })))
      for (const { move, err } of failed) {
        const reason = `registry not updated: ${errorMessage(err)}`
        logger.error(
          { host: move.journal.host, code: 'registry_not_updated', err },
          `layout: ${move.journal.host}: ${reason}; files moved back`,
        )
        results.push(
          ...(await this.abandon([move], why('registry_not_updated', `${reason}; the files were moved back`))),
        )
      }
    }
    // On disk before step 9 removes a journal (design §3.5); the WAL's fsync waits off the loop's thread (§3.6).
    if (done.length > 0) await registry.sync()
    this.#ctx.failpoint('after-row')
    return done
  }

  /** Step 9: journals removed, fences lifted, edge reloaded; a revert under an unreadable intent is held (§4). */
  async finish(
    moves: MoveInFlight[],
    outcome: 'moved' | 'recovered',
    intent: IntentMode | undefined,
  ): Promise<Result[]> {
    if (moves.length === 0) return []
    const ctx = this.#ctx
    const keep = intent === 'unreadable' ? moves.filter((move) => move.journal.to === 'flat') : []
    const lift = moves.filter((move) => !keep.includes(move))
    if (keep.length > 0) {
      const heldAt = ctx.nowIso()
      await this.#state.writeHolds(
        keep.map((move): HoldMarker => ({
          v: 1,
          host: move.journal.host,
          to: 'nested',
          code: 'revert_unreadable',
          reason: HOLD_AFTER_REVERT,
          heldAt,
        })),
      )
    }
    // An outgrown hold goes before the journal, so recovery only redoes this step.
    await this.#state.dropHolds(
      lift.filter((move) => this.#state.hold(move.journal.host) !== undefined).map((move) => move.journal.host),
    )
    // A revert's empty nested root goes while the journal stands, so a crash redoes it; a failure is only logged.
    const reverted = moves.filter((move) => move.journal.to === 'flat').map((move) => move.journal.host)
    await removeEmptyNestedRoots(ctx.deps.dirs, reverted).catch((err: unknown) => {
      ctx.deps.logger.warn(
        { hosts: reverted, err },
        `layout: empty nested directories not removed: ${errorMessage(err)}`,
      )
    })
    await this.#state.closeJournals(moves.map((move) => move.journal.host))
    const unsettled = await this.settle()
    ctx.failpoint('after-journal-remove')
    this.#state.lift(lift.map((move) => move.journal.host).filter((host) => !unsettled.has(host)))
    for (const move of lift) this.#grace.end(move.journal.host)
    ctx.failpoint('after-lift')
    await ctx.reloadEdge()
    return [
      ...lift.map((move) =>
        ctx.resultWithMetrics(
          move.journal.host,
          outcome,
          outcome === 'recovered' ? why('move_finished', `finished the move to ${move.journal.to}`) : undefined,
          move.journal.to,
          ctx.secondsSince(move.fencedAt),
        ),
      ),
      ...keep.map((move) =>
        ctx.resultWithMetrics(
          move.journal.host,
          'held',
          why('revert_unreadable', HOLD_AFTER_REVERT),
          move.journal.to,
          ctx.secondsSince(move.fencedAt),
        ),
      ),
    ]
  }

  /** PassState.settle, one at a time. */
  settle(): Promise<ReadonlyMap<string, string>> {
    const turn = this.#settling.then(() => this.#settleNow())
    this.#settling = turn.catch(() => undefined)
    return turn
  }

  async #settleNow(): Promise<ReadonlyMap<string, string>> {
    const unsettled = await this.#state.settle()
    for (const { host, why } of unsettled) {
      const reason = `move ended, but ${why}; the host stays fenced for recovery`
      this.#ctx.deps.logger.error({ host, code: 'journal_kept' }, `layout: ${host}: ${reason}`)
      this.#unsettled.set(host, reason)
    }
    return this.#unsettled
  }

  /** Forgotten once taken. */
  takeUnsettled(hosts: Iterable<string>): Map<string, string> {
    const out = new Map<string, string>()
    for (const host of hosts) {
      const why = this.#unsettled.get(host)
      if (why === undefined) continue
      out.set(host, why)
      this.#unsettled.delete(host)
    }
    return out
  }

  /** Holds hosts: marker first, then the journal goes; they stay fenced and stopped. */
  async hold(held: ReadonlyArray<{ move: MoveInFlight; because: Why }>): Promise<Result[]> {
    const ctx = this.#ctx
    const heldAt = ctx.nowIso()
    await this.#state.writeHolds(
      held.map(({ move, because }): HoldMarker => ({
        v: 1,
        host: move.journal.host,
        to: move.journal.to,
        code: because.code,
        reason: because.reason,
        heldAt,
      })),
    )
    ctx.failpoint('after-hold')
    await this.#state.closeJournals(held.map(({ move }) => move.journal.host))
    return held.map(({ move, because }) =>
      ctx.resultWithMetrics(move.journal.host, 'held', because, move.journal.to, ctx.secondsSince(move.fencedAt)),
    )
  }

  /**
   * Gives up on moves whose files have not moved: journals removed, fences lifted unless held; a failed
   * removal keeps the journal, fenced for recovery.
   */
  async abandon(moves: readonly MoveInFlight[], because: Why): Promise<Result[]> {
    const ctx = this.#ctx
    try {
      await this.#state.closeJournals(moves.map((move) => move.journal.host))
    } catch (err) {
      const kept = why(
        'journal_kept',
        `${because.reason}; its journal could not be removed (${errorMessage(err)}) and stays for recovery`,
      )
      return moves.map((move) => {
        this.#state.keepJournal(move.journal.host, kept)
        return ctx.resultWithMetrics(
          move.journal.host,
          'failed',
          kept,
          move.journal.to,
          ctx.secondsSince(move.fencedAt),
        )
      })
    }
    this.liftUnheld(moves)
    await this.#removeEmptyRoots(moves)
    return moves.map((move) =>
      ctx.resultWithMetrics(move.journal.host, 'failed', because, move.journal.to, ctx.secondsSince(move.fencedAt)),
    )
  }

  /** A failed move toward nested leaves no empty nested root behind (best effort). */
  async #removeEmptyRoots(moves: readonly MoveInFlight[]): Promise<void> {
    const hosts = moves.filter((move) => move.journal.to === 'nested').map((move) => move.journal.host)
    if (hosts.length === 0) return
    await removeEmptyNestedRoots(this.#ctx.deps.dirs, hosts).catch((err: unknown) => {
      this.#ctx.deps.logger.warn({ err, hosts }, 'layout: the empty nested directories of failed moves stay')
    })
  }

  liftUnheld(moves: readonly MoveInFlight[]): void {
    this.#state.lift(moves.filter((move) => !move.wasHeld).map((move) => move.journal.host))
  }
}

const COMMIT_LOCK_WAIT_MS = 5000
const COMMIT_RETRY_MS = 50

/** Retries a write on SQLITE_BUSY with timers, so the loop serves the activator between tries (design §2.2). */
async function whileLocked(write: () => void): Promise<void> {
  const until = performance.now() + COMMIT_LOCK_WAIT_MS
  for (;;) {
    try {
      write()
      return
    } catch (err) {
      if (!isBusy(err) || performance.now() >= until) throw err
    }
    await sleep(COMMIT_RETRY_MS)
  }
}

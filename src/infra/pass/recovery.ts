// Recovery (design §4), apart from the write path: every journal in
// `<data>/layout` finished from where its files are, at start and before
// each converge; a crash's temporary files removed; holds restored at start.
import path from 'node:path'
import { performance } from 'node:perf_hooks'
import type { IntentMode, Mode, Result } from '../../domain/modes.js'
import {
  holdStands,
  otherMode,
  recoveryAction,
  rowAt,
  wantedMode,
  type RecoveryAction,
  type RecoveryFacts,
} from '../../domain/pass-plan.js'
import { isFlat, isNested } from '../../domain/paths.js'
import { why } from '../../domain/reason-codes.js'
import type { Route } from '../../domain/schemas.js'
import { errorMessage } from '../../errors.js'
import { unlinkMany } from '../fsutil.js'
import { readBatchSync, readJournalSync, type BatchRead } from './batch-journal.js'
import { hostJournalName, layoutDir, listLayout, type Journal, type LayoutListing } from './journal.js'
import { lstatSyncOrUndefined } from './sliced-fs.js'
import type { AwakeStop } from './awake-stop.js'
import type { MoveEndings, MoveInFlight } from './move-endings.js'
import { FromStep, type MoveSteps } from './move-steps.js'
import type { PassContext } from './pass-context.js'
import { sameMove } from './journal-files.js'
import type { PassState } from './pass-state.js'

type Redo = Exclude<RecoveryAction['kind'], 'keep'>

/** A temporary file is a write that never reached its rename: nothing it wrote ever existed, so it goes first. */
export async function removeUnfinishedTemps(ctx: PassContext, listing: LayoutListing): Promise<void> {
  const { dirs, logger } = ctx.deps
  if (listing.temps.length === 0) return
  logger.info(
    { files: listing.temps },
    `layout: removing ${listing.temps.length} unfinished temporary file(s) in ${layoutDir(dirs)}`,
  )
  await unlinkMany(layoutDir(dirs), listing.temps)
}

export class Recovery {
  readonly #ctx: PassContext
  readonly #state: PassState
  readonly #steps: MoveSteps
  readonly #endings: MoveEndings
  readonly #awake: AwakeStop

  constructor(ctx: PassContext, state: PassState, parts: { steps: MoveSteps; endings: MoveEndings; awake: AwakeStop }) {
    this.#ctx = ctx
    this.#state = state
    this.#steps = parts.steps
    this.#endings = parts.endings
    this.#awake = parts.awake
  }

  /** The §4 table over every journal: at start, and before each converge so an operator's fix needs no restart. */
  async recoverJournals(intent: IntentMode, defaultOptedOut: boolean, atStart: boolean): Promise<Result[]> {
    const ctx = this.#ctx
    const { dirs, logger, registry } = ctx.deps
    const listing = await listLayout(dirs)
    const results: Result[] = []
    if (atStart) {
      for (const name of listing.strays) {
        logger.error({ file: name, code: 'stray_file' }, `layout: ${name}: not named for a valid host; left alone`)
        results.push({
          host: '',
          outcome: 'failed',
          code: 'stray_file',
          reason: `${path.join(layoutDir(dirs), name)}: not named for a valid host; left alone`,
        })
      }
    }
    const named = await this.#readAll(listing, atStart, results)
    // An operator removed a kept journal: the host wakes as its row says.
    for (const host of this.#state.keptHosts()) {
      if (this.#state.named(host)) continue
      this.#state.releaseKept(host)
      results.push(
        ctx.resultWithMetrics(host, 'released', why('journal_removed', 'its journal was removed by an operator')),
      )
    }
    if (named.size === 0) return results

    const rows = registry.snapshot().byHost
    const wants = wantedMode(intent, defaultOptedOut)
    const fencedAt = performance.now()
    const redo: Record<Redo, MoveInFlight[]> = { 'redo-move': [], rollback: [], 'redo-row': [], 'redo-finish': [] }
    for (const [host, journals] of named) {
      await ctx.slicer.pause()
      const judged = this.#judge(host, journals, rows.get(host), wants, results)
      if (judged === undefined) continue
      this.#state.resumeJournal(judged.move.journal)
      redo[judged.action].push({ ...judged.move, fencedAt })
    }

    if (redo.rollback.length > 0) results.push(...(await this.#rollBack(redo.rollback, intent)))
    results.push(...(await this.#steps.continueFrom(FromStep.Finish, redo['redo-finish'], 'recovered', intent)))
    results.push(...(await this.#steps.continueFrom(FromStep.CommitRow, redo['redo-row'], 'recovered', intent)))
    // Files move again only for hosts proven asleep: a claim kept through our restart is stopped first.
    const asleep: MoveInFlight[] = []
    for (const move of redo['redo-move']) {
      if (
        !ctx.deps.claims.claimed(move.journal.host) ||
        (await this.#awake.stop(move.journal.host, new AbortController().signal))
      ) {
        asleep.push(move)
        continue
      }
      const awake = why(
        'awake_unreleased',
        'awake: its claim was not released, so its files were not moved; the journal stays',
      )
      this.#state.keepJournal(move.journal.host, awake)
      results.push(ctx.resultWithMetrics(move.journal.host, 'held', awake, move.journal.to))
    }
    results.push(...(await this.#steps.continueFrom(FromStep.Preflight, asleep, 'recovered', intent)))
    return results
  }

  /** Reads every journal file into the pass state; answers, by host, each file's move or why it cannot be acted on. */
  async #readAll(
    listing: LayoutListing,
    atStart: boolean,
    results: Result[],
  ): Promise<Map<string, Array<Journal | string>>> {
    const { dirs, logger } = this.#ctx.deps
    const named = new Map<string, Array<Journal | string>>()
    const add = (host: string, what: Journal | string): void => {
      const list = named.get(host)
      if (list === undefined) named.set(host, [what])
      else list.push(what)
    }
    const names = new Set<string>()
    const files = [
      ...listing.journals.map((host) => ({ name: hostJournalName(host), host })),
      ...listing.batches.map((name) => ({ name, host: undefined })),
    ]
    await this.#ctx.slicer.map(files, ({ name, host }) => {
      const file = path.join(layoutDir(dirs), name)
      let read: BatchRead
      try {
        read = host === undefined ? readBatchSync(dirs, name) : readJournalSync(dirs, host)
      } catch (err) {
        logger.warn({ file: name, err }, `layout: ${name}: journal vanished while being read: ${errorMessage(err)}`)
        return
      }
      names.add(name)
      if (read.ok) {
        this.#state.knowFile(
          name,
          read.journals.map((j) => j.host),
          read.journals,
        )
        for (const j of read.journals) add(j.host, j)
        return
      }
      this.#state.knowFile(name, read.hosts, undefined)
      // A batch file's reason names it from the data root, with the command that shows its moves (runbook).
      const bad =
        host === undefined
          ? `batch journal layout/${name} (${file}) ${read.reason}; its ${read.hosts.length} hosts stay fenced ` +
            `and nothing is changed: \`layoutd journal show ${name}\``
          : `journal ${file} ${read.reason}; the host stays fenced and nothing is changed`
      for (const h of read.hosts) add(h, bad)
      if (read.hosts.length === 0 && atStart) {
        logger.error(
          { file: name, code: 'journal_invalid' },
          `layout: ${file} ${read.reason}; it names no host that can be fenced, so it is left alone for an operator`,
        )
        results.push({
          host: '',
          outcome: 'failed',
          code: 'journal_invalid',
          reason: `${file} ${read.reason}; left alone for an operator`,
        })
      }
    })
    this.#state.forgetFilesBut(names)
    return named
  }

  /** Fences host and asks the §4 table; unreadable or differing journals keep it (undefined), else the redo. */
  #judge(
    host: string,
    said: ReadonlyArray<Journal | string>,
    row: Route | undefined,
    wants: Mode | undefined,
    results: Result[],
  ): { action: Redo; move: Omit<MoveInFlight, 'fencedAt'> } | undefined {
    const ctx = this.#ctx
    const { logger, registry } = ctx.deps
    const bad = said.find((x): x is string => typeof x === 'string')
    const moves = said.filter((x): x is Journal => typeof x !== 'string')
    const journal = moves[0]
    const differ = moves.some((j) => !sameMove(j, moves[0] as Journal))
    if (bad !== undefined || journal === undefined || differ) {
      const kept =
        bad !== undefined
          ? why('journal_invalid', bad)
          : why(
              'journals_differ',
              `named by journals of different moves (${this.#state.filesNaming(host).join(', ')}); ` +
                `the host stays fenced and an operator decides`,
            )
      this.#state.fence([host], this.#state.fencedUnder(host) ?? journal?.generation ?? registry.nextGeneration())
      if (this.#state.keptReason(host)?.reason !== kept.reason) {
        logger.error({ host, code: kept.code }, `layout: ${host}: ${kept.reason}`)
        ctx.deps.onRecover?.('keep')
      }
      this.#state.keepJournal(host, kept)
      results.push(ctx.resultWithMetrics(host, 'held', kept))
      return undefined
    }
    this.#state.fence([host], journal.generation)
    let facts: RecoveryFacts
    try {
      const dest = lstatSyncOrUndefined(journal.dest.dir)
      facts = {
        fromExists: lstatSyncOrUndefined(journal.from.dir) !== undefined,
        destExists: dest !== undefined,
        destIsLink: dest?.isSymbolicLink() === true,
        row: rowAt(row, journal),
      }
    } catch (err) {
      const unknown = why(
        'files_unknown',
        `cannot tell where its files are (${errorMessage(err)}); the host stays fenced`,
      )
      logger.error({ host, code: unknown.code, err }, `layout: ${host}: ${unknown.reason}`)
      this.#state.keepJournal(host, unknown)
      results.push(ctx.resultWithMetrics(host, 'held', unknown, journal.to))
      return undefined
    }
    const action = recoveryAction(journal, facts, wants)
    if (action.kind === 'keep') {
      const kept = why(action.code, action.reason)
      if (this.#state.keptReason(host)?.reason !== kept.reason) {
        logger.warn(
          { host, to: journal.to, code: kept.code, ...facts },
          `layout: ${host}: journal to ${journal.to} kept -> ${action.reason}`,
        )
        ctx.deps.onRecover?.('keep')
      }
      this.#state.keepJournal(host, kept)
      results.push(ctx.resultWithMetrics(host, 'held', kept, journal.to))
      return undefined
    }
    logger.info(
      { host, to: journal.to, action: action.kind, ...facts },
      `layout: ${host}: journal to ${journal.to} -> ${action.kind}`,
    )
    ctx.deps.onRecover?.(action.kind)
    return { action: action.kind, move: { journal, wasHeld: this.#state.hold(host) !== undefined } }
  }

  /** Files and row still at from, as the intent wants: the journal goes, the host wakes where it is. */
  async #rollBack(moves: MoveInFlight[], intent: IntentMode): Promise<Result[]> {
    const ctx = this.#ctx
    await this.#state.closeJournals(moves.map((move) => move.journal.host))
    this.#endings.liftUnheld(moves)
    await this.#endings.settle()
    const unsettled = this.#endings.takeUnsettled(moves.map((move) => move.journal.host))
    await ctx.reloadEdge()
    return moves.map((move) =>
      unsettled.has(move.journal.host)
        ? ctx.resultWithMetrics(
            move.journal.host,
            'failed',
            why('journal_kept', unsettled.get(move.journal.host) ?? ''),
            move.journal.to,
          )
        : ctx.resultWithMetrics(
            move.journal.host,
            'recovered',
            why('rolled_back', `rolled back to ${otherMode(move.journal.to)}: the intent (${intent}) wants it there`),
            move.journal.to,
            ctx.secondsSince(move.fencedAt),
          ),
    )
  }

  /** Re-fences held hosts whose hold stands under intent (design §4), and drops the others. */
  async restoreHolds(intent: IntentMode, defaultOptedOut: boolean): Promise<Result[]> {
    const ctx = this.#ctx
    const { dirs, registry } = ctx.deps
    const rows = registry.snapshot().byHost
    const results: Result[] = []
    const keep: string[] = []
    const drop: string[] = []
    for (const hold of this.#state.holds()) {
      // A journal governs its host; recovery has fenced it already.
      if (this.#state.journaled(hold.host)) continue
      const row = rows.get(hold.host)
      if (hold.corrupt) {
        keep.push(hold.host)
        results.push(ctx.resultWithMetrics(hold.host, 'held', hold))
        continue
      }
      if (row === undefined) {
        drop.push(hold.host)
        results.push(
          ctx.resultWithMetrics(
            hold.host,
            'released',
            why('hold_dropped', 'hold dropped: the row is gone from the registry'),
            hold.to,
          ),
        )
        continue
      }
      const shape: Mode | undefined = isNested(dirs, row) ? 'nested' : isFlat(dirs, row) ? 'flat' : undefined
      const verdict = holdStands(hold.to, shape, intent, defaultOptedOut)
      if (verdict.stands) {
        keep.push(hold.host)
        results.push(ctx.resultWithMetrics(hold.host, 'held', hold, hold.to))
      } else {
        drop.push(hold.host)
        results.push(
          ctx.resultWithMetrics(hold.host, 'released', why('hold_dropped', `hold dropped: ${verdict.reason}`), hold.to),
        )
      }
    }
    if (keep.length > 0) this.#state.fence(keep, registry.nextGeneration())
    if (drop.length > 0) await this.#state.releaseHolds(drop)
    return results
  }
}

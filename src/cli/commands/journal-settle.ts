// `layoutd journal settle FILE|HOST|--all [--dry-run]` (design §8): a kept
// journal settled host by host, with no agent running. A move whose files
// are whole at one end (settleVerdict) is released there; the rest stay in
// the rewritten journal, each named with what to do.
import path from 'node:path'
import { settleVerdict, type SettleVerdict } from '../../domain/journal-release.js'
import { rowAt, samePaths } from '../../domain/pass-plan.js'
import { printableLines } from '../../domain/printable.js'
import type { Route, RowPaths } from '../../domain/schemas.js'
import { AppError, errorMessage, errors } from '../../errors.js'
import { lstatOrUndefined } from '../../infra/fsutil.js'
import { verifyDataRoots } from '../../infra/layout-dir.js'
import { readBatchSync, readJournalSync, writeBatchJournal } from '../../infra/pass/batch-journal.js'
import { sameMove } from '../../infra/pass/journal-files.js'
import { removeEmptyNestedRoots } from '../../infra/pass/mover.js'
import {
  hostJournalName,
  isBatchJournalName,
  JOURNAL_SUFFIX,
  layoutDir,
  listLayout,
  type Journal,
} from '../../infra/pass/journal.js'
import type { Registry } from '../../infra/registry.js'
import type { ParsedArgs } from '../args.js'
import type { CommandContext } from '../command.js'
import { assertUnchanged, endAt, named, readJournal, removeDurably, type ReadJournal } from './journal-release.js'

export const settleOptions = { all: { type: 'boolean' }, 'dry-run': { type: 'boolean' } } as const

/** Released at an end (the row rewritten or not), or kept with why. */
interface Judged {
  move: Journal
  verdict: SettleVerdict
  /** Another journal or its hold marker names the host: it may still not wake. */
  still: string | undefined
  /** Rewritten only while it still says this. */
  row: Route | undefined
}

/** The lock, held for the whole run so no agent starts under it; a dry run only looks. */
interface Held {
  release(): void
}

/** Refused beside a running agent, which keeps fences and rows in memory. */
async function lockOut(ctx: CommandContext, dryRun: boolean): Promise<Held> {
  const { AgentLock } = await import('../../infra/agent-lock.js')
  const dataDir = ctx.config.dataDir
  const refused = () => errors.settleAgentRunning(dataDir, AgentLock.describeHolder(dataDir))
  if (dryRun) {
    if (AgentLock.held(dataDir)) throw refused()
    return { release: () => undefined }
  }
  try {
    return AgentLock.acquire(dataDir)
  } catch (err) {
    if (err instanceof AppError && err.code === 'data_dir_locked') throw refused()
    throw err
  }
}

/** With --all every one in D/layout, an unreadable one named. */
async function journalsToSettle(
  ctx: CommandContext,
  arg: string | undefined,
  all: boolean,
): Promise<Array<ReadJournal | { name: string; why: string }>> {
  if (all === (arg !== undefined)) throw errors.usage('journal settle takes a FILE or a HOST, or --all')
  if (arg !== undefined) return [await readJournal(ctx, arg)]
  const listing = await listLayout(ctx.config)
  const names = [...listing.journals.map(hostJournalName), ...listing.batches].sort()
  const out: Array<ReadJournal | { name: string; why: string }> = []
  for (const name of names) {
    try {
      out.push(await readJournal(ctx, name))
    } catch (err) {
      if (!(err instanceof AppError) || err.code !== 'journal_unreadable') throw err
      out.push({ name, why: err.message })
    }
  }
  return out
}

/** Each host another journal names, with its move (undefined: unreadable). */
async function othersNaming(
  ctx: CommandContext,
  name: string,
): Promise<Map<string, Array<{ file: string; move: Journal | undefined }>>> {
  const listing = await listLayout(ctx.config)
  const out = new Map<string, Array<{ file: string; move: Journal | undefined }>>()
  const others = [...listing.journals.map(hostJournalName), ...listing.batches].filter((n) => n !== name)
  for (const file of others) {
    let read
    try {
      read = isBatchJournalName(file)
        ? readBatchSync(ctx.config, file)
        : readJournalSync(ctx.config, file.slice(0, -JOURNAL_SUFFIX.length))
    } catch {
      continue // gone since it was listed
    }
    const said: Array<{ host: string; move: Journal | undefined }> = read.ok
      ? read.journals.map((m) => ({ host: m.host, move: m }))
      : read.hosts.map((host) => ({ host, move: undefined }))
    for (const { host, move } of said) out.set(host, [...(out.get(host) ?? []), { file, move }])
  }
  return out
}

/** Never created where there is none. */
async function openRegistry(ctx: CommandContext): Promise<Registry | undefined> {
  const { Registry, REGISTRY_FILE } = await import('../../infra/registry.js')
  if ((await lstatOrUndefined(path.join(ctx.config.dataDir, REGISTRY_FILE))) === undefined) return undefined
  return Registry.open(ctx.config.dataDir, { create: false })
}

/** Where each move's files are, where its row stands, what else names the host. */
async function judge(ctx: CommandContext, j: ReadJournal, registry: Registry | undefined): Promise<Judged[]> {
  const others = await othersNaming(ctx, j.name)
  const holds = new Set((await listLayout(ctx.config)).holds)
  const out: Judged[] = []
  for (const move of j.moves) {
    const row = registry?.get(move.host)
    const naming = others.get(move.host) ?? []
    const differ = naming.find((o) => o.move === undefined || !sameMove(o.move, move))
    if (differ !== undefined) {
      const found =
        differ.move === undefined
          ? `layout/${differ.file}, which cannot be read, names it too`
          : `layout/${differ.file} names it too, with another move`
      const todo = 'decide which journal its files agree with (docs/runbook.md#a-kept-journal)'
      out.push({ move, row, still: undefined, verdict: { settle: false, found, todo } })
      continue
    }
    const verdict = settleVerdict(move, {
      atFrom: await endAt(move.from.dir),
      atDest: await endAt(move.dest.dir),
      row: rowAt(row, move),
      rowDir: row?.dir,
    })
    const still =
      naming.length > 0
        ? `it stays fenced: layout/${naming.map((o) => o.file).join(', layout/')} names it too; settle that next`
        : holds.has(move.host)
          ? 'its hold marker still holds it (docs/runbook.md#clear-a-hold)'
          : undefined
    out.push({ move, row, still, verdict })
  }
  return out
}

function pathsAt(move: Journal, at: 'from' | 'dest'): RowPaths {
  return at === 'from' ? move.from : move.dest
}

/** What each move found, and what settle does (or would do). */
function planLines(judged: readonly Judged[], dryRun: boolean): string {
  const would = dryRun ? 'would release' : 'releasing'
  return judged
    .map(({ move, verdict, still }) => {
      if (!verdict.settle) return `  keep ${move.host}: ${verdict.found}; ${verdict.todo}\n`
      const where = verdict.at === 'none' ? '' : ` at ${pathsAt(move, verdict.at).dir}`
      return `  ${would} ${move.host}${where}: ${verdict.found}${still === undefined ? '' : `; ${still}`}\n`
    })
    .join('')
}

/**
 * Rows before the journal: a crash between leaves a journal recovery finishes; the other order, a wrong row
 * with no journal.
 */
function rewriteRows(registry: Registry | undefined, judged: readonly Judged[]): void {
  const rows = judged.flatMap(({ move, verdict, row }) =>
    verdict.settle && verdict.rewrite && verdict.at !== 'none' && row !== undefined
      ? [{ move, at: verdict.at, row }]
      : [],
  )
  if (rows.length === 0 || registry === undefined) return
  for (const { move, row } of rows) {
    const now = registry.get(move.host)
    if (now === undefined || !samePaths(now, row))
      throw errors.conflict(`${move.host}'s row changed while it was checked; nothing was changed: run it again`)
  }
  registry.setPaths(rows.map(({ move, at }) => ({ host: move.host, ...pathsAt(move, at) })))
}

/** A nested root a move made for a host released flat is removed when empty. */
function releasedFlat(judged: readonly Judged[]): string[] {
  return judged.flatMap(({ move, verdict }) => {
    if (!verdict.settle || verdict.at === 'none') return []
    const mode = verdict.at === 'dest' ? move.to : move.to === 'nested' ? 'flat' : 'nested'
    return mode === 'flat' ? [move.host] : []
  })
}

/** The plan, then (unless a dry run) the rows, the leftovers and the journal. */
async function settleOne(
  ctx: CommandContext,
  j: ReadJournal,
  registry: Registry | undefined,
  dryRun: boolean,
): Promise<void> {
  const say = (text: string): boolean => ctx.stdout.write(printableLines(text))
  const shown = `layout/${j.name}`
  const judged = await judge(ctx, j, registry)
  const released = judged.filter((x) => x.verdict.settle).map((x) => x.move.host)
  const kept = judged.filter((x) => !x.verdict.settle).map((x) => x.move)
  const what = j.batch ? `a batch's journal of ${j.moves.length} moves` : `${j.moves[0]?.host ?? ''}'s journal`
  say(`${shown}: ${what}, started ${j.moves[0]?.startedAt ?? '-'}\n${planLines(judged, dryRun)}`)
  const keptMoves = `${kept.length} kept move${kept.length === 1 ? '' : 's'}`
  const ending =
    released.length === 0
      ? `nothing to release; ${shown} stays as it is`
      : kept.length === 0
        ? `remove ${shown}`
        : `rewrite ${shown} with the ${keptMoves} (${named(kept.map((m) => m.host))})`
  if (dryRun || released.length === 0) {
    say(dryRun ? `--dry-run: would ${ending}; nothing was changed\n` : `${ending}\n`)
    return
  }
  await assertUnchanged(ctx, j)
  rewriteRows(registry, judged)
  await removeEmptyNestedRoots(ctx.config, releasedFlat(judged)).catch((err: unknown) => {
    ctx.stderr.write(`layoutd journal: empty nested directories not removed: ${errorMessage(err)}\n`)
  })
  // A host's own journal names one move, so it is removed; only a batch's is rewritten.
  if (kept.length === 0) await removeDurably(ctx, j)
  else await writeBatchJournal(ctx.config, j.name, kept)
  say(`${ending.replace(/^remove/, 'removed').replace(/^rewrite/, 'rewrote')}: ${named(released)} released\n`)
}

export async function settle(args: ParsedArgs<typeof settleOptions>, ctx: CommandContext): Promise<number> {
  const dryRun = args.values['dry-run'] === true
  // A symlinked D/layout would have the command rewrite files elsewhere (design §2.1).
  await verifyDataRoots(ctx.config.dataDir)
  const held = await lockOut(ctx, dryRun)
  try {
    const files = await journalsToSettle(ctx, args.positionals[0], args.values.all === true)
    if (files.length === 0) {
      ctx.stdout.write(`no journal in ${layoutDir(ctx.config)}\n`)
      return 0
    }
    const registry = await openRegistry(ctx)
    try {
      for (const j of files) {
        if ('why' in j) ctx.stdout.write(printableLines(`layout/${j.name}: kept whole: ${j.why}\n`))
        else await settleOne(ctx, j, registry, dryRun)
      }
    } finally {
      registry?.close()
    }
    if (!dryRun) ctx.stdout.write('no agent runs here: start it, and it wakes the released hosts as their rows say\n')
    return 0
  } finally {
    held.release()
  }
}

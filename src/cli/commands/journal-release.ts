// `layoutd journal release FILE|HOST [--dry-run]` (design §8): a kept
// journal removed, whole, only when every move it names is settled
// (src/domain/journal-release.ts). A move the running agent is carrying out
// is refused: its journal makes it exact after a crash.
import type { Stats } from 'node:fs'
import fs from 'node:fs/promises'
import path from 'node:path'
import { validHost } from '../../domain/hostname.js'
import { releaseVerdict, type EndFound, type ReleaseFacts } from '../../domain/journal-release.js'
import { rowAt } from '../../domain/pass-plan.js'
import { printable, printableLines } from '../../domain/printable.js'
import type { LayoutReport, Route } from '../../domain/schemas.js'
import { AgentUnreachable, AppError, errorMessage, errors } from '../../errors.js'
import { fsyncDir, isNotFound, kindOf, lstatOrUndefined } from '../../infra/fsutil.js'
import { journalNames, verifyDataRoots } from '../../infra/layout-dir.js'
import { readBatchSync, readJournalSync, type BatchRead } from '../../infra/pass/batch-journal.js'
import {
  hostJournalName,
  isBatchJournalName,
  JOURNAL_SUFFIX,
  layoutDir,
  listLayout,
  type Journal,
} from '../../infra/pass/journal.js'
import { agentClient, type AgentClient } from '../agent-client.js'
import type { ParsedArgs } from '../args.js'
import type { CommandContext } from '../command.js'

export const releaseOptions = { 'dry-run': { type: 'boolean' } } as const

/** A file's moves, and the file as it was when read. */
export interface ReadJournal {
  name: string
  batch: boolean
  moves: Journal[]
  stat: Stats
}

/** The running agent's report rows, and how to ask it for a run. */
interface AgentView {
  rows: LayoutReport['rows']
  client: AgentClient
}

/** Hosts in a line: all of a few, the count and the first of many. */
export function named(hosts: readonly string[]): string {
  return hosts.length <= 3 ? hosts.join(', ') : `${hosts.length} hosts (${hosts[0] ?? ''}, …)`
}

/** A host's own journal file name, or a batch's. */
function journalShaped(name: string): boolean {
  if (isBatchJournalName(name)) return true
  return name.endsWith(JOURNAL_SUFFIX) && validHost(name.slice(0, -JOURNAL_SUFFIX.length))
}

/** name, HOST, `layout/NAME` or an absolute path; anything else refused unread. */
function journalNameIn(layout: string, arg: string): string[] {
  if (arg === '') throw errors.usage('journal release needs a FILE or a HOST')
  let name = arg
  if (arg.includes('/')) {
    if (arg.split('/').includes('..')) throw errors.journalOutsideLayout(arg, 'has a `..` in it')
    const at = path.isAbsolute(arg) ? path.normalize(arg) : path.join(path.dirname(layout), arg)
    if (path.dirname(at) !== layout || (!path.isAbsolute(arg) && !arg.startsWith('layout/')))
      throw errors.journalOutsideLayout(arg, `is not a file of ${layout}`)
    name = path.basename(at)
  }
  const names = [...(journalShaped(name) ? [name] : []), ...(validHost(name) ? [hostJournalName(name)] : [])]
  if (names.length === 0) throw errors.journalOutsideLayout(arg, 'is neither a journal’s name nor a host')
  return names
}

/** The first of names in layout (a symlink too, refused by name); else not_found, naming any batch. */
async function existing(layout: string, arg: string, names: readonly string[]): Promise<{ name: string; st: Stats }> {
  for (const name of names) {
    const st = await lstatOrUndefined(path.join(layout, name))
    if (st !== undefined) return { name, st }
  }
  const batch = validHost(arg) ? (await journalNames(path.dirname(layout))).files.get(arg) : undefined
  throw errors.notFound(
    batch === undefined
      ? `no journal ${JSON.stringify(arg)} in ${layout}; \`layoutd journal list\` names each`
      : `${arg} has no journal of its own; layout/${path.basename(batch)} names it: release that file, ` +
          `which releases every host it names`,
  )
}

/** Checked move by move, as recovery does; one that cannot be acted on is refused. */
export async function readJournal(ctx: CommandContext, arg: string): Promise<ReadJournal> {
  const layout = layoutDir(ctx.config)
  const { name, st } = await existing(layout, arg, journalNameIn(layout, arg))
  const shown = `layout/${name}`
  if (st.isSymbolicLink()) throw errors.journalOutsideLayout(arg, `is a symlink (${shown}), not a journal file`)
  if (!st.isFile()) throw errors.journalUnreadable(shown, `is ${kindOf(st)}, not a journal file`)
  const batch = isBatchJournalName(name)
  let read: BatchRead
  try {
    read = batch ? readBatchSync(ctx.config, name) : readJournalSync(ctx.config, name.slice(0, -JOURNAL_SUFFIX.length))
  } catch (err) {
    throw errors.journalUnreadable(shown, `cannot be read: ${errorMessage(err)}`)
  }
  if (!read.ok) throw errors.journalUnreadable(shown, read.reason)
  return { name, batch, moves: read.journals, stat: st }
}

/** null when none holds the data root; one that cannot be asked is a refusal. */
async function agentView(ctx: CommandContext): Promise<AgentView | null> {
  const { AgentLock } = await import('../../infra/agent-lock.js')
  if (!AgentLock.held(ctx.config.dataDir)) return null
  const client = agentClient(ctx.config, undefined)
  try {
    return { rows: (await client.status()).rows, client }
  } catch (err) {
    if (!(err instanceof AgentUnreachable)) throw err
    throw errors.agentUnreachable(
      `an agent holds ${ctx.config.dataDir} but could not be asked whether a move of this journal is under way ` +
        `(${errorMessage(err)}); nothing was changed: wait until it answers (\`layoutd status --wait-ready\`)`,
      { cause: err },
    )
  }
}

/** What is at dir, not following a symlink. */
export async function endAt(dir: string): Promise<EndFound> {
  try {
    const st = await fs.lstat(dir)
    if (st.isDirectory()) return { kind: 'directory' }
    if (st.isSymbolicLink()) return { kind: 'symlink' }
    return { kind: 'other', what: kindOf(st) }
  } catch (err) {
    if (isNotFound(err)) return { kind: 'absent' }
    return { kind: 'other', what: `not to be looked at (${errorMessage(err)})` }
  }
}

/** Read without creating a registry where there is none. */
async function rowsOf(ctx: CommandContext, hosts: readonly string[]): Promise<Map<string, Route>> {
  const { Registry, REGISTRY_FILE } = await import('../../infra/registry.js')
  if ((await lstatOrUndefined(path.join(ctx.config.dataDir, REGISTRY_FILE))) === undefined) return new Map()
  const registry = Registry.open(ctx.config.dataDir, { create: false })
  try {
    const rows = new Map<string, Route>()
    for (const host of hosts) {
      const row = registry.get(host)
      if (row !== undefined) rows.set(host, row)
    }
    return rows
  } finally {
    registry.close()
  }
}

/** Where its files are and where its row stands (the agent asked last). */
type MoveFacts = Omit<ReleaseFacts, 'agentCode'> & { move: Journal }

async function factsOf(ctx: CommandContext, j: ReadJournal): Promise<MoveFacts[]> {
  const rows = await rowsOf(
    ctx,
    j.moves.map((m) => m.host),
  )
  return Promise.all(
    j.moves.map(async (move) => {
      const row = rows.get(move.host)
      return {
        move,
        atFrom: await endAt(move.from.dir),
        atDest: await endAt(move.dest.dir),
        row: rowAt(row, move),
        rowDir: row?.dir,
      }
    }),
  )
}

/** Another journal names it, or its hold marker holds it. */
async function stillFenced(ctx: CommandContext, j: ReadJournal): Promise<Map<string, string>> {
  const listing = await listLayout(ctx.config)
  const mine = new Set(j.moves.map((m) => m.host))
  const out = new Map<string, string>()
  const others = [
    ...listing.journals.map(hostJournalName).filter((n) => n !== j.name),
    ...listing.batches.filter((n) => n !== j.name),
  ]
  for (const name of others) {
    let read: BatchRead
    try {
      read = isBatchJournalName(name)
        ? readBatchSync(ctx.config, name)
        : readJournalSync(ctx.config, name.slice(0, -JOURNAL_SUFFIX.length))
    } catch {
      continue // gone since it was listed
    }
    for (const host of read.ok ? read.journals.map((m) => m.host) : read.hosts)
      if (mine.has(host)) out.set(host, `it stays fenced: layout/${name} names it too`)
  }
  for (const host of listing.holds)
    if (mine.has(host) && !out.has(host))
      out.set(host, 'it stays fenced by its hold marker (docs/runbook.md#clear-a-hold)')
  return out
}

/** Never act on an old reading: inode, size and time must match. */
export async function assertUnchanged(ctx: CommandContext, j: ReadJournal): Promise<void> {
  const now = await lstatOrUndefined(path.join(layoutDir(ctx.config), j.name))
  const same =
    now !== undefined &&
    now.isFile() &&
    now.dev === j.stat.dev &&
    now.ino === j.stat.ino &&
    now.size === j.stat.size &&
    now.mtimeMs === j.stat.mtimeMs
  if (!same)
    throw errors.conflict(
      `layout/${j.name} ${now === undefined ? 'is gone' : 'changed'} while it was checked; nothing was changed ` +
        `by this command: run it again`,
    )
}

/** Unlinks the journal if still the file read, then fsyncs D/layout. */
export async function removeDurably(ctx: CommandContext, j: ReadJournal): Promise<void> {
  const layout = layoutDir(ctx.config)
  await assertUnchanged(ctx, j)
  await fs.unlink(path.join(layout, j.name))
  await fsyncDir(layout)
}

/** Its recovery finds the file gone and releases the hosts. */
async function askForRun(ctx: CommandContext, agent: AgentView | null, hosts: readonly string[]): Promise<void> {
  const which = named(hosts)
  if (agent === null) {
    ctx.stderr.write(
      `layoutd journal: no agent runs on ${ctx.config.dataDir}, so none holds a fence for ${which}; ` +
        `an agent that starts wakes ${hosts.length === 1 ? 'it as its row says' : 'them as their rows say'}\n`,
    )
    return
  }
  try {
    await agent.client.kick()
    ctx.stdout.write(`asked the agent for a run: it releases ${which} now (outcome released)\n`)
  } catch (err) {
    const code = err instanceof AppError ? ` (${err.code})` : ''
    ctx.stderr.write(
      `layoutd journal: the agent did not take the run${code}: ${printable(errorMessage(err))}; ` +
        `it releases ${which} at its next run (\`layoutd converge --wait\`)\n`,
    )
  }
}

export async function release(args: ParsedArgs<typeof releaseOptions>, ctx: CommandContext): Promise<number> {
  // A symlinked D/layout would have the command remove a file elsewhere (design §2.1).
  await verifyDataRoots(ctx.config.dataDir)
  const j = await readJournal(ctx, args.positionals[0] ?? '')
  const shown = `layout/${j.name}`
  const facts = await factsOf(ctx, j)
  const fenced = await stillFenced(ctx, j)
  // Asked just before the removal: a run taking the journal up after this is the window left.
  const agent = await agentView(ctx)
  const verdicts = facts.map((f) => {
    const reported = agent !== null && Object.hasOwn(agent.rows, f.move.host) ? agent.rows[f.move.host] : undefined
    return { host: f.move.host, verdict: releaseVerdict(f.move, { ...f, agentCode: reported?.code }) }
  })
  const unsettled = verdicts.flatMap(({ host, verdict }) =>
    verdict.release ? [] : [{ host, found: verdict.found, todo: verdict.todo }],
  )
  if (unsettled.length > 0) throw errors.journalUnsettled(shown, unsettled, verdicts.length)
  const started = j.moves[0]?.startedAt ?? '-'
  const what = j.batch ? `a batch's journal of ${j.moves.length} moves` : `${j.moves[0]?.host ?? ''}'s journal`
  const lines = verdicts.map(({ host, verdict }) => {
    const also = fenced.get(host)
    return `  ${host}: ${verdict.found}${also === undefined ? '' : `; ${also}`}\n`
  })
  const say = (text: string): boolean => ctx.stdout.write(printableLines(text))
  say(`${shown}: ${what}, started ${started}; every move is settled:\n${lines.join('')}`)
  const hosts = verdicts.map((v) => v.host)
  if (args.values['dry-run'] === true) {
    say(`--dry-run: would remove ${shown} and release ${named(hosts)}; nothing was changed\n`)
    return 0
  }
  say(`removing ${shown} (unlink, then fsync ${layoutDir(ctx.config)})\n`)
  await removeDurably(ctx, j)
  say(`removed ${shown}: ${named(hosts)} released\n`)
  await askForRun(ctx, agent, hosts)
  return 0
}

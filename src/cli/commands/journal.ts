// `layoutd journal list|show|release|settle` (design §8): the journals in
// <data>/layout. list and show only read (a HOST is found in any journal);
// release and settle are journal-release.ts and journal-settle.ts.
import fs from 'node:fs/promises'
import path from 'node:path'
import type { Dirs } from '../../domain/paths.js'
import { validHost } from '../../domain/hostname.js'
import { printable } from '../../domain/printable.js'
import type { LayoutReport } from '../../domain/schemas.js'
import { errorMessage, errors } from '../../errors.js'
import { isBatchJournalName, JOURNAL_SUFFIX, layoutDir, listLayout } from '../../infra/pass/journal.js'
import { agentClient } from '../agent-client.js'
import type { OptionsConfig, ParsedArgs } from '../args.js'
import {
  runGroup,
  subcommandIn,
  withConfig,
  type Cli,
  type Command,
  type CommandContext,
  type Signature,
} from '../command.js'
import { formatTable } from '../table.js'
import { release, releaseOptions } from './journal-release.js'
import { settle, settleOptions } from './journal-settle.js'

export const usage = `usage:
  layoutd journal list [--json]                   every journal in D/layout: what it names, why it is kept
  layoutd journal show FILE|HOST [--json]         one journal's moves, and where each host's files are now
  layoutd journal release FILE|HOST [--dry-run]   remove a kept journal whose every move is settled, then ask
                                                  the agent for a run: its hosts are released
  layoutd journal settle FILE|HOST|--all [--dry-run]
                                                  with the agent stopped: release each host whose files are
                                                  whole at one end (its row rewritten there if need be), and
                                                  keep the rest in the journal, each named with why

  FILE is a journal's name in D/layout (a host's own, or _batch-N.journal, also as layout/NAME or its
  absolute path); HOST names its own journal. list and show only read. release removes the journal only
  when each move it names has its files whole at exactly the end its row names and nothing at the other
  (or no row and no files at all), and no run of the agent is carrying it out; otherwise it refuses,
  naming each such host, what was found and what to do first (docs/runbook.md#a-kept-journal).
  settle is refused while an agent runs on the data root. show HOST also finds a host a batch's journal
  names. --dry-run says what release or settle would do, and changes nothing.
`

export const signature: Signature = { failures: 'layoutd journal', usageErrors: 'layoutd journal' }

/** As read from the file; its shape is not trusted. */
interface Move {
  host: string
  to: string
  from: string
  dest: string
}

/** A journal file, read: its moves, or why it cannot be read. */
interface JournalFile {
  file: string
  batch: boolean
  startedAt: string
  moves: Move[]
  unreadable?: string
}

const str = (v: unknown): string => (typeof v === 'string' ? v : v === undefined ? '' : JSON.stringify(v))

function moveOf(raw: unknown): Move {
  const m = (raw ?? {}) as Record<string, unknown>
  const dir = (p: unknown) => str((p as { dir?: unknown } | undefined)?.dir)
  return { host: str(m.host), to: str(m.to), from: dir(m.from), dest: dir(m.dest) }
}

async function readJournalFile(dirs: Dirs, file: string): Promise<JournalFile> {
  const batch = isBatchJournalName(file)
  const out: JournalFile = { file, batch, startedAt: '', moves: [] }
  let raw: Record<string, unknown>
  try {
    // O_NOFOLLOW: a journal's name that is a symlink is not read through.
    const handle = await fs.open(path.join(layoutDir(dirs), file), fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW)
    try {
      raw = JSON.parse(await handle.readFile('utf8')) as Record<string, unknown>
    } finally {
      await handle.close()
    }
  } catch (err) {
    return { ...out, unreadable: errorMessage(err) }
  }
  out.startedAt = str(raw.startedAt)
  out.moves = batch ? (Array.isArray(raw.moves) ? raw.moves.map(moveOf) : []) : [moveOf(raw)]
  return out
}

/** Where a path is now: `dir` (a directory), `symlink`, `file`, or `absent`. */
async function whatIsAt(p: string): Promise<string> {
  if (p === '') return 'none named'
  try {
    const st = await fs.lstat(p)
    return st.isDirectory() ? 'a directory' : st.isSymbolicLink() ? 'a symlink' : 'a file'
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ENOENT' ? 'absent' : `unreadable (${errorMessage(err)})`
  }
}

/** Why the agent keeps each host fenced, when it answers; an empty map (and why) when it does not. */
async function reasons(ctx: CommandContext): Promise<{ rows: LayoutReport['rows']; note: string }> {
  try {
    const report = await agentClient(ctx.config, undefined).status()
    return { rows: report.rows, note: '' }
  } catch (err) {
    return { rows: {}, note: `the agent's reasons are not known: ${errorMessage(err)}` }
  }
}

async function journalFiles(ctx: CommandContext): Promise<string[]> {
  const listing = await listLayout(ctx.config)
  return [...listing.journals.map((h) => h + JOURNAL_SUFFIX), ...listing.batches].sort()
}

const listOptions = { json: { type: 'boolean' } } as const

async function list(args: ParsedArgs<typeof listOptions>, ctx: CommandContext): Promise<number> {
  const files = await Promise.all((await journalFiles(ctx)).map((f) => readJournalFile(ctx.config, f)))
  const { rows, note } = await reasons(ctx)
  const why = (j: JournalFile): string => {
    if (j.unreadable !== undefined) return `unreadable: ${j.unreadable}`
    const codes = new Map<string, string>()
    for (const m of j.moves) {
      const row = Object.hasOwn(rows, m.host) ? rows[m.host] : undefined
      if (row !== undefined && row.code !== '') codes.set(row.code, row.reason)
    }
    return [...codes].map(([code, reason]) => `${code}: ${reason}`).join('; ') || (note === '' ? '-' : 'unknown')
  }
  if (args.values.json === true) {
    const out = files.map((j) => ({ ...j, hosts: j.moves.map((m) => m.host), why: why(j) }))
    ctx.stdout.write(`${JSON.stringify(out, null, 2)}\n`)
    return 0
  }
  if (files.length === 0) {
    ctx.stdout.write(`no journal in ${layoutDir(ctx.config)}\n`)
    return 0
  }
  const names = (j: JournalFile) =>
    j.moves.length <= 2 ? j.moves.map((m) => m.host).join(', ') : `${j.moves.length} hosts (${j.moves[0]?.host}, …)`
  ctx.stdout.write(
    formatTable(
      ['FILE', 'STARTED', 'NAMES', 'WHY KEPT'],
      files.map((j) => [`layout/${j.file}`, j.startedAt || '-', names(j), why(j)]),
    ),
  )
  if (note !== '') ctx.stderr.write(`${signature.failures}: ${printable(note)}\n`)
  return 0
}

const showOptions = { json: { type: 'boolean' } } as const

function withEnds(moves: readonly Move[]): Promise<Array<Move & { atFrom: string; atDest: string }>> {
  return Promise.all(moves.map(async (m) => ({ ...m, atFrom: await whatIsAt(m.from), atDest: await whatIsAt(m.dest) })))
}

/** The journals naming host, its own first (read or not), each with only host's move kept. */
async function namingHost(ctx: CommandContext, host: string, files: readonly string[]): Promise<JournalFile[]> {
  const read = await Promise.all(files.map((f) => readJournalFile(ctx.config, f)))
  return read
    .filter((j) => j.file === host + JOURNAL_SUFFIX || j.moves.some((m) => m.host === host))
    .sort((a, b) => Number(a.batch) - Number(b.batch))
    .map((j) => ({ ...j, moves: j.moves.filter((m) => m.host === host) }))
}

async function show(args: ParsedArgs<typeof showOptions>, ctx: CommandContext): Promise<number> {
  // `layout/_batch-7.journal`, as a row's reason names it, is the file `_batch-7.journal`.
  const name = (args.positionals[0] ?? '').replace(/^layout\//, '')
  const files = await journalFiles(ctx)
  // A HOST is looked for in every journal, its own and the batches' (design §3.3).
  if (!files.includes(name)) {
    const naming = validHost(name) ? await namingHost(ctx, name, files) : []
    if (naming.length === 0)
      throw errors.notFound(
        `no journal ${JSON.stringify(name)} in ${layoutDir(ctx.config)}, and no journal names it ` +
          `(\`layoutd journal list\` names each)`,
      )
    return showHost(args, ctx, name, naming)
  }
  const file = name
  const j = await readJournalFile(ctx.config, file)
  const moves = await withEnds(j.moves)
  if (args.values.json === true) {
    ctx.stdout.write(`${JSON.stringify({ ...j, moves }, null, 2)}\n`)
    return 0
  }
  const head = `layout/${file}: ${j.batch ? 'a batch' : 'a host'}'s journal, started ${j.startedAt || '-'}\n`
  if (j.unreadable !== undefined) {
    ctx.stdout.write(`${printable(head)}unreadable: ${printable(j.unreadable)}\n`)
    return 0
  }
  ctx.stdout.write(printable(head.slice(0, -1)) + '\n' + moveTable(moves))
  return 0
}

function moveTable(moves: ReadonlyArray<Move & { atFrom: string; atDest: string }>): string {
  return formatTable(
    ['HOST', 'TO', 'FROM', 'AT FROM', 'DEST', 'AT DEST'],
    moves.map((m) => [m.host, m.to, m.from, m.atFrom, m.dest, m.atDest]),
  )
}

/** HOST in every journal naming it, its own first, with where its files are now. */
async function showHost(
  args: ParsedArgs<typeof showOptions>,
  ctx: CommandContext,
  host: string,
  naming: readonly JournalFile[],
): Promise<number> {
  const shown = await Promise.all(naming.map(async (j) => ({ ...j, moves: await withEnds(j.moves) })))
  if (args.values.json === true) {
    const [first, ...rest] = shown
    ctx.stdout.write(`${JSON.stringify({ ...first, host, alsoNamedBy: rest.map((j) => j.file) }, null, 2)}\n`)
    return 0
  }
  for (const j of shown) {
    const what = j.batch ? 'a batch' : 'its own'
    const head = `${host} is named by layout/${j.file}: ${what} journal, started ${j.startedAt || '-'}`
    if (j.unreadable !== undefined) ctx.stdout.write(`${printable(head)}\nunreadable: ${printable(j.unreadable)}\n`)
    else ctx.stdout.write(`${printable(head)}\n${moveTable(j.moves)}`)
  }
  return 0
}

const listCommand: Command<typeof listOptions> = { usage, options: listOptions, signature, run: list }
const showCommand: Command<typeof showOptions> = {
  usage,
  options: showOptions,
  positionals: ['FILE'],
  signature,
  run: show,
}
const releaseCommand: Command<typeof releaseOptions> = {
  usage,
  options: releaseOptions,
  positionals: ['FILE'],
  signature,
  run: release,
}
const settleCommand: Command<typeof settleOptions> = {
  usage,
  options: settleOptions,
  positionals: ['FILE?'],
  signature,
  run: settle,
}
const SUBCOMMANDS: Record<string, Command<OptionsConfig>> = {
  list: listCommand,
  show: showCommand,
  release: releaseCommand,
  settle: settleCommand,
}

export function main(argv: readonly string[], cli: Cli): Promise<number> {
  return runGroup({ usage, signature, subcommand: subcommandIn(SUBCOMMANDS) }, argv, cli, withConfig(cli))
}

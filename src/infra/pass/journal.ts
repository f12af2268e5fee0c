// Move journals (design §3 step 4): written and fsynced before any file of
// a host moves, removed once the move is complete. A journal means "fenced,
// recover me", so one is acted on only when it reads back whole with each
// host's two shapes exact; anything else is left for an operator.
import fsSync, { constants } from 'node:fs'
import fs from 'node:fs/promises'
import path from 'node:path'
import { Type, Value } from '../../domain/typebox.js'
import type { Static } from 'typebox'
import { NOT_A_HOST_PREFIX, validHost } from '../../domain/hostname.js'
import { recordShapeError } from '../../domain/pass-plan.js'
import type { Dirs } from '../../domain/paths.js'
import { RowPaths } from '../../domain/schemas.js'
import { errorMessage } from '../../errors.js'
import { fsyncSkipped } from '../failpoint.js'
import {
  ensureDir,
  fdatasyncFd,
  fsyncDir,
  isNotFound,
  mapLimit,
  readNoFollow,
  readNoFollowSync,
  SYNC_CONCURRENCY,
  tmpName,
  unlinkMany,
  type NamedData,
} from '../fsutil.js'
import { defaultSlicer, type Slicer } from '../../domain/loop-turns.js'

const { O_WRONLY, O_CREAT, O_TRUNC, O_NOFOLLOW } = constants

export const JOURNAL_SUFFIX = '.journal'
export const HOLD_SUFFIX = '.hold'

export const Journal = Type.Object(
  {
    v: Type.Literal(1, { description: 'Format version.' }),
    host: Type.String({ description: 'The host being moved; equals the file name.' }),
    to: Type.Union([Type.Literal('flat'), Type.Literal('nested')], { description: 'The layout the move goes to.' }),
    from: RowPaths,
    dest: RowPaths,
    generation: Type.Integer({ minimum: 0, description: 'The fence generation the move runs under.' }),
    startedAt: Type.String({ description: 'When the move was journaled (RFC 3339).' }),
  },
  { additionalProperties: false },
)
export type Journal = Static<typeof Journal>

/** The file name a batch's journal takes: `_` first, which no hostname can start with (hostname.ts). */
export const BATCH_PREFIX = `${NOT_A_HOST_PREFIX}batch-`

export function batchJournalName(generation: number): string {
  return `${BATCH_PREFIX}${generation}${JOURNAL_SUFFIX}`
}

const BATCH_NAME = new RegExp(`^${BATCH_PREFIX}[0-9]{1,16}${JOURNAL_SUFFIX.replace('.', '\\.')}$`)

export function isBatchJournalName(name: string): boolean {
  return BATCH_NAME.test(name)
}

export function hostJournalName(host: string): string {
  return `${host}${JOURNAL_SUFFIX}`
}

export function layoutDir(dirs: Dirs): string {
  return path.join(dirs.dataDir, 'layout')
}

/** Makes `<data>/layout` when absent, durably (its entry in the data dir is fsynced). */
export async function ensureLayoutDir(dirs: Dirs): Promise<string> {
  const dir = layoutDir(dirs)
  if (await ensureDir(dir, 0o700)) await fsyncDir(dirs.dataDir, 'layout-dir')
  return dir
}

/** Writes journals with one directory fsync (design §3); if it throws, those on disk name moves not begun. */
export async function writeJournals(
  dirs: Dirs,
  journals: readonly Journal[],
  slicer: Slicer = defaultSlicer,
): Promise<void> {
  const dir = await ensureLayoutDir(dirs)
  await writeManySliced(
    dir,
    journals.map((journal) => ({ name: `${journal.host}${JOURNAL_SUFFIX}`, data: `${JSON.stringify(journal)}\n` })),
    slicer,
  )
}

/** atomicWriteMany's protocol: opens, writes and renames in slices, the fsyncs waiting on the disk together. */
export async function writeManySliced(dir: string, files: readonly NamedData[], slicer: Slicer): Promise<void> {
  if (files.length === 0) return
  const fds: number[] = []
  const made: string[] = []
  try {
    try {
      for (const f of files) {
        const tmp = path.join(dir, tmpName(f.name))
        const fd = fsSync.openSync(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0o600)
        fds.push(fd)
        made.push(tmp)
        fsSync.writeSync(fd, f.data)
        await slicer.pause()
      }
      if (!fsyncSkipped('journal-data')) await mapLimit(fds, SYNC_CONCURRENCY, (fd) => fdatasyncFd(fd))
    } finally {
      for (const fd of fds) fsSync.closeSync(fd)
    }
    await slicer.map(files, (f) => fsSync.renameSync(path.join(dir, tmpName(f.name)), path.join(dir, f.name)))
  } catch (err) {
    // A failed write's temporaries go now; one already renamed is a journal for the caller to settle.
    for (const tmp of made) fsSync.rmSync(tmp, { force: true })
    throw err
  }
  await fsyncDir(dir, 'journal-dir')
}

export async function removeJournals(dirs: Dirs, hosts: Iterable<string>): Promise<void> {
  await removeJournalFiles(dirs, [...hosts].map(hostJournalName))
}

/** Removes journal files by name, one directory fsync; unlinks on the pool, as freeing blocks waits on the disk. */
export async function removeJournalFiles(dirs: Dirs, names: Iterable<string>): Promise<void> {
  await unlinkMany(layoutDir(dirs), names, 'journal-remove-dir')
}

export type JournalRead = { ok: true; journal: Journal } | { ok: false; reason: string }

/** Checks a parsed journal: schema, host against file name, paths against the host's shapes. */
export function checkJournal(raw: unknown, host: string, dirs: Dirs): JournalRead {
  if (!Value.Check(Journal, raw)) {
    const first = Value.Errors(Journal, raw)[0]
    const where = first?.instancePath === '' || first === undefined ? '' : `${first.instancePath}: `
    return { ok: false, reason: `not a journal: ${where}${first?.message ?? 'does not match the journal format'}` }
  }
  if (raw.host !== host) return { ok: false, reason: `names host ${JSON.stringify(raw.host)}, not ${host}` }
  const bad = recordShapeError(raw, dirs)
  if (bad !== null) return { ok: false, reason: bad }
  return { ok: true, journal: raw }
}

type JsonRead = { ok: true; raw: unknown } | { ok: false; reason: string }

function unreadable(err: unknown): JsonRead {
  if (isNotFound(err)) throw err
  return { ok: false, reason: `cannot be read: ${errorMessage(err)}` }
}

function parsed(text: string): JsonRead {
  try {
    return { ok: true, raw: JSON.parse(text) }
  } catch (err) {
    return { ok: false, reason: `is not JSON (${errorMessage(err)})` }
  }
}

async function readJson(dirs: Dirs, name: string): Promise<JsonRead> {
  let text: string
  try {
    text = await readNoFollow(path.join(layoutDir(dirs), name))
  } catch (err) {
    return unreadable(err)
  }
  return parsed(text)
}

/** Reads and checks host's own journal. A missing file throws (ENOENT); anything unreadable is an answer. */
export async function readJournal(dirs: Dirs, host: string): Promise<JournalRead> {
  const read = await readJson(dirs, hostJournalName(host))
  return read.ok ? checkJournal(read.raw, host, dirs) : read
}

/** readJson, synchronously (recovery reads many files in slices). */
export function readJsonSync(dirs: Dirs, name: string): JsonRead {
  let text: string
  try {
    text = readNoFollowSync(path.join(layoutDir(dirs), name))
  } catch (err) {
    return unreadable(err)
  }
  return parsed(text)
}

export interface LayoutListing {
  journals: string[]
  batches: string[]
  holds: string[]
  /** Temporary files a crash left before their rename: never acted on, removed at recovery. */
  temps: string[]
  /** Journal or hold names that are not a valid host: reported, never used as a path. */
  strays: string[]
}

export async function listLayout(dirs: Dirs): Promise<LayoutListing> {
  const out: LayoutListing = { journals: [], batches: [], holds: [], temps: [], strays: [] }
  let names: string[]
  try {
    names = await fs.readdir(layoutDir(dirs))
  } catch (err) {
    if (isNotFound(err)) return out
    throw err
  }
  for (const n of names.sort()) {
    if (isBatchJournalName(n)) {
      out.batches.push(n)
      continue
    }
    for (const [suffix, list] of [
      [JOURNAL_SUFFIX, out.journals],
      [HOLD_SUFFIX, out.holds],
    ] as const) {
      if (n.endsWith(tmpName(suffix))) out.temps.push(n)
      else if (n.endsWith(suffix)) {
        const host = n.slice(0, -suffix.length)
        if (validHost(host)) list.push(host)
        else out.strays.push(n)
      }
    }
  }
  return out
}

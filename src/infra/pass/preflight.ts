// Step 5 of a move (design §3): the source checked without following a
// symlink, and after the rename, the check that what moved is what was
// checked. The walk is the C walk (c-walk.ts) where the build made it, on
// libuv's thread pool; else the same walk in JavaScript, a generator driven
// in slices of the event loop. Both answer the same findings.
import fs from 'node:fs'
import { secondNameReason } from '../../domain/pass-plan.js'
import type { ReasonCode } from '../../domain/reason-codes.js'
import { childPath, shownPath } from '../fsutil.js'
import { cWalk, type CWalk } from './c-walk.js'
import { defaultSlicer, lstatBigSyncOrUndefined, type Slicer } from './sliced-fs.js'

/** Which directory preflight saw: a rename must move that one (design §3 step 7). */
export interface DirIdentity {
  dev: bigint
  ino: bigint
}

/** What preflight found. `held`: a reason the tenant could have caused. */
export type Preflight =
  | { kind: 'ok'; seen: DirIdentity }
  | {
      kind: 'held'
      code: Extract<ReasonCode, 'symlink_source' | 'source_not_directory' | 'second_name' | 'path_too_long'>
      reason: string
    }
  | { kind: 'missing' }

/**
 * The walk of one source, yielding after each entry. The source must be a
 * directory, not a link to one (renaming a link leaves the files where the
 * tenant pointed it), and no file under it may have a second name (a hard
 * link to a neighbour's file would carry it into isolation); the walk stops
 * at the first. Throws on an I/O error: a failure, not a tenant's doing.
 */
function* walk(dir: string): Generator<undefined, Preflight> {
  const st = sourceItself(dir)
  if ('kind' in st) return st
  const queue: WalkPath[] = [dir]
  for (let d = queue.pop(); d !== undefined; d = queue.pop()) {
    const listing = tooLong(() => listed(d))
    if (listing === undefined) return pathTooLong(dir, d)
    for (const e of listing.entries) {
      const p = entryPath(listing.at, e.name)
      if (e.isDirectory()) queue.push(p)
      else if (e.isFile()) {
        const links = tooLong(() => fs.lstatSync(p).nlink)
        if (links === undefined) return pathTooLong(dir, p)
        if (links > 1) return secondName(dir, p, links)
      }
      yield
    }
  }
  return { kind: 'ok', seen: { dev: st.dev, ino: st.ino } }
}

/** The source itself: its lstat when it is a directory, else what preflight says of it. */
function sourceItself(dir: string): fs.BigIntStats | Preflight {
  const st = lstatBigSyncOrUndefined(dir)
  if (st === undefined) return { kind: 'missing' }
  if (st.isSymbolicLink()) return { kind: 'held', code: 'symlink_source', reason: `${dir} is a symlink` }
  if (!st.isDirectory()) return { kind: 'held', code: 'source_not_directory', reason: `${dir} is not a directory` }
  return st
}

/** The hold for a file at p, under the source dir, that has more names than one. */
function secondName(dir: string, p: WalkPath, links: number): Preflight {
  const rel = shownPath(bytesOf(p).subarray(bytesOf(dir).length + 1))
  return { kind: 'held', code: 'second_name', reason: secondNameReason(rel, links) }
}

/**
 * The same walk by the C walk: the source looked at as above, then walked
 * by native/walk.c, which lists and lstats as the generator does, in the
 * same order, and answers the same findings. What it saw is the directory
 * it opened (not through a symlink), the one its walk read.
 */
async function walkInC(dir: string, walkC: CWalk): Promise<Preflight> {
  const st = sourceItself(dir)
  if ('kind' in st) return st
  const found = await walkC(dir)
  if (found.kind === 'second_name') return secondName(dir, found.path, found.links)
  if (found.kind === 'too_long') return pathTooLong(dir, found.path)
  return { kind: 'ok', seen: { dev: found.dev, ino: found.ino } }
}

/**
 * A path as the walk carries it: text while every name on the way is UTF-8,
 * and bytes below a directory with a name that is not (design §2: a name
 * is bytes, and its lossy decoding names nothing).
 */
type WalkPath = string | Buffer

/**
 * A directory's entries, and the path to build theirs from. Read as text,
 * the common case and the cheaper one (a path of bytes costs a copy and a
 * buffer for every entry: 14-21% of a 10,000-tenant walk); a listing in which
 * any name did not decode (U+FFFD stands for its bytes) is read again as
 * bytes, and that directory's subtree walked by bytes. A name that is
 * UTF-8 and spells U+FFFD itself only takes the slower way.
 */
function listed(d: WalkPath): { at: WalkPath; entries: Array<fs.Dirent<string> | fs.Dirent<Buffer>> } {
  if (typeof d === 'string') {
    const entries = fs.readdirSync(d, { withFileTypes: true })
    if (!entries.some((e) => e.name.includes('\uFFFD'))) return { at: d, entries }
  }
  const at = bytesOf(d)
  return { at, entries: fs.readdirSync(at, { withFileTypes: true, encoding: 'buffer' }) }
}

/** A listed entry's path, built as its listing was read: text under text, bytes under bytes. */
function entryPath(at: WalkPath, name: string | Buffer): WalkPath {
  return typeof at === 'string' && typeof name === 'string' ? `${at}/${name}` : childPath(bytesOf(at), bytesOf(name))
}

/** A walk's path as bytes: a text one is UTF-8 through and through (listed), so its encoding is the name itself. */
function bytesOf(p: string | Buffer): Buffer {
  return typeof p === 'string' ? Buffer.from(p, 'utf8') : p
}

/** f's answer, or undefined when a path was longer than the kernel takes (ENAMETOOLONG); any other error throws. */
function tooLong<T>(f: () => T): T | undefined {
  try {
    return f()
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENAMETOOLONG') return undefined
    throw err
  }
}

/**
 * A tree deeper than a path can name (PATH_MAX, 4096 bytes on Linux): a
 * tenant can make one, so it is held with a reason, like a second name,
 * not failed as a disk's fault on every retry. The path is shown by its
 * start and its length: it is longer than any line should be.
 */
function pathTooLong(dir: string, at: WalkPath): Preflight {
  const p = bytesOf(at)
  const rel = p.subarray(bytesOf(dir).length + 1)
  return {
    kind: 'held',
    code: 'path_too_long',
    reason:
      `its tree is deeper than a path can name (ENAMETOOLONG): ` +
      `${shownPath(rel.subarray(0, 80))}… is a path of ${p.length} bytes`,
  }
}

/**
 * Preflight of one source: by the C walk on libuv's pool when it was
 * built, else by the generator on the loop's thread, giving the loop back
 * between slices (sliced-fs.ts). A test names the walk it means (null: the
 * generator).
 */
export async function preflight(
  dir: string,
  slicer: Slicer = defaultSlicer,
  walkC: CWalk | null = cWalk ?? null,
): Promise<Preflight> {
  if (walkC !== null) return walkInC(dir, walkC)
  const steps = walk(dir)
  for (let step = steps.next(); ; step = steps.next()) {
    if (step.done === true) return step.value
    await slicer.pause()
  }
}

/**
 * After a rename: whether what now sits at `at` is the very directory
 * preflight saw (a directory, not a symlink, same device and inode). A
 * tenant that swapped its directory for a symlink, or for another
 * directory, between preflight and the rename got that moved instead
 * (rename(2) moves a link, never what it points at): answers what was
 * found, or undefined when it is the directory preflight saw.
 */
export function swappedSincePreflight(at: string, seen: DirIdentity): string | undefined {
  const st = lstatBigSyncOrUndefined(at)
  if (st === undefined) return 'nothing'
  if (st.isSymbolicLink()) return 'a symlink'
  if (!st.isDirectory()) return 'not a directory'
  if (st.dev !== seen.dev || st.ino !== seen.ino)
    return `another directory (device ${st.dev}, inode ${st.ino}; preflight saw device ${seen.dev}, inode ${seen.ino})`
  return undefined
}

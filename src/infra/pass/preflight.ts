// Step 5 of a move (design §3): the source checked without following a
// symlink, and after the rename, the check that what moved is what was checked.
import fs from 'node:fs'
import { secondNameReason } from '../../domain/pass-plan.js'
import type { ReasonCode } from '../../domain/reason-codes.js'
import { childPath, shownPath } from '../fsutil.js'
import { cWalk, type CWalk } from './c-walk.js'
import { defaultSlicer, type Slicer } from '../../domain/loop-turns.js'
import { lstatBigSyncOrUndefined } from './sliced-fs.js'

/** Which directory preflight saw: a rename must move that one (design §3 step 7). */
export interface DirIdentity {
  dev: bigint
  ino: bigint
}

/** `held`: a reason the tenant could have caused. */
export type Preflight =
  | { kind: 'ok'; seen: DirIdentity }
  | {
      kind: 'held'
      code: Extract<ReasonCode, 'symlink_source' | 'source_not_directory' | 'second_name' | 'path_too_long'>
      reason: string
    }
  | { kind: 'missing' }

/**
 * The walk of one source, yielding per entry. A link as the source would leave the files behind, and a
 * file's second name would carry a neighbour's file into isolation: both hold; an I/O error throws.
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

function sourceItself(dir: string): fs.BigIntStats | Preflight {
  const st = lstatBigSyncOrUndefined(dir)
  if (st === undefined) return { kind: 'missing' }
  if (st.isSymbolicLink()) return { kind: 'held', code: 'symlink_source', reason: `${dir} is a symlink` }
  if (!st.isDirectory()) return { kind: 'held', code: 'source_not_directory', reason: `${dir} is not a directory` }
  return st
}

function secondName(dir: string, p: WalkPath, links: number): Preflight {
  const rel = shownPath(bytesOf(p).subarray(bytesOf(dir).length + 1))
  return { kind: 'held', code: 'second_name', reason: secondNameReason(rel, links) }
}

/** The same walk in native/walk.c. */
async function walkInC(dir: string, walkC: CWalk): Promise<Preflight> {
  const st = sourceItself(dir)
  if ('kind' in st) return st
  const found = await walkC(dir)
  if (found.kind === 'second_name') return secondName(dir, found.path, found.links)
  if (found.kind === 'too_long') return pathTooLong(dir, found.path)
  return { kind: 'ok', seen: { dev: found.dev, ino: found.ino } }
}

/** Text while every name is UTF-8, bytes below one that is not (design §2: a name is bytes). */
type WalkPath = string | Buffer

/** Entries read as text; as bytes when a name did not decode (U+FFFD). */
function listed(d: WalkPath): { at: WalkPath; entries: Array<fs.Dirent<string> | fs.Dirent<Buffer>> } {
  if (typeof d === 'string') {
    const entries = fs.readdirSync(d, { withFileTypes: true })
    if (!entries.some((e) => e.name.includes('\uFFFD'))) return { at: d, entries }
  }
  const at = bytesOf(d)
  return { at, entries: fs.readdirSync(at, { withFileTypes: true, encoding: 'buffer' }) }
}

function entryPath(at: WalkPath, name: string | Buffer): WalkPath {
  return typeof at === 'string' && typeof name === 'string' ? `${at}/${name}` : childPath(bytesOf(at), bytesOf(name))
}

function bytesOf(p: string | Buffer): Buffer {
  return typeof p === 'string' ? Buffer.from(p, 'utf8') : p
}

function tooLong<T>(f: () => T): T | undefined {
  try {
    return f()
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENAMETOOLONG') return undefined
    throw err
  }
}

/** Too deep to name is a tenant's doing: held, not failed on every retry. */
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

/** The C walk where built, else the generator in slices (null: the generator). */
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

/** After a rename: what sits at `at` unless it is what preflight saw (rename(2) moves a link itself). */
export function swappedSincePreflight(at: string, seen: DirIdentity): string | undefined {
  const st = lstatBigSyncOrUndefined(at)
  if (st === undefined) return 'nothing'
  if (st.isSymbolicLink()) return 'a symlink'
  if (!st.isDirectory()) return 'not a directory'
  if (st.dev !== seen.dev || st.ino !== seen.ino)
    return `another directory (device ${st.dev}, inode ${st.ino}; preflight saw device ${seen.dev}, inode ${seen.ino})`
  return undefined
}

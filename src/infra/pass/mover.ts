// The file half of one move (design §3 steps 6–7): set aside what is in
// the way, prepare the destination's parents, rename (preflight, step 5, is
// preflight.ts). Nothing here follows a symlink, and nothing here decides:
// the pass says what to move, these say what they found and did.
import type { Stats } from 'node:fs'
import fs from 'node:fs/promises'
import path from 'node:path'
import type { Mode } from '../../domain/modes.js'
import { nestedRoot, type Dirs } from '../../domain/paths.js'
import type { RowPaths } from '../../domain/schemas.js'
import type { FsyncName } from '../failpoint.js'
import {
  ensureDir,
  fsyncDirs,
  fsyncNamedDirs,
  lstatOrUndefined,
  mapLimit,
  rmdirIfEmpty,
  SYNC_CONCURRENCY,
} from '../fsutil.js'
import { asideHostDir, asideNote, asideStamp } from './holds.js'
import { ensureLayoutDir } from './journal.js'
import {
  ensureDirOffLoop,
  ensureDirSync,
  lstatSyncOrUndefined,
  clearModeBitsSync,
  renameDirSync,
  setDirModeSync,
  unlinkSyncIfPresent,
} from './sliced-fs.js'

export interface Aside {
  /** Where the items went. */
  dir: string
  names: string[]
  note: string
}

async function uniqueDir(base: string): Promise<string> {
  for (let i = 0; ; i++) {
    const dir = i === 0 ? base : `${base}-${i}`
    try {
      await fs.mkdir(dir, { mode: 0o700 })
      return dir
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    }
  }
}

/**
 * Moves every item that exists into `aside/<host>/<stamp>/`, durably (the
 * aside directory and each item's old parent are fsynced), and answers what
 * it moved; undefined when nothing was there.
 */
export async function setAside(
  dirs: Dirs,
  host: string,
  items: readonly string[],
  nowMs: number,
): Promise<Aside | undefined> {
  const found: string[] = []
  for (const p of items) if ((await lstatOrUndefined(p)) !== undefined) found.push(p)
  if (found.length === 0) return undefined
  const layout = await ensureLayoutDir(dirs)
  const asideRoot = path.join(layout, 'aside')
  const hostDir = asideHostDir(dirs, host)
  const made: string[] = []
  if (await ensureDir(asideRoot, 0o700)) made.push(layout)
  if (await ensureDir(hostDir, 0o700)) made.push(asideRoot)
  const stamp = asideStamp(nowMs)
  const dir = await uniqueDir(path.join(hostDir, stamp))
  // Every name on the way to dir is durable before anything is renamed into
  // it: a power cut may keep a rename and lose the mkdir of a directory
  // above it, and what was set aside would be in no place (design §3.5).
  await fsyncDirs([...made, hostDir])
  const names: string[] = []
  for (const p of found) {
    let name = path.basename(p)
    for (let i = 1; names.includes(name); i++) name = `${path.basename(p)}-${i}`
    await fs.rename(p, path.join(dir, name))
    names.push(name)
  }
  await fsyncDirs([dir, ...found.map((p) => path.dirname(p))])
  return { dir, names, note: asideNote(dir, names, path.basename(dir)) }
}

/**
 * The things at a move's destination that the move did not put there:
 * the destination directory itself, a nested root or run directory that
 * is not a directory, and whatever is at the socket path. A stale socket of
 * the stopped instance is returned apart: it holds no data, and is removed.
 */
export function inTheWay(dirs: Dirs, host: string, to: Mode, dest: RowPaths): InTheWay {
  const aside: string[] = []
  const staleSockets: string[] = []
  if (to === 'nested') {
    const root = nestedRoot(dirs, host)
    const rootSt = lstatSyncOrUndefined(root)
    if (rootSt === undefined) return { aside, staleSockets }
    if (!rootSt.isDirectory()) return { aside: [root], staleSockets }
    const run = path.dirname(dest.socket)
    const runSt = lstatSyncOrUndefined(run)
    if (runSt !== undefined && !runSt.isDirectory()) aside.push(run)
  }
  if (lstatSyncOrUndefined(dest.dir) !== undefined) aside.push(dest.dir)
  let sock: Stats | undefined
  try {
    sock = lstatSyncOrUndefined(dest.socket)
  } catch (err) {
    // ENOTDIR: the socket's parent is a file, already in `aside`.
    if ((err as NodeJS.ErrnoException).code !== 'ENOTDIR') throw err
  }
  if (sock?.isSocket() === true) staleSockets.push(dest.socket)
  else if (sock !== undefined) aside.push(dest.socket)
  return { aside, staleSockets }
}

/** What steps 4 and 6 look at before they act (design §3.6): a move's source, when asked, and its destination. */
export interface LookRequest {
  host: string
  to: Mode
  /** The source directory, looked at only when given. */
  from?: string
  dest: RowPaths
}

/** What a look found: no source (only when one was asked about), or what is in the way at the destination. */
export type Look = { kind: 'missing' } | ({ kind: 'found' } & InTheWay)

/** What is in the way at a move's destination (inTheWay). */
export interface InTheWay {
  aside: string[]
  staleSockets: string[]
}

/**
 * Looks at one move, changing nothing (lstats only): what the preflight
 * threads answer for a batch, so the loop's thread makes none of these
 * calls, and acts only on what was found.
 */
export function lookAtMove(dirs: Dirs, req: LookRequest): Look {
  if (req.from !== undefined && lstatSyncOrUndefined(req.from) === undefined) return { kind: 'missing' }
  return { kind: 'found', ...inTheWay(dirs, req.host, req.to, req.dest) }
}

/** Clears what a look found in the way of a move: a stale socket removed, the rest set aside (answered). */
export async function clearFound(dirs: Dirs, host: string, found: InTheWay, nowMs: number): Promise<Aside | undefined> {
  for (const s of found.staleSockets) unlinkSyncIfPresent(s)
  if (found.aside.length === 0) return undefined
  return setAside(dirs, host, found.aside, nowMs)
}

/**
 * Modes of the nested tree (design §2). The root, in the sockets group,
 * grants that group search alone: the edge passes through to `run/` and
 * lists nothing. `run/` is the group's, setgid, so a socket made in it is
 * the group's too.
 */
export const NESTED_ROOT_MODE = 0o710
export const NESTED_RUN_MODE = 0o2770
const SHARED_PARENT_MODE = 0o755

/**
 * What a tenant's directory must not grant once it is a nested `data/`
 * (design §2): anything to anyone outside its owner and group (the edge
 * can search the root above it), and anything to its group when that
 * group is the sockets group (gid). Its owner's bits are the tenant's.
 */
export function edgeBits(gid: number): (st: Stats) => number {
  return (st) => (gid >= 0 && st.gid === gid ? 0o077 : 0o007)
}

/**
 * Takes from a tenant's directory, about to become a nested `data/`, the
 * bits edgeBits names, and answers whether its mode changed: then it must
 * be fsynced before the rename, as run/ is (a mode is its own inode's).
 * A source that is gone, or is not a directory, is left to the rename,
 * which says what it found (missing, or swapped since preflight).
 */
export function closeToEdge(dir: string, gid: number): boolean {
  try {
    return clearModeBitsSync(dir, edgeBits(gid))
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'ELOOP') return false
    throw err
  }
}

/**
 * Makes the destination's parents: `D/nested/<host>` 0710 and its `run/`
 * 2770, both in group gid unless -1, for nested; `D/apps` for flat. Answers the
 * directories that must be fsynced before the rename: those that gained an
 * entry on the way down to the destination's parent, so a power cut cannot
 * keep a renamed directory whose parent it lost. `run/` is not on that
 * path: the fsync of the destination's parent after the rename covers its
 * entry, and modeDirs names it for the fsync its mode needs. The shared
 * parents are made on the loop's thread, before the first await, so hosts
 * prepared at once never race to make them; each host's own two are made
 * on the pool (ensureDirOffLoop).
 */
export async function prepareParents(
  dirs: Dirs,
  host: string,
  to: Mode,
  dest: RowPaths,
  gid: number,
): Promise<string[]> {
  const sync: string[] = []
  if (to === 'flat') {
    const apps = path.dirname(dest.dir)
    if (ensureDirSync(apps, SHARED_PARENT_MODE)) sync.push(path.dirname(apps))
    return sync
  }
  const root = nestedRoot(dirs, host)
  const base = path.dirname(root)
  if (ensureDirSync(base, SHARED_PARENT_MODE)) sync.push(path.dirname(base))
  if (await ensureDirOffLoop(root, NESTED_ROOT_MODE)) sync.push(base)
  setDirModeSync(root, NESTED_ROOT_MODE, gid)
  const run = path.dirname(dest.socket)
  await ensureDirOffLoop(run, NESTED_RUN_MODE)
  setDirModeSync(run, NESTED_RUN_MODE, gid)
  return sync
}

/**
 * rename(2) a directory to a destination that must not exist. rename
 * would silently replace an empty directory there, and that would be a
 * thing the move did not put there, lost rather than set aside.
 */
export function renameDir(from: string, to: string): Promise<void> {
  // The executor's throw is the promise's rejection.
  return new Promise((resolve) => {
    renameDirSync(from, to)
    resolve()
  })
}

/**
 * fsync the parents of a batch's renames, each once: the ones they entered
 * and the ones they left (design §3.5; a directory that is both is fsynced
 * once, as an entered one).
 */
export async function syncParents(pairs: ReadonlyArray<{ from: string; to: string }>): Promise<void> {
  await fsyncNamedDirs(syncPairs(pairs))
}

/** The fsyncs syncParents makes, by name, for a caller that makes them elsewhere (pass-io.ts). */
export function syncPairs(pairs: ReadonlyArray<{ from: string; to: string }>): Array<readonly [string, FsyncName]> {
  return [
    ...pairs.map((p) => [path.dirname(p.to), 'rename-dest-parent'] as const),
    ...pairs.map((p) => [path.dirname(p.from), 'rename-source-parent'] as const),
  ]
}

/**
 * The directories of a destination whose mode prepareParents sets and no
 * fsync of a parent makes durable (a mode is its own inode's): a nested
 * destination's `run/`. The caller fsyncs them with the parents, before the
 * rename, or a power cut could leave the row pointing at a socket
 * directory the edge cannot reach (design §3.5).
 */
export function modeDirs(to: Mode, dest: RowPaths): string[] {
  return to === 'nested' ? [path.dirname(dest.socket)] : []
}

/**
 * After a revert (design §3 step 9): each host's `D/nested/<host>/run/`
 * and then `D/nested/<host>/` removed when empty, and the directories that
 * lost an entry fsynced. rmdir(2) removes only an empty directory and
 * never follows a link; anything left there stays, with its parents.
 * An rmdir frees an inode, which costs more than a pool round trip, so the
 * rmdirs run on the pool, many at once, each host's two in order.
 */
export async function removeEmptyNestedRoots(dirs: Dirs, hosts: readonly string[]): Promise<void> {
  const synced = await mapLimit(hosts, SYNC_CONCURRENCY, async (host) => {
    const root = nestedRoot(dirs, host)
    if ((await lstatOrUndefined(root))?.isDirectory() !== true) return []
    if (!(await rmdirIfEmpty(path.join(root, 'run')))) return []
    return (await rmdirIfEmpty(root)) ? [path.dirname(root)] : [root]
  })
  await fsyncDirs(synced.flat())
}

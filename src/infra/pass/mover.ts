// The file half of one move (design §3 steps 6–7): set aside what is in the
// way, prepare the destination's parents, rename. Nothing here follows a symlink.
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

/** Moves every item that exists into `aside/<host>/<stamp>/`, durably; undefined when nothing was there. */
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
  // Every name on the way to dir is durable before anything is renamed into it: a power cut may keep
  // a rename and lose the mkdir above it (design §3.5).
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

/** What the move did not put at its destination; stale sockets (no data) are answered apart. */
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

/** What steps 4 and 6 look at (design §3.6). */
export interface LookRequest {
  host: string
  to: Mode
  from?: string
  dest: RowPaths
}

export type Look = { kind: 'missing' } | ({ kind: 'found' } & InTheWay)

export interface InTheWay {
  aside: string[]
  staleSockets: string[]
}

export function lookAtMove(dirs: Dirs, req: LookRequest): Look {
  if (req.from !== undefined && lstatSyncOrUndefined(req.from) === undefined) return { kind: 'missing' }
  return { kind: 'found', ...inTheWay(dirs, req.host, req.to, req.dest) }
}

export async function clearFound(dirs: Dirs, host: string, found: InTheWay, nowMs: number): Promise<Aside | undefined> {
  for (const s of found.staleSockets) unlinkSyncIfPresent(s)
  if (found.aside.length === 0) return undefined
  return setAside(dirs, host, found.aside, nowMs)
}

/** Nested modes (design §2): the root lets the sockets group search only; `run/` is the group's, setgid. */
export const NESTED_ROOT_MODE = 0o710
export const NESTED_RUN_MODE = 0o2770
const SHARED_PARENT_MODE = 0o755

/** What a nested `data/` must not grant (design §2): anything to others, or to its group if that is gid's. */
export function edgeBits(gid: number): (st: Stats) => number {
  return (st) => (gid >= 0 && st.gid === gid ? 0o077 : 0o007)
}

/** Takes edgeBits from a future nested `data/`; true when its mode changed, so it needs an fsync. */
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
 * Makes the destination's parents and answers those that gained an entry, to fsync before the rename
 * (design §3.5). Shared parents are made before the first await, so concurrent hosts never race on them.
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

export function renameDir(from: string, to: string): Promise<void> {
  // The executor's throw is the promise's rejection.
  return new Promise((resolve) => {
    renameDirSync(from, to)
    resolve()
  })
}

/** fsyncs each parent of a batch's renames once, entered or left (design §3.5). */
export async function syncParents(pairs: ReadonlyArray<{ from: string; to: string }>): Promise<void> {
  await fsyncNamedDirs(syncPairs(pairs))
}

export function syncPairs(pairs: ReadonlyArray<{ from: string; to: string }>): Array<readonly [string, FsyncName]> {
  return [
    ...pairs.map((p) => [path.dirname(p.to), 'rename-dest-parent'] as const),
    ...pairs.map((p) => [path.dirname(p.from), 'rename-source-parent'] as const),
  ]
}

/** Dirs whose mode no parent's fsync covers (nested `run/`): fsynced before the rename (design §3.5). */
export function modeDirs(to: Mode, dest: RowPaths): string[] {
  return to === 'nested' ? [path.dirname(dest.socket)] : []
}

/** After a revert (design §3 step 9): each host's `run/` and nested root removed when empty, on the pool. */
export async function removeEmptyNestedRoots(dirs: Dirs, hosts: readonly string[]): Promise<void> {
  const synced = await mapLimit(hosts, SYNC_CONCURRENCY, async (host) => {
    const root = nestedRoot(dirs, host)
    if ((await lstatOrUndefined(root))?.isDirectory() !== true) return []
    if (!(await rmdirIfEmpty(path.join(root, 'run')))) return []
    return (await rmdirIfEmpty(root)) ? [path.dirname(root)] : [root]
  })
  await fsyncDirs(synced.flat())
}

// The pass's metadata calls (lstat, readdir, mkdir, rename, unlink, a mode
// set through a handle), made synchronously in short slices that give the
// event loop back between them (design §3.3). On a cached directory such a
// call is cheaper than a pool round trip, and the slice bounds how long a
// wake claim waits. Calls that wait on the disk or make or free an inode
// (fsync, mkdir, rmdir) run on the pool instead.
import fs, { constants, type BigIntStats, type Stats } from 'node:fs'
import { performance } from 'node:perf_hooks'
import { setImmediate as nextTurn } from 'node:timers/promises'

const { O_RDONLY, O_NOFOLLOW, O_DIRECTORY } = constants

/** The longest stretch of synchronous work between two turns of the event loop. */
export const SLICE_MS = 4

/**
 * Hands the event loop back once `budgetMs` of synchronous work has gone by
 * since the last turn it gave. One is shared by every part of a run.
 */
export class Slicer {
  readonly #budgetMs: number
  #since = performance.now()

  constructor(budgetMs = SLICE_MS) {
    this.#budgetMs = budgetMs
  }

  /** Yields to the event loop when this slice's budget is spent; otherwise returns at once. */
  async pause(): Promise<void> {
    if (performance.now() - this.#since < this.#budgetMs) return
    await nextTurn()
    this.#since = performance.now()
  }

  /** Runs fn over items in order, pausing between them; answers the results in order. */
  async map<T, R>(items: readonly T[], fn: (item: T, i: number) => Promise<R> | R): Promise<R[]> {
    const out: R[] = []
    for (const [i, item] of items.entries()) {
      out.push(await fn(item, i))
      await this.pause()
    }
    return out
  }
}

/** A slicer for callers that bring none (tests, single moves). */
export const defaultSlicer = new Slicer()

/** lstat without following, or undefined when nothing is there. */
export function lstatSyncOrUndefined(p: string | Buffer): Stats | undefined {
  return fs.lstatSync(p, { throwIfNoEntry: false })
}

/** lstat with device and inode as bigints, or undefined when nothing is there. */
export function lstatBigSyncOrUndefined(p: string): BigIntStats | undefined {
  return fs.lstatSync(p, { bigint: true, throwIfNoEntry: false })
}

/** Makes dir (one level) with mode when absent; answers whether it made it. A non-directory there is refused. */
export function ensureDirSync(dir: string, mode: number): boolean {
  // Looked at first: most parents exist already (D/nested, D/apps), and a
  // failed mkdir costs an exception where lstat costs none.
  const there = lstatSyncOrUndefined(dir)
  if (there !== undefined) {
    if (!there.isDirectory())
      throw new Error(`${dir} is ${there.isSymbolicLink() ? 'a symlink' : 'not a directory'}; refusing to use it`)
    return false
  }
  try {
    fs.mkdirSync(dir, { mode })
    return true
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
  }
  const st = fs.lstatSync(dir)
  if (!st.isDirectory())
    throw new Error(`${dir} is ${st.isSymbolicLink() ? 'a symlink' : 'not a directory'}; refusing to use it`)
  return false
}

/**
 * ensureDirSync with its mkdir on the thread pool: a mkdir allocates an
 * inode and waits in the filesystem's journal behind the previous batch's
 * fsyncs. The look first is made on the loop's thread, where it is cheap.
 */
export async function ensureDirOffLoop(dir: string, mode: number): Promise<boolean> {
  const there = lstatSyncOrUndefined(dir)
  if (there === undefined) {
    try {
      await fs.promises.mkdir(dir, { mode })
      return true
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    }
  }
  const st = there ?? fs.lstatSync(dir)
  if (!st.isDirectory())
    throw new Error(`${dir} is ${st.isSymbolicLink() ? 'a symlink' : 'not a directory'}; refusing to use it`)
  return false
}

/** Sets a directory's mode (and group, unless gid is -1) through a handle opened without following a symlink. */
export function setDirModeSync(dir: string, mode: number, gid = -1): void {
  const fd = fs.openSync(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
  try {
    if (gid >= 0) fs.fchownSync(fd, -1, gid)
    // After the chown: changing a group clears setgid on some systems.
    fs.fchmodSync(fd, mode)
  } finally {
    fs.closeSync(fd)
  }
}

/**
 * Gives a directory mode (and group gid, unless -1) when its own, read
 * through a handle opened without following a symlink, differ; answers
 * whether anything changed. Both already as asked: no chown, no chmod.
 */
export function holdDirModeSync(dir: string, mode: number, gid = -1): boolean {
  const fd = fs.openSync(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
  try {
    const st = fs.fstatSync(fd)
    const regroup = gid >= 0 && st.gid !== gid
    if (!regroup && (st.mode & 0o7777) === mode) return false
    if (regroup) fs.fchownSync(fd, -1, gid)
    // After the chown: changing a group clears setgid on some systems.
    fs.fchmodSync(fd, mode)
    return true
  } finally {
    fs.closeSync(fd)
  }
}

/**
 * Clears from a directory's mode the bits `bits` answers for it (from its
 * own stat), through a handle opened without following a symlink; answers
 * whether the mode changed. None of them set: no chmod.
 */
export function clearModeBitsSync(dir: string, bits: (st: Stats) => number): boolean {
  const fd = fs.openSync(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
  try {
    const st = fs.fstatSync(fd)
    const mode = st.mode & 0o7777
    const closed = mode & ~bits(st)
    if (closed === mode) return false
    fs.fchmodSync(fd, closed)
    return true
  } finally {
    fs.closeSync(fd)
  }
}

/** rename(2) to a destination that must not exist: rename would silently replace an empty directory there. */
export function renameDirSync(from: string, to: string): void {
  if (lstatSyncOrUndefined(to) !== undefined)
    throw new Error(`${to} appeared after it was cleared; not renaming over it`)
  fs.renameSync(from, to)
}

/** unlink(2); answers false when nothing was there. */
export function unlinkSyncIfPresent(p: string): boolean {
  try {
    fs.unlinkSync(p)
    return true
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false
    throw err
  }
}

// The pass's metadata calls, made synchronously in short slices that give
// the event loop back between them (design §3.3): on a cached directory each
// is cheaper than a pool round trip. Calls that wait on the disk run on the pool.
import fs, { constants, type BigIntStats, type Stats } from 'node:fs'

const { O_RDONLY, O_NOFOLLOW, O_DIRECTORY } = constants

export function lstatSyncOrUndefined(p: string | Buffer): Stats | undefined {
  return fs.lstatSync(p, { throwIfNoEntry: false })
}

export function lstatBigSyncOrUndefined(p: string): BigIntStats | undefined {
  return fs.lstatSync(p, { bigint: true, throwIfNoEntry: false })
}

/** mkdir of one level when absent (true when made); refuses a non-directory. */
export function ensureDirSync(dir: string, mode: number): boolean {
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

/** ensureDirSync with its mkdir on the pool: a mkdir allocates an inode and waits behind fsyncs. */
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

/** Sets a directory's mode (and group, unless -1) through a handle that follows no symlink. */
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

/** setDirModeSync only when mode or group differ; true when it changed either. */
export function holdDirModeSync(dir: string, mode: number, gid = -1): boolean {
  const fd = fs.openSync(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
  try {
    const st = fs.fstatSync(fd)
    const regroup = gid >= 0 && st.gid !== gid
    if (!regroup && (st.mode & 0o7777) === mode) return false
    if (regroup) fs.fchownSync(fd, -1, gid)
    // After the chown, as above.
    fs.fchmodSync(fd, mode)
    return true
  } finally {
    fs.closeSync(fd)
  }
}

/** Clears the bits `bits` names from a directory's mode; true when it changed. */
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

/** unlink(2); false when nothing was there. */
export function unlinkSyncIfPresent(p: string): boolean {
  try {
    fs.unlinkSync(p)
    return true
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false
    throw err
  }
}

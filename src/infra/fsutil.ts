// The few filesystem moves the layout pass is built from, none of them
// following a symlink. A tenant controls what is inside its directory, and a
// link it planted must never turn a chmod, an fsync or a write of ours
// into one on a file it could not otherwise reach.
import fsSync, { constants, type Stats } from 'node:fs'
import fs from 'node:fs/promises'
import path from 'node:path'
import { promisify } from 'node:util'
import { fsyncSkipped, type FsyncName } from './failpoint.js'

const { O_RDONLY, O_WRONLY, O_CREAT, O_TRUNC, O_NOFOLLOW, O_NONBLOCK, O_DIRECTORY } = constants

function code(err: unknown): string | undefined {
  return (err as NodeJS.ErrnoException | undefined)?.code
}

export function isNotFound(err: unknown): boolean {
  return code(err) === 'ENOENT'
}

/** lstat, or undefined when nothing is there. */
export async function lstatOrUndefined(p: string): Promise<Stats | undefined> {
  try {
    return await fs.lstat(p)
  } catch (err) {
    if (isNotFound(err)) return undefined
    throw err
  }
}

/** Whether anything (a file, a directory, a dangling symlink) is at p. */
export async function present(p: string): Promise<boolean> {
  return (await lstatOrUndefined(p)) !== undefined
}

/**
 * A path under dir, built from bytes: a name the kernel allows need not be
 * UTF-8, and a string path would name its lossy decoding instead (design §2).
 */
export function childPath(dir: Buffer, name: Buffer): Buffer {
  return Buffer.concat([dir, SLASH, name])
}

const SLASH = Buffer.from('/')

/** A path of bytes as a reason shows it: as text where it is UTF-8, else with each byte that is not escaped as \xNN. */
export function shownPath(p: Buffer): string {
  const text = p.toString('utf8')
  if (Buffer.from(text, 'utf8').equals(p)) return text
  return [...p]
    .map((b) =>
      b >= 0x20 && b < 0x7f && b !== 0x5c ? String.fromCharCode(b) : `\\x${b.toString(16).padStart(2, '0')}`,
    )
    .join('')
}

/** rmdir(2): true when dir is gone (removed, or never there), false when something keeps it. */
export async function rmdirIfEmpty(dir: string): Promise<boolean> {
  try {
    await fs.rmdir(dir)
    return true
  } catch (err) {
    const c = code(err)
    if (c === 'ENOENT') return true
    if (c === 'ENOTEMPTY' || c === 'EEXIST' || c === 'ENOTDIR') return false
    throw err
  }
}

/** Runs fn over items, at most limit at a time, keeping order in the answer. */
export async function mapLimit<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T, i: number) => Promise<R>,
): Promise<R[]> {
  const out = new Array<R>(items.length)
  let next = 0
  let failed = false
  const worker = async (): Promise<void> => {
    while (next < items.length && !failed) {
      const i = next++
      try {
        out[i] = await fn(items[i] as T, i)
      } catch (err) {
        failed = true
        throw err
      }
    }
  }
  // Every worker is waited for before the first error is thrown: a caller
  // that goes on after a failure must not do so while calls are in flight.
  const settled = await Promise.allSettled(Array.from({ length: Math.min(limit, items.length) }, worker))
  const rejected = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected')
  if (rejected !== undefined) throw rejected.reason
  return out
}

/**
 * How many fsyncs run at once. The kernel folds concurrent ones into one
 * journal commit and one flush of the disk's cache, so a batch's thousand
 * directory fsyncs cost a few flushes instead of a thousand (design §3.3).
 * They run on libuv's thread pool, which must be this large for them all
 * to be in flight: the agent is started with UV_THREADPOOL_SIZE=64
 * (threadPoolSize).
 */
export const SYNC_CONCURRENCY = 64

/**
 * The size of libuv's thread pool in a process started with env, by
 * libuv's own rule (an unsigned atoi): UV_THREADPOOL_SIZE as an integer, 1
 * for a value that is not one or is 0, 1024 at most (and for a negative
 * one); 4 when unset. Read at the pool's first
 * use, before any code of ours runs: only the environment node is started
 * with can set it.
 */
export function threadPoolSize(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.UV_THREADPOOL_SIZE
  if (raw === undefined) return 4
  const n = Number.parseInt(raw, 10)
  if (!Number.isFinite(n) || n === 0) return 1
  return n < 0 ? 1024 : Math.min(n, 1024)
}

/**
 * fsync a directory, so the entries created, renamed or removed in it are
 * on disk. name says which of the move's fsyncs it is (design §3.5), for a
 * test that takes it out (failpoint.ts); unnamed ones are never skipped.
 */
export async function fsyncDir(dir: string, name?: FsyncName): Promise<void> {
  if (fsyncSkipped(name)) return
  // Opening and closing a directory are cheap metadata calls, made
  // synchronously; only the fsync waits on the disk.
  const fd = fsSync.openSync(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
  try {
    await fsyncFd(fd)
  } finally {
    fsSync.closeSync(fd)
  }
}

const fsyncFd = promisify(fsSync.fsync)

/** fdatasync of an open descriptor, waiting on libuv's threadpool rather than the calling thread. */
export const fdatasyncFd = promisify(fsSync.fdatasync)

/** fsync each distinct directory once (name: as fsyncDir). */
export async function fsyncDirs(dirs: Iterable<string>, name?: FsyncName): Promise<void> {
  await mapLimit([...new Set(dirs)], SYNC_CONCURRENCY, (dir) => fsyncDir(dir, name))
}

/** fsync each distinct directory once, all in one round, each under the first name it is given (as fsyncDir). */
export async function fsyncNamedDirs(dirs: Iterable<readonly [string, FsyncName | undefined]>): Promise<void> {
  const named = new Map<string, FsyncName | undefined>()
  for (const [dir, name] of dirs) if (!named.has(dir)) named.set(dir, name)
  await mapLimit([...named], SYNC_CONCURRENCY, ([dir, name]) => fsyncDir(dir, name))
}

/** Writes data to file (created or truncated, never through a symlink) and fsyncs it (name: as fsyncDir). */
export async function writeDurable(file: string, data: string, mode = 0o600, name?: FsyncName): Promise<void> {
  const fh = await fs.open(file, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, mode)
  try {
    await fh.writeFile(data)
    if (!fsyncSkipped(name)) await fh.sync()
  } finally {
    await fh.close()
  }
}

export interface NamedData {
  /** The file's name inside the directory. */
  name: string
  data: string
}

/** The temporary name a file is written under before it is renamed into place. */
export function tmpName(name: string): string {
  return `${name}.tmp`
}

/** Which of the move's fsyncs a group commit's two are (design §3.5), for a test that takes one out. */
export interface SyncNames {
  data?: FsyncName
  dir?: FsyncName
}

/**
 * Writes many files into dir atomically with one directory fsync (group
 * commit): each is written to its temporary name and fsynced, then all are
 * renamed into place, then dir is fsynced once. A crash leaves every file
 * either absent, or whole; never half-written under its real name.
 */
export async function atomicWriteMany(
  dir: string,
  files: readonly NamedData[],
  mode = 0o600,
  names: SyncNames = {},
): Promise<void> {
  if (files.length === 0) return
  await mapLimit(files, SYNC_CONCURRENCY, (f) =>
    writeDurable(path.join(dir, tmpName(f.name)), f.data, mode, names.data),
  )
  for (const f of files) await fs.rename(path.join(dir, tmpName(f.name)), path.join(dir, f.name))
  await fsyncDir(dir, names.dir)
}

/** atomicWriteMany for one file. */
export async function atomicWrite(file: string, data: string, mode = 0o600): Promise<void> {
  await atomicWriteMany(path.dirname(file), [{ name: path.basename(file), data }], mode)
}

/** Removes names from dir (absent ones are fine) with one directory fsync (syncName: as fsyncDir). */
export async function unlinkMany(dir: string, names: Iterable<string>, syncName?: FsyncName): Promise<void> {
  const removed = await mapLimit([...names], SYNC_CONCURRENCY, async (n) => {
    try {
      await fs.unlink(path.join(dir, n))
      return true
    } catch (err) {
      if (isNotFound(err)) return false
      throw err
    }
  })
  if (removed.includes(true)) await fsyncDir(dir, syncName)
}

/**
 * Makes dir (one level) with mode when absent. Answers whether it made it,
 * so the caller knows the parent needs an fsync. Throws when something
 * other than a directory is there: a symlink in its place is never used.
 */
export async function ensureDir(dir: string, mode: number): Promise<boolean> {
  try {
    await fs.mkdir(dir, { mode })
    return true
  } catch (err) {
    if (code(err) !== 'EEXIST') throw err
  }
  const st = await fs.lstat(dir)
  if (!st.isDirectory())
    throw new Error(`${dir} is ${st.isSymbolicLink() ? 'a symlink' : 'not a directory'}; refusing to use it`)
  return false
}

/**
 * Sets a directory's mode (and group, unless gid is -1) through a handle
 * opened without following a symlink: chmod(2) by path would follow one.
 */
export async function setDirMode(dir: string, mode: number, gid = -1): Promise<void> {
  const fh = await fs.open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
  try {
    if (gid >= 0) await fh.chown(-1, gid)
    // After the chown: changing a group clears setgid on some systems.
    await fh.chmod(mode)
  } finally {
    await fh.close()
  }
}

/** The most readNoFollow reads: journals, hold markers and grace records are a few KB. */
export const READ_LIMIT_BYTES = 1 << 20

/**
 * Reads a small file of ours as UTF-8 without following a symlink in its
 * place. The open never blocks (O_NONBLOCK: a FIFO planted under the name
 * must not hold the leg until someone writes to it), and anything but a
 * regular file of at most READ_LIMIT_BYTES is refused, naming what is there.
 */
export async function readNoFollow(file: string): Promise<string> {
  const fh = await fs.open(file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK)
  try {
    const st = await fh.stat()
    if (!st.isFile()) throw new Error(`it is ${kindOf(st)}, not a regular file`)
    if (st.size > READ_LIMIT_BYTES)
      throw new Error(`it is ${st.size} bytes, over the ${READ_LIMIT_BYTES} a record of ours can be`)
    return await fh.readFile('utf8')
  } finally {
    await fh.close()
  }
}

/**
 * readNoFollow, synchronously: for recovery, which reads many small files
 * in slices of the event loop (a round trip of the loop for each open,
 * stat, read and close would cost more than the reads).
 */
export function readNoFollowSync(file: string): string {
  const fd = fsSync.openSync(file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK)
  try {
    const st = fsSync.fstatSync(fd)
    if (!st.isFile()) throw new Error(`it is ${kindOf(st)}, not a regular file`)
    if (st.size > READ_LIMIT_BYTES)
      throw new Error(`it is ${st.size} bytes, over the ${READ_LIMIT_BYTES} a record of ours can be`)
    return fsSync.readFileSync(fd, 'utf8')
  } finally {
    fsSync.closeSync(fd)
  }
}

/** What a non-regular entry is, in words for a refusal. */
export function kindOf(st: Stats): string {
  if (st.isDirectory()) return 'a directory'
  if (st.isSymbolicLink()) return 'a symlink'
  if (st.isFIFO()) return 'a FIFO'
  if (st.isSocket()) return 'a socket'
  if (st.isBlockDevice() || st.isCharacterDevice()) return 'a device'
  return 'a regular file'
}

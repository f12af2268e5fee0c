// The few filesystem moves the layout pass is built from, none of them following a symlink. A link a tenant planted
// must never aim a chmod, fsync or write of ours at a file it could not otherwise reach.
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

export async function lstatOrUndefined(p: string): Promise<Stats | undefined> {
  try {
    return await fs.lstat(p)
  } catch (err) {
    if (isNotFound(err)) return undefined
    throw err
  }
}

export async function present(p: string): Promise<boolean> {
  return (await lstatOrUndefined(p)) !== undefined
}

/** Bytes, not a string: a name need not be UTF-8 (design §2). */
export function childPath(dir: Buffer, name: Buffer): Buffer {
  return Buffer.concat([dir, SLASH, name])
}

const SLASH = Buffer.from('/')

/** Text where UTF-8, else unprintables as \xNN. */
export function shownPath(p: Buffer): string {
  const text = p.toString('utf8')
  if (Buffer.from(text, 'utf8').equals(p)) return text
  return [...p]
    .map((b) =>
      b >= 0x20 && b < 0x7f && b !== 0x5c ? String.fromCharCode(b) : `\\x${b.toString(16).padStart(2, '0')}`,
    )
    .join('')
}

/** false when something keeps dir. */
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
  // All settle before the first error is thrown: a caller must not go on with calls in flight.
  const settled = await Promise.allSettled(Array.from({ length: Math.min(limit, items.length) }, worker))
  const rejected = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected')
  if (rejected !== undefined) throw rejected.reason
  return out
}

/** Concurrent fsyncs share one journal commit (design §3.3), given libuv's pool this large (threadPoolSize). */
export const SYNC_CONCURRENCY = 64

/** By libuv's own rule; only node's starting environment sets it. */
export function threadPoolSize(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.UV_THREADPOOL_SIZE
  if (raw === undefined) return 4
  const n = Number.parseInt(raw, 10)
  if (!Number.isFinite(n) || n === 0) return 1
  return n < 0 ? 1024 : Math.min(n, 1024)
}

/** name lets a test skip it (failpoint.ts, design §3.5). */
export async function fsyncDir(dir: string, name?: FsyncName): Promise<void> {
  if (fsyncSkipped(name)) return
  // Only the fsync waits on the disk.
  const fd = fsSync.openSync(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
  try {
    await fsyncFd(fd)
  } finally {
    fsSync.closeSync(fd)
  }
}

const fsyncFd = promisify(fsSync.fsync)

export const fdatasyncFd = promisify(fsSync.fdatasync)

export async function fsyncDirs(dirs: Iterable<string>, name?: FsyncName): Promise<void> {
  await mapLimit([...new Set(dirs)], SYNC_CONCURRENCY, (dir) => fsyncDir(dir, name))
}

/** Each under the first name given. */
export async function fsyncNamedDirs(dirs: Iterable<readonly [string, FsyncName | undefined]>): Promise<void> {
  const named = new Map<string, FsyncName | undefined>()
  for (const [dir, name] of dirs) if (!named.has(dir)) named.set(dir, name)
  await mapLimit([...named], SYNC_CONCURRENCY, ([dir, name]) => fsyncDir(dir, name))
}

/** Never through a symlink. */
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
  name: string
  data: string
}

export function tmpName(name: string): string {
  return `${name}.tmp`
}

/** For a test to take out (design §3.5). */
export interface SyncNames {
  data?: FsyncName
  dir?: FsyncName
}

/** Group commit: files fsynced under tmpName, renamed, dir fsynced once; a crash leaves each absent or whole. */
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

export async function atomicWrite(file: string, data: string, mode = 0o600): Promise<void> {
  await atomicWriteMany(path.dirname(file), [{ name: path.basename(file), data }], mode)
}

/** One directory fsync; absent names are fine. */
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

/** true when made (its parent needs an fsync); throws on a non-directory or symlink. */
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

/** chmod(2) by path would follow a symlink. */
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

/** Larger is not a record of ours. */
export const READ_LIMIT_BYTES = 1 << 20

/** Never through a symlink; O_NONBLOCK, so a planted FIFO cannot hold the leg. */
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

/** For recovery: a loop round trip per call would cost more than its small reads. */
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

export function kindOf(st: Stats): string {
  if (st.isDirectory()) return 'a directory'
  if (st.isSymbolicLink()) return 'a symlink'
  if (st.isFIFO()) return 'a FIFO'
  if (st.isSocket()) return 'a socket'
  if (st.isBlockDevice() || st.isCharacterDevice()) return 'a device'
  return 'a regular file'
}

// The file work of a move's steps 6 and 7 (design §3.6): the destinations'
// parents made, the fsyncs of a batch, and the renames with their check
// against what preflight saw. It decides nothing: it is handed hosts the
// loop's thread has fenced already, does the calls in the order given, and
// answers what each did. The same functions run on the loop's thread in
// slices (tests, a pass given no thread) or on the files thread
// (files-thread.ts), so the system calls of a move are the same either way.
import type { Mode } from '../../domain/modes.js'
import type { Dirs } from '../../domain/paths.js'
import type { RowPaths } from '../../domain/schemas.js'
import { errorMessage } from '../../errors.js'
import type { FsyncName } from '../failpoint.js'
import { fsyncNamedDirs, mapLimit, SYNC_CONCURRENCY } from '../fsutil.js'
import { closeToEdge, modeDirs, prepareParents } from './mover.js'
import { swappedSincePreflight, type DirIdentity } from './preflight.js'
import { renameDirSync, type Slicer } from './sliced-fs.js'

/** An error as it crosses threads: its message and errno code, so a caller can still decide by the code. */
export interface FileError {
  message: string
  code?: string
}

export function fileError(err: unknown): FileError {
  const code = (err as NodeJS.ErrnoException | undefined)?.code
  return typeof code === 'string' ? { message: errorMessage(err), code } : { message: errorMessage(err) }
}

/** The error a FileError stands for, with its code. */
export function fromFileError(e: FileError): NodeJS.ErrnoException {
  const err: NodeJS.ErrnoException = new Error(e.message)
  if (e.code !== undefined) err.code = e.code
  return err
}

/** One destination to prepare (step 6), and the directory that moves there. */
export interface PrepareItem {
  host: string
  to: Mode
  /** The source directory: closed to the edge before it is renamed nested (closeToEdge). */
  from: string
  dest: RowPaths
}

/** What a preparation answered: the directories to fsync before the renames, or why it failed. */
export type Prepared = { ok: true; sync: Array<readonly [string, FsyncName]> } | { ok: false; err: FileError }

/** One rename of step 7: from to dest, then checked against the directory preflight saw (seen). */
export interface RenameItem {
  host: string
  from: string
  dest: string
  seen: DirIdentity | undefined
}

/**
 * How far a run of renames got: the first `done` were renamed and checked.
 * It stops at the first that is not a clean move: `failed`, the rename
 * failed (nothing moved); `swapped`, it moved what preflight did not see
 * (found); `fault`, a failpoint after a clean rename threw (design §3.4).
 */
export interface RenameRun {
  done: number
  stop?: { kind: 'failed'; err: FileError } | { kind: 'swapped'; found: string } | { kind: 'fault'; err: FileError }
}

/** The file work of steps 6 and 7, on whichever thread does it. */
export interface PassFiles {
  prepare(dirs: Dirs, items: readonly PrepareItem[], gid: number): Promise<Prepared[]>
  fsync(dirs: ReadonlyArray<readonly [string, FsyncName]>): Promise<void>
  rename(items: readonly RenameItem[]): Promise<RenameRun>
  /** Ends a thread the work runs on, if any; a later call starts another. */
  close?(): void
}

/**
 * The work itself. failpoint is the pass's hook for `after-rename:<host>`,
 * reached after each clean rename; pause gives the thread's event loop back
 * (the loop's thread) or does nothing (the files thread).
 */
export function filesWork(failpoint: ((step: string) => void) | undefined, pause: () => Promise<void>): PassFiles {
  return {
    async prepare(dirs, items, gid) {
      return mapLimit(items, SYNC_CONCURRENCY, async (item): Promise<Prepared> => {
        try {
          const parents = await prepareParents(dirs, item.host, item.to, item.dest, gid)
          const closed = item.to === 'nested' && closeToEdge(item.from, gid)
          return {
            ok: true,
            sync: [
              ...parents.map((dir) => [dir, 'prepare-parents'] as const),
              ...modeDirs(item.to, item.dest).map((dir) => [dir, 'run-mode'] as const),
              ...(closed ? [[item.from, 'run-mode'] as const] : []),
            ],
          }
        } catch (err) {
          return { ok: false, err: fileError(err) }
        }
      })
    },
    fsync: (dirs) => fsyncNamedDirs(dirs),
    async rename(items) {
      for (const [i, item] of items.entries()) {
        try {
          renameDirSync(item.from, item.dest)
        } catch (err) {
          return { done: i, stop: { kind: 'failed', err: fileError(err) } }
        }
        const found =
          item.seen === undefined ? 'a directory preflight did not see' : swappedSincePreflight(item.dest, item.seen)
        if (found !== undefined) return { done: i, stop: { kind: 'swapped', found } }
        try {
          failpoint?.(`after-rename:${item.host}`)
        } catch (err) {
          return { done: i + 1, stop: { kind: 'fault', err: fileError(err) } }
        }
        await pause()
      }
      return { done: items.length }
    },
  }
}

/** The file work on the loop's thread, in slices. */
export function slicedFiles(slicer: Slicer, failpoint: ((step: string) => void) | undefined): PassFiles {
  return filesWork(failpoint, () => slicer.pause())
}

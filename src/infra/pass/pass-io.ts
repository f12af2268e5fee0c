// The pass's one I/O port (design §3.6): the walk of step 5, the looks of
// steps 4 and 6, the parents of step 6, the checked renames of step 7, and a
// batch's fsyncs. It decides nothing: given fenced hosts, it makes the calls
// in order and answers what each did. The walk runs on libuv's pool
// (c-walk.ts), metadata calls in slices on the loop (sliced-fs.ts), calls
// that wait on the disk on the pool. Built only through PassContext, so tests
// run what production runs.
import os from 'node:os'
import type { Mode } from '../../domain/modes.js'
import type { Dirs } from '../../domain/paths.js'
import type { RowPaths } from '../../domain/schemas.js'
import { asError } from '../../errors.js'
import type { FsyncName } from '../failpoint.js'
import { fsyncNamedDirs, mapLimit, SYNC_CONCURRENCY } from '../fsutil.js'
import { closeToEdge, lookAtMove, modeDirs, prepareParents, type Look, type LookRequest } from './mover.js'
import { preflight, swappedSincePreflight, type DirIdentity, type Preflight } from './preflight.js'
import { renameDirSync, type Slicer } from './sliced-fs.js'

/**
 * Sources walked at once: one a core, at most 4. The C walk runs on
 * libuv's pool, so walks take the cores the loop's thread leaves (design
 * §3.3); the walk in JavaScript takes turns on the loop's thread, where
 * more at once would only interleave.
 */
export const WALKS_AT_ONCE = Math.max(1, Math.min(4, os.availableParallelism()))

/** What each source's walk found, in order, or the error it ended with. */
export type Walked = Array<Preflight | Error>

/** What each move's look found, in order, or the error it ended with. */
export type Looked = Array<Look | Error>

/** One destination to prepare (step 6), and the directory that moves there. */
export interface PrepareItem {
  host: string
  to: Mode
  /** The source directory: closed to the edge before it is renamed nested (closeToEdge). */
  from: string
  dest: RowPaths
}

/** What a preparation answered: the directories to fsync before the renames, or why it failed. */
export type Prepared = { ok: true; sync: Array<readonly [string, FsyncName]> } | { ok: false; err: Error }

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
  stop?:
    { kind: 'failed'; err: NodeJS.ErrnoException } | { kind: 'swapped'; found: string } | { kind: 'fault'; err: Error }
}

/** The pass's I/O: walk, look, prepare, rename, fsync. walk and look never reject: an error is the answer. */
export interface PassIo {
  walk(sources: readonly string[]): Promise<Walked>
  look(dirs: Dirs, looks: readonly LookRequest[]): Promise<Looked>
  prepare(dirs: Dirs, items: readonly PrepareItem[], gid: number): Promise<Prepared[]>
  rename(items: readonly RenameItem[]): Promise<RenameRun>
  fsync(dirs: ReadonlyArray<readonly [string, FsyncName]>): Promise<void>
}

/**
 * The port. slicer is the run's, shared by every part of it; failpoint is
 * the pass's hook for `after-rename:<host>`, reached after each clean
 * rename.
 */
export function passIo(slicer: Slicer, failpoint: ((step: string) => void) | undefined): PassIo {
  return {
    walk: (sources) => mapLimit(sources, WALKS_AT_ONCE, (dir) => preflight(dir, slicer).catch(asError)),
    look: (dirs, looks) =>
      slicer.map(looks, (req) => {
        try {
          return lookAtMove(dirs, req)
        } catch (err) {
          return asError(err)
        }
      }),
    prepare: (dirs, items, gid) =>
      mapLimit(items, SYNC_CONCURRENCY, async (item): Promise<Prepared> => {
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
          return { ok: false, err: asError(err) }
        }
      }),
    fsync: (dirs) => fsyncNamedDirs(dirs),
    async rename(items) {
      for (const [i, item] of items.entries()) {
        try {
          renameDirSync(item.from, item.dest)
        } catch (err) {
          return { done: i, stop: { kind: 'failed', err: err as NodeJS.ErrnoException } }
        }
        const found =
          item.seen === undefined ? 'a directory preflight did not see' : swappedSincePreflight(item.dest, item.seen)
        if (found !== undefined) return { done: i, stop: { kind: 'swapped', found } }
        try {
          failpoint?.(`after-rename:${item.host}`)
        } catch (err) {
          return { done: i + 1, stop: { kind: 'fault', err: asError(err) } }
        }
        await slicer.pause()
      }
      return { done: items.length }
    },
  }
}

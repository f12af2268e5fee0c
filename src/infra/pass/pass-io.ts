// The pass's one I/O port (design §3.6): the walk of step 5, the looks of
// steps 4 and 6, the parents of step 6, the checked renames of step 7, and a
// batch's fsyncs. It decides nothing, and is built only through PassContext,
// so tests run what production runs.
import os from 'node:os'
import type { Mode } from '../../domain/modes.js'
import type { Dirs } from '../../domain/paths.js'
import type { RowPaths } from '../../domain/schemas.js'
import { asError } from '../../errors.js'
import type { FsyncName } from '../failpoint.js'
import { fsyncNamedDirs, mapLimit, SYNC_CONCURRENCY } from '../fsutil.js'
import { closeToEdge, lookAtMove, modeDirs, prepareParents, type Look, type LookRequest } from './mover.js'
import { preflight, swappedSincePreflight, type DirIdentity, type Preflight } from './preflight.js'
import type { Slicer } from '../../domain/loop-turns.js'
import { renameDirSync } from './sliced-fs.js'

/** One walk a core, at most 4: the C walk takes the cores the loop's thread leaves (design §3.3). */
export const WALKS_AT_ONCE = Math.max(1, Math.min(4, os.availableParallelism()))

export type Walked = Array<Preflight | Error>

export type Looked = Array<Look | Error>

export interface PrepareItem {
  host: string
  to: Mode
  /** Closed to the edge before it is renamed nested (closeToEdge). */
  from: string
  dest: RowPaths
}

export type Prepared = { ok: true; sync: Array<readonly [string, FsyncName]> } | { ok: false; err: Error }

/** One rename of step 7, checked against what preflight saw (seen). */
export interface RenameItem {
  host: string
  from: string
  dest: string
  seen: DirIdentity | undefined
}

/** How far renames got: the first `done` are clean; stop says why the next is not (design §3.4). */
export interface RenameRun {
  done: number
  stop?:
    { kind: 'failed'; err: NodeJS.ErrnoException } | { kind: 'swapped'; found: string } | { kind: 'fault'; err: Error }
}

/** walk and look never reject: an error is the answer. */
export interface PassIo {
  walk(sources: readonly string[]): Promise<Walked>
  look(dirs: Dirs, looks: readonly LookRequest[]): Promise<Looked>
  prepare(dirs: Dirs, items: readonly PrepareItem[], gid: number): Promise<Prepared[]>
  rename(items: readonly RenameItem[]): Promise<RenameRun>
  fsync(dirs: ReadonlyArray<readonly [string, FsyncName]>): Promise<void>
}

/** The port; failpoint is reached after each clean rename (`after-rename:<host>`). */
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
          await slicer.pause()
          const parents = await prepareParents(dirs, item.host, item.to, item.dest, gid)
          await slicer.pause()
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

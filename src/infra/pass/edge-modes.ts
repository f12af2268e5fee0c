// Rows already nested brought to the modes a move makes (design §2): a root
// left 0750, which the edge cannot pass, made 0710 in the sockets group, its
// `data/` closed to the edge first.
import path from 'node:path'
import { nestedRoot, type Dirs } from '../../domain/paths.js'
import type { Logger } from '../../domain/ports.js'
import type { Route } from '../../domain/schemas.js'
import { errorMessage } from '../../errors.js'
import { fsyncDirs } from '../fsutil.js'
import { closeToEdge, NESTED_ROOT_MODE } from './mover.js'
import type { Slicer } from '../../domain/loop-turns.js'
import { holdDirModeSync, lstatSyncOrUndefined } from './sliced-fs.js'

export interface EdgeModesDeps {
  dirs: Dirs
  /** -1 leaves the group alone (the mode is still held). */
  gid: number
  slicer: Slicer
  /** Neither claimed nor fenced, asked in the tick of each change. */
  free: (host: string) => boolean
  logger: Logger
}

/** Roots made right, and roots left for a later run. */
export interface EdgeModesDone {
  repaired: string[]
  left: string[]
}

/** Whether a nested root lacks a move's mode or group (one lstat). */
export function rootOffEdgeModes(root: string, gid: number): boolean {
  const st = lstatSyncOrUndefined(root)
  if (st?.isDirectory() !== true) return false
  return (st.mode & 0o7777) !== NESTED_ROOT_MODE || (gid >= 0 && st.gid !== gid)
}

/** Every data/ is closed and fsynced before any root opens, so no power cut lets the edge into a data/. */
export async function holdEdgeModes(rows: readonly Route[], deps: EdgeModesDeps): Promise<EdgeModesDone> {
  const { dirs, gid, slicer, free, logger } = deps
  const off: Route[] = []
  for (const row of rows) {
    if (rootOffEdgeModes(nestedRoot(dirs, row.host), gid)) off.push(row)
    await slicer.pause()
  }
  const left: string[] = []
  const failed = (host: string, err: unknown): void => {
    logger.warn({ host, err }, `layout: ${host}: nested modes not held for the edge: ${errorMessage(err)}`)
    left.push(host)
  }
  const closing: Route[] = []
  const closed: string[] = []
  for (const row of off) {
    if (!free(row.host)) left.push(row.host)
    else
      try {
        if (closeToEdge(row.dir, gid)) closed.push(row.dir)
        closing.push(row)
      } catch (err) {
        failed(row.host, err)
      }
    await slicer.pause()
  }
  await fsyncDirs(closed)
  const opened: string[] = []
  for (const row of closing) {
    const root = nestedRoot(dirs, row.host)
    if (!free(row.host)) left.push(row.host)
    else
      try {
        if (holdDirModeSync(root, NESTED_ROOT_MODE, gid)) opened.push(root)
      } catch (err) {
        failed(row.host, err)
      }
    await slicer.pause()
  }
  await fsyncDirs(opened)
  return { repaired: opened.map((root) => path.basename(root)), left }
}

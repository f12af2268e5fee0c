// The data root's own directories, verified before anything under them is
// read (design §2.1 "Nothing outside the data root"), and what <data>/layout
// holds: the hosts named by journals and by hold markers. Start-up reads
// the intent only when there is one of either.
import fs from 'node:fs/promises'
import path from 'node:path'
import { validHost } from '../domain/hostname.js'
import type { LayoutDirectory } from '../domain/ports.js'
import { errors } from '../errors.js'
import { kindOf, lstatOrUndefined } from './fsutil.js'

/** The directories of the data root every path the pass, recovery and the key minter use starts from (design §2.1). */
export const DATA_ROOTS = ['layout', 'apps', 'nested'] as const

/**
 * Checks that D/layout, D/apps and D/nested are real directories (lstat: a
 * directory, not a symlink to one) owned by layoutd's user or root, and
 * refuses with a named error otherwise. One that is absent passes: layoutd
 * makes it when it first needs it, with mkdir(2), which never follows a
 * link. Run at start before any journal or hold marker is read, and by the
 * pass before each run: a root a link could redirect would carry every
 * path built from it out of the data root.
 */
export async function verifyDataRoots(dataDir: string): Promise<void> {
  const ours = process.getuid?.()
  for (const name of DATA_ROOTS) {
    const dir = path.join(dataDir, name)
    const st = await lstatOrUndefined(dir)
    if (st === undefined) continue
    if (!st.isDirectory()) throw errors.dataRootNotDirectory(dir, kindOf(st))
    if (ours !== undefined && st.uid !== ours && st.uid !== 0) throw errors.dataRootNotOurs(dir, st.uid, ours)
  }
}

async function hostsWithSuffix(dir: string, suffix: string): Promise<string[]> {
  let names: string[]
  try {
    names = await fs.readdir(dir)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return []
    throw err
  }
  // A file whose name is not a valid host is not ours to act on; recovery
  // reports it (it is listed by the pass), the start-up decision ignores it.
  return names
    .filter((n) => n.endsWith(suffix))
    .map((n) => n.slice(0, -suffix.length))
    .filter(validHost)
    .sort()
}

export function layoutDirectory(dataDir: string): LayoutDirectory {
  const dir = path.join(dataDir, 'layout')
  return {
    verifyRoots: () => verifyDataRoots(dataDir),
    journalHosts: () => hostsWithSuffix(dir, '.journal'),
    holdHosts: () => hostsWithSuffix(dir, '.hold'),
  }
}

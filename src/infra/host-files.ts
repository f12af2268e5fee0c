// Where a host's files already sit: what is at its flat dir and at its
// nested one, looked at without following a symlink, for the mint
// (design §5.5) to mint a row where the files are rather than beside them.
import fs from 'node:fs/promises'
import type { FoundAt, HostFiles } from '../domain/mint.js'
import { flatPaths, nestedPaths, nestedRoot, type Dirs } from '../domain/paths.js'
import { errorMessage } from '../errors.js'
import { kindOf, mapLimit } from './fsutil.js'

/** How many hosts are looked at at once: lstats are cheap, and a few thousand queued at once help nothing. */
const LOOK_CONCURRENCY = 32

/** What is at p, or null when nothing is (ENOTDIR: a parent is no directory, so nothing is below it). */
async function foundAt(p: string): Promise<FoundAt | null> {
  try {
    const st = await fs.lstat(p)
    return { path: p, directory: st.isDirectory(), what: kindOf(st) }
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    if (code === 'ENOENT' || code === 'ENOTDIR') return null
    throw new Error(`cannot look at ${p}: ${errorMessage(err)}`, { cause: err })
  }
}

/**
 * What is at the host's flat dir and its nested one. The nested root is
 * looked at first: one that is not a real directory (a symlink) is what is
 * found for the nested shape, and nothing is looked at through it.
 */
export async function hostFiles(dirs: Dirs, host: string): Promise<HostFiles> {
  const [flat, root] = await Promise.all([foundAt(flatPaths(dirs, host).dir), foundAt(nestedRoot(dirs, host))])
  const nested = root === null || !root.directory ? root : await foundAt(nestedPaths(dirs, host).dir)
  return { flat, nested }
}

/** hostFiles for many hosts, a few at a time; a host that could not be looked at has the Error instead. */
export async function hostFilesOf(dirs: Dirs, hosts: readonly string[]): Promise<Map<string, HostFiles | Error>> {
  const found = await mapLimit(hosts, LOOK_CONCURRENCY, async (host) => {
    try {
      return await hostFiles(dirs, host)
    } catch (err) {
      return err instanceof Error ? err : new Error(errorMessage(err))
    }
  })
  return new Map(hosts.map((host, i) => [host, found[i] as HostFiles | Error]))
}

// Where a host's files already sit, flat or nested, looked at without following a symlink, so the mint (design §5.5)
// mints a row where the files are.
import fs from 'node:fs/promises'
import type { FoundAt, HostFiles } from '../domain/mint.js'
import { flatPaths, nestedPaths, nestedRoot, type Dirs } from '../domain/paths.js'
import { errorMessage } from '../errors.js'
import { kindOf, mapLimit } from './fsutil.js'

/** Cheap lstats; thousands queued help nothing. */
const LOOK_CONCURRENCY = 32

/** ENOTDIR: nothing below a non-directory. */
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

/** Nothing is looked at through a nested root that is not a real directory. */
export async function hostFiles(dirs: Dirs, host: string): Promise<HostFiles> {
  const [flat, root] = await Promise.all([foundAt(flatPaths(dirs, host).dir), foundAt(nestedRoot(dirs, host))])
  const nested = root === null || !root.directory ? root : await foundAt(nestedPaths(dirs, host).dir)
  return { flat, nested }
}

/** A failed host has its Error. */
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

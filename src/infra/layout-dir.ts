// The data root's own directories, verified before anything under them is
// read (design §2.1 "Nothing outside the data root"), and what <data>/layout
// holds: the hosts named by journals (a host's own, or a batch's, which
// names many) and by hold markers. Start-up reads the intent only when
// there is one of either.
import { constants } from 'node:fs'
import fs from 'node:fs/promises'
import path from 'node:path'
import { validHost } from '../domain/hostname.js'
import type { LayoutDirectory } from '../domain/ports.js'
import { errors } from '../errors.js'
import { kindOf, lstatOrUndefined } from './fsutil.js'
import { namedHosts } from './pass/batch-journal.js'
import { isBatchJournalName, JOURNAL_SUFFIX } from './pass/journal.js'

/** The directories of the data root every path the pass, recovery and the key minter use starts from (design §2.1). */
export const DATA_ROOTS = ['layout', 'apps', 'nested'] as const

/**
 * Refuses, with a named error, a D/layout, D/apps or D/nested that is not a
 * real directory (lstat) owned by layoutd's user or root; an absent one
 * passes (mkdir(2) never follows a link). Run before anything is read and
 * before each pass: a redirected root carries every path out of the data root.
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

/** What the journals of `<data>/layout` name: hosts, and the batch files whose hosts cannot be read at all. */
export interface JournalNames {
  hosts: string[]
  /** The journal file that names each host (its own when it has one). */
  files: Map<string, string>
  /** Batch journal files no host can be read from (not JSON, unreadable): they may name any host. */
  unknown: string[]
}

/**
 * A batch file's hosts, by name, kept while the file is the same (inode, size, mtime): the report lists the
 * directory on every poll.
 */
const batchCache = new Map<string, { key: string; hosts: string[] | undefined }>()

async function batchHosts(file: string): Promise<string[] | undefined> {
  let fh
  try {
    fh = await fs.open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return []
    return undefined
  }
  try {
    const st = await fh.stat()
    const key = `${st.ino}:${st.size}:${st.mtimeMs}`
    const hit = batchCache.get(file)
    if (hit?.key === key) return hit.hosts
    let hosts: string[] | undefined
    try {
      hosts = st.isFile() ? namedHosts(JSON.parse(await fh.readFile('utf8'))) : undefined
    } catch {
      hosts = undefined
    }
    if (hosts?.length === 0) hosts = undefined
    if (batchCache.size > 1000) batchCache.clear()
    batchCache.set(file, { key, hosts })
    return hosts
  } finally {
    await fh.close()
  }
}

/** Every host a journal names: hosts' own journals and every batch's moves. */
export async function journalNames(dataDir: string): Promise<JournalNames> {
  const dir = path.join(dataDir, 'layout')
  const files = new Map(
    (await hostsWithSuffix(dir, JOURNAL_SUFFIX)).map((h) => [h, path.join(dir, `${h}${JOURNAL_SUFFIX}`)]),
  )
  const unknown: string[] = []
  let names: string[]
  try {
    names = await fs.readdir(dir)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { hosts: [], files, unknown }
    throw err
  }
  for (const name of names.filter(isBatchJournalName).sort()) {
    const named = await batchHosts(path.join(dir, name))
    if (named === undefined) unknown.push(name)
    else for (const h of named) if (!files.has(h)) files.set(h, path.join(dir, name))
  }
  return { hosts: [...files.keys()].sort(), files, unknown }
}

export function layoutDirectory(dataDir: string): LayoutDirectory {
  const dir = path.join(dataDir, 'layout')
  return {
    verifyRoots: () => verifyDataRoots(dataDir),
    // A batch file naming no readable host is listed by its own name, which
    // no host can take (it begins with `_`): start-up then reads the intent,
    // and the report matches it to no row.
    journalHosts: async () => {
      const { hosts, unknown } = await journalNames(dataDir)
      return [...hosts, ...unknown]
    },
    holdHosts: () => hostsWithSuffix(dir, '.hold'),
  }
}

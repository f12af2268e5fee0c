// The data root's own directories, verified before anything under them is read (design §2.1 "Nothing outside the
// data root"), and the hosts that <data>/layout's journals and hold markers name.
import { constants } from 'node:fs'
import fs from 'node:fs/promises'
import path from 'node:path'
import { validHost } from '../domain/hostname.js'
import type { LayoutDirectory } from '../domain/ports.js'
import { errors } from '../errors.js'
import { kindOf, lstatOrUndefined } from './fsutil.js'
import { namedHosts } from './pass/batch-journal.js'
import { isBatchJournalName, JOURNAL_SUFFIX } from './pass/journal.js'

/** Where every path starts (design §2.1). */
export const DATA_ROOTS = ['layout', 'apps', 'nested'] as const

/** Refuses one not a real directory of ours or root's (absent passes): a redirected root leads paths out of D. */
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
  // An invalid name is not ours: recovery reports it, start-up ignores it.
  return names
    .filter((n) => n.endsWith(suffix))
    .map((n) => n.slice(0, -suffix.length))
    .filter(validHost)
    .sort()
}

export interface JournalNames {
  hosts: string[]
  /** Its own journal when it has one. */
  files: Map<string, string>
  /** Unreadable batch journals, which may name any host. */
  unknown: string[]
}

/** The report lists the directory every poll. */
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
    // An unreadable batch is listed by its own name (`_`, no host's), so start-up reads the intent.
    journalHosts: async () => {
      const { hosts, unknown } = await journalNames(dataDir)
      return [...hosts, ...unknown]
    },
    holdHosts: () => hostsWithSuffix(dir, '.hold'),
  }
}

// Lists what <data>/layout holds: the hosts named by journals and by hold
// markers. Start-up reads the intent only when there is one of either.
import fs from 'node:fs/promises'
import path from 'node:path'
import { validHost } from '../domain/hostname.js'
import type { LayoutDirectory } from '../domain/ports.js'

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
    journalHosts: () => hostsWithSuffix(dir, '.journal'),
    holdHosts: () => hostsWithSuffix(dir, '.hold'),
  }
}

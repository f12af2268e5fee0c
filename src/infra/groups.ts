// Group lookups in the system's group database, for the carlos-sockets group
// a nested host's run/ directory is given (design §2).
import fs from 'node:fs/promises'

export const SOCKETS_GROUP = 'carlos-sockets'

/** The group's id, or -1 where it does not exist (a dev machine): then the group is left alone. */
export async function groupId(name: string, file = '/etc/group'): Promise<number> {
  let text: string
  try {
    text = await fs.readFile(file, 'utf8')
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return -1
    throw err
  }
  for (const line of text.split('\n')) {
    const [group, , gid] = line.split(':')
    if (group === name && gid !== undefined && /^[0-9]+$/.test(gid)) return Number(gid)
  }
  return -1
}

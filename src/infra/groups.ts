// Group lookups through the system's name service (as `getent group` sees them), for the carlos-sockets group a
// nested host's run/ directory is given (design §2).
import { execFile } from 'node:child_process'
import type { Logger } from '../domain/ports.js'

export const SOCKETS_GROUP = 'carlos-sockets'

export interface GroupLookup {
  getent?: string
  /** Failed lookups only. */
  logger?: Pick<Logger, 'warn'>
}

const GETENT_NOT_FOUND = 2

/** A slow LDAP server counts as failed. */
const LOOKUP_TIMEOUT_MS = 10_000

function gidIn(text: string, name: string): number {
  for (const line of text.split('\n')) {
    const [group, , gid] = line.split(':')
    if (group === name && gid !== undefined && /^[0-9]+$/.test(gid)) return Number(gid)
  }
  return -1
}

/** -1 (group left alone) when absent or the lookup failed, logged, never a failed start. */
export function groupId(name: string, opts: GroupLookup = {}): Promise<number> {
  const command = opts.getent ?? 'getent'
  return new Promise((resolve) => {
    execFile(command, ['group', name], { timeout: LOOKUP_TIMEOUT_MS, encoding: 'utf8' }, (err, stdout) => {
      if (err === null) {
        resolve(gidIn(stdout, name))
        return
      }
      if (err.code !== GETENT_NOT_FOUND) {
        opts.logger?.warn(
          { err, group: name },
          `layout: looking up group ${name} through ${command} failed; treated as no such group ` +
            `(nested run/ directories keep their group)`,
        )
      }
      resolve(-1)
    })
  })
}

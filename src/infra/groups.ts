// Group lookups through the system's name service (NSS: /etc/group, LDAP,
// sssd, as `getent group` sees them), for the carlos-sockets group a nested
// host's run/ directory is given (design §2).
import { execFile } from 'node:child_process'
import type { Logger } from '../domain/ports.js'

export const SOCKETS_GROUP = 'carlos-sockets'

export interface GroupLookup {
  /** The getent command; `getent` on PATH unless a test says otherwise. */
  getent?: string
  /** Told of a lookup that failed (not one that found no group). */
  logger?: Pick<Logger, 'warn'>
}

/** getent's exit status for "no such entry". */
const GETENT_NOT_FOUND = 2

/** How long a lookup may take (a slow LDAP server) before it counts as failed. */
const LOOKUP_TIMEOUT_MS = 10_000

/** The gid in one `name:password:gid:members` line of getent's answer for name, or -1. */
function gidIn(text: string, name: string): number {
  for (const line of text.split('\n')) {
    const [group, , gid] = line.split(':')
    if (group === name && gid !== undefined && /^[0-9]+$/.test(gid)) return Number(gid)
  }
  return -1
}

/**
 * The group's id, or -1 where it does not exist (a dev machine): then the
 * group is left alone. A lookup that fails (no getent, a name service that
 * does not answer) is "no group" too, said on the log, never a failed start.
 */
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

// Who listens on a TCP port, when the kernel will say: the listening
// socket's inode from /proc/net/tcp and tcp6, then the process whose
// /proc/PID/fd links to that socket. Used only to word the refusal of a
// port in use (design §8); on another system, or for another user's
// process, it finds nothing and the refusal names the address alone.
import fs from 'node:fs/promises'

/** A process that listens on the port: its pid and command line. */
export interface PortHolder {
  pid: number
  command: string
}

/** TCP_LISTEN in the `st` column of /proc/net/tcp. */
const LISTEN = '0A'

/** The inodes of sockets listening on port, from the kernel's tables (IPv4 and IPv6). */
export async function listeningInodes(
  port: number,
  tables = ['/proc/net/tcp', '/proc/net/tcp6'],
): Promise<Set<string>> {
  const inodes = new Set<string>()
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0')
  for (const table of tables) {
    let text: string
    try {
      text = await fs.readFile(table, 'utf8')
    } catch {
      // No such table (no IPv6, not Linux): nothing listens there that we can see.
      continue
    }
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/)
      // sl local_address rem_address st tx:rx tr:tm retrnsmt uid timeout inode
      const local = cols[1]
      if (local === undefined || cols[3] !== LISTEN || cols[9] === undefined) continue
      if (local.slice(local.lastIndexOf(':') + 1) === hexPort && cols[9] !== '0') inodes.add(cols[9])
    }
  }
  return inodes
}

/** The processes holding one of these socket inodes open, as far as /proc lets this user see. */
export async function holdersOf(inodes: ReadonlySet<string>, proc = '/proc'): Promise<PortHolder[]> {
  if (inodes.size === 0) return []
  const found: PortHolder[] = []
  const pids = (await fs.readdir(proc).catch(() => [] as string[])).filter((name) => /^[0-9]+$/.test(name))
  for (const pid of pids) {
    const fds = await fs.readdir(`${proc}/${pid}/fd`).catch(() => [] as string[])
    for (const fd of fds) {
      const target = await fs.readlink(`${proc}/${pid}/fd/${fd}`).catch(() => '')
      const m = /^socket:\[([0-9]+)\]$/.exec(target)
      if (m?.[1] === undefined || !inodes.has(m[1])) continue
      const cmdline = await fs.readFile(`${proc}/${pid}/cmdline`, 'utf8').catch(() => '')
      found.push({ pid: Number(pid), command: cmdline.split('\0').filter(Boolean).join(' ') })
      break
    }
  }
  return found
}

/** Who listens on port, in words (`pid 4242: node dist/src/main.js serve`), or '' when that cannot be learned. */
export async function describePortHolder(port: number): Promise<string> {
  try {
    const holders = await holdersOf(await listeningInodes(port))
    return holders.map((h) => `pid ${h.pid}${h.command === '' ? '' : `: ${h.command}`}`).join('; ')
  } catch {
    // Only the wording of a refusal depends on it: the refusal goes out without.
    return ''
  }
}

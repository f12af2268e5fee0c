// Who listens on a TCP port, when the kernel will say: the listening socket's inode from /proc/net/tcp and tcp6,
// then the process whose /proc/PID/fd links to it. It only words a refusal (design §8).
import fs from 'node:fs/promises'

export interface PortHolder {
  pid: number
  command: string
}

/** TCP_LISTEN in the `st` column. */
const LISTEN = '0A'

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
      // No IPv6, or not Linux.
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

/** As far as /proc lets this user see. */
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

/** `pid 4242: node …`, or ''. */
export async function describePortHolder(port: number): Promise<string> {
  try {
    const holders = await holdersOf(await listeningInodes(port))
    return holders.map((h) => `pid ${h.pid}${h.command === '' ? '' : `: ${h.command}`}`).join('; ')
  } catch {
    // Only wording depends on it.
    return ''
  }
}

// The listening socket systemd hands `layoutd serve` (design §4.6): read as sd_listen_fds(3) does, the variables
// unset once read so no child inherits them, then checked in the kernel's own tables: a socket, listening, TCP or a
// Unix stream. Anything else refuses the start rather than serve beside the inherited socket.
import fs from 'node:fs'
import { errors } from '../errors.js'

/** SD_LISTEN_FDS_START. */
export const LISTEN_FDS_START = 3

export interface InheritedSocket {
  fd: number
  /** FileDescriptorName= (default `unknown`). */
  name: string
  kind: 'tcp' | 'unix'
  /** `127.0.0.1:9740`, `[::1]:9740`, or a Unix path (`@` abstract). */
  address: string
  /** Unix counts as local. */
  loopback: boolean
}

/** layoutd.socket's Backlog=, when somaxconn cannot be read. */
export const SOCKET_UNIT_BACKLOG = 4096

/** Node's listen(2) resets systemd's backlog, which /proc hides: ask the cap, somaxconn (design §4.6). */
export function listenBacklog(proc = '/proc'): number {
  try {
    const n = Number(fs.readFileSync(`${proc}/sys/net/core/somaxconn`, 'utf8').trim())
    if (Number.isInteger(n) && n > 0) return n
  } catch {
    // No /proc/sys: a restricted mount.
  }
  return SOCKET_UNIT_BACKLOG
}

interface Found {
  table: string
  cols: string[]
}

/** tcp's `st`; unix flags' __SO_ACCEPTCON. */
const TCP_LISTEN = '0A'
const SO_ACCEPTCON = 0x10000
const UNIX_STREAM = '0001'

const TABLES: ReadonlyArray<{ table: string; inode: number }> = [
  { table: 'tcp', inode: 9 },
  { table: 'tcp6', inode: 9 },
  { table: 'unix', inode: 6 },
  { table: 'udp', inode: 9 },
  { table: 'udp6', inode: 9 },
]

function find(inode: string, proc: string): Found | null {
  for (const { table, inode: col } of TABLES) {
    let text: string
    try {
      text = fs.readFileSync(`${proc}/net/${table}`, 'utf8')
    } catch {
      continue
    }
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/)
      if (cols[col] === inode) return { table, cols }
    }
  }
  return null
}

/** Little-endian hex (IPv4, or 32-digit IPv6) as `host:port`. */
export function tcpAddress(hex: string): string {
  const [ip = '', port = '0'] = hex.split(':')
  const p = parseInt(port, 16)
  if (ip.length === 8) {
    const bytes = [0, 1, 2, 3].map((i) => parseInt(ip.slice(6 - 2 * i, 8 - 2 * i), 16))
    return `${bytes.join('.')}:${p}`
  }
  // Four 32-bit words, each little-endian.
  const words: string[] = []
  for (let w = 0; w < 4; w++) {
    const word = ip.slice(8 * w, 8 * w + 8)
    const le = (word.match(/../g) ?? []).reverse().join('')
    words.push(le.slice(0, 4), le.slice(4, 8))
  }
  const v6 = words.map((g) => parseInt(g, 16).toString(16)).join(':')
  return `[${v6.replace(/(^|:)0(:0)+(:|$)/, '::')}]:${p}`
}

function loopbackTcp(address: string): boolean {
  return /^127\./.test(address) || address.startsWith('[::1]:') || address.startsWith('[::ffff:7f')
}

function linkOf(fd: number, proc: string): string {
  try {
    return fs.readlinkSync(`${proc}/self/fd/${fd}`)
  } catch {
    return 'unknown'
  }
}

/** Throws `inherited_socket` naming what the fd is instead. */
function check(fd: number, name: string, proc: string): InheritedSocket {
  let stat: fs.Stats
  try {
    stat = fs.fstatSync(fd)
  } catch (err) {
    throw errors.inheritedSocket(`fd ${fd} is not open (${(err as NodeJS.ErrnoException).code ?? 'error'})`)
  }
  if (!stat.isSocket()) {
    const what = stat.isFile()
      ? 'a regular file'
      : stat.isDirectory()
        ? 'a directory'
        : stat.isFIFO()
          ? 'a pipe'
          : stat.isCharacterDevice()
            ? 'a character device'
            : `something else (${linkOf(fd, proc)})`
    throw errors.inheritedSocket(`fd ${fd} is ${what}, not a socket`)
  }
  const link = fs.readlinkSync(`${proc}/self/fd/${fd}`)
  const inode = /^socket:\[(\d+)\]$/.exec(link)?.[1]
  const found = inode === undefined ? null : find(inode, proc)
  if (found === null) throw errors.inheritedSocket(`fd ${fd} is a socket neither TCP nor Unix (${link})`)
  const { table, cols } = found
  if (table === 'udp' || table === 'udp6') throw errors.inheritedSocket(`fd ${fd} is a UDP socket, not a stream`)
  if (table === 'unix') {
    if (cols[4] !== UNIX_STREAM)
      throw errors.inheritedSocket(`fd ${fd} is a Unix socket of type ${cols[4]}, not a stream`)
    if ((parseInt(cols[3] ?? '0', 16) & SO_ACCEPTCON) === 0)
      throw errors.inheritedSocket(`fd ${fd} is a Unix stream socket that is not listening`)
    return { fd, name, kind: 'unix', address: cols[7] ?? '(unnamed)', loopback: true }
  }
  const address = tcpAddress(cols[1] ?? '')
  if (cols[3] !== TCP_LISTEN)
    throw errors.inheritedSocket(`fd ${fd} is a TCP socket at ${address} that is not listening (state ${cols[3]})`)
  return { fd, name, kind: 'tcp', address, loopback: loopbackTcp(address) }
}

/** null when none was passed; LISTEN_* leave env whatever they said. */
export function inheritedSocket(
  env: NodeJS.ProcessEnv = process.env,
  pid = process.pid,
  proc = '/proc',
): InheritedSocket | null {
  const fds = env.LISTEN_FDS
  const forPid = env.LISTEN_PID
  const names = env.LISTEN_FDNAMES
  delete env.LISTEN_FDS
  delete env.LISTEN_PID
  delete env.LISTEN_FDNAMES
  if (fds === undefined) return null
  if (forPid !== String(pid))
    throw errors.inheritedSocket(
      `LISTEN_PID=${forPid ?? '(unset)'} is not this process (${pid}): the sockets are another's`,
    )
  if (!/^[0-9]+$/.test(fds)) throw errors.inheritedSocket(`LISTEN_FDS=${JSON.stringify(fds)} is not a count`)
  if (Number(fds) !== 1)
    throw errors.inheritedSocket(`LISTEN_FDS=${fds}: layoutd serves on exactly one socket (one ListenStream=)`)
  return check(LISTEN_FDS_START, names?.split(':')[0] ?? 'unknown', proc)
}

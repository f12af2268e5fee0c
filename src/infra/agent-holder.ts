// `D/agent.json`, which agent holds a data root: agent-lock.ts writes it, the CLI reads it.
// Only node:fs, so `layoutd status` reads it without loading SQLite.
import fs from 'node:fs'
import path from 'node:path'

export const AGENT_HOLDER_FILE = 'agent.json'

export interface Holder {
  pid: number
  /** `host:port` it listens on (IPv6 bracketed); empty before it does. */
  listen: string
  startedAt: string
  /** The data root, symlinks resolved. */
  dataDir: string
  /** Unique per start, where a pid can be reused. */
  startId: string
}

/** EPERM: it runs, as another user. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/** What `D/agent.json` tells a client. */
export interface HolderSeen {
  file: string
  /** Set while its process runs. */
  listen?: string
  /** Alive or not: an agent answering this id holds this data root. */
  startId?: string
}

/** What `D/agent.json` says, or undefined when none is readable. */
export function seeHolder(dataDir: string): HolderSeen | undefined {
  const file = path.join(dataDir, AGENT_HOLDER_FILE)
  let h: Partial<Holder>
  try {
    h = JSON.parse(fs.readFileSync(file, 'utf8')) as Partial<Holder>
  } catch {
    // Absent, or half-written by a killed agent: no holder.
    return undefined
  }
  const startId = typeof h.startId === 'string' && h.startId !== '' ? h.startId : undefined
  const running = typeof h.pid === 'number' && Number.isInteger(h.pid) && h.pid > 0 && alive(h.pid)
  const listen = running && typeof h.listen === 'string' && h.listen !== '' ? h.listen : undefined
  return { file, ...(listen === undefined ? {} : { listen }), ...(startId === undefined ? {} : { startId }) }
}

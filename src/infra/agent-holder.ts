// `D/agent.json`, which agent holds a data root: agent-lock.ts writes it, the CLI reads it. Only node:fs, so
// `layoutd status` loads no SQLite.
import fs from 'node:fs'
import path from 'node:path'

export const AGENT_HOLDER_FILE = 'agent.json'

export interface Holder {
  pid: number
  /** `host:port`, empty until it listens. */
  listen: string
  startedAt: string
  /** Symlinks resolved. */
  dataDir: string
  /** A pid can be reused; this cannot. */
  startId: string
}

/** EPERM: another user's. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}

export interface HolderSeen {
  file: string
  /** While its process runs. */
  listen?: string
  /** An agent answering this id holds this data root. */
  startId?: string
}

/** undefined when none is readable. */
export function seeHolder(dataDir: string): HolderSeen | undefined {
  const file = path.join(dataDir, AGENT_HOLDER_FILE)
  let h: Partial<Holder>
  try {
    h = JSON.parse(fs.readFileSync(file, 'utf8')) as Partial<Holder>
  } catch {
    // Absent, or half-written by a killed agent.
    return undefined
  }
  const startId = typeof h.startId === 'string' && h.startId !== '' ? h.startId : undefined
  const running = typeof h.pid === 'number' && Number.isInteger(h.pid) && h.pid > 0 && alive(h.pid)
  const listen = running && typeof h.listen === 'string' && h.listen !== '' ? h.listen : undefined
  return { file, ...(listen === undefined ? {} : { listen }), ...(startId === undefined ? {} : { startId }) }
}

// `D/agent.json`, the one file that says which agent holds a data root: the
// agent's lock (agent-lock.ts) writes it, the CLI (src/cli/agent-client.ts)
// reads it to find that agent. Its own module, with nothing but node:fs, so
// `layoutd status` can read it without loading SQLite.
import fs from 'node:fs'
import path from 'node:path'

export const AGENT_HOLDER_FILE = 'agent.json'

/** Who holds the lock, as `D/agent.json` says. */
export interface Holder {
  pid: number
  /** `host:port` the agent actually listens on (IPv6 in brackets), once it does; empty before. */
  listen: string
  startedAt: string
  /** The data root, its symlinks resolved: what the agent's `GET /agent` answers too. */
  dataDir: string
  /** This start of the agent, unique: a pid can be reused, a start id is not. */
  startId: string
}

/** Whether a process of this pid runs (EPERM: it does, as another user). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/** What `D/agent.json` tells a client: where its agent listens while it runs, and which start wrote it. */
export interface HolderSeen {
  file: string
  /** The address, when the file names one and its process still runs. */
  listen?: string
  /** The start that wrote the file, alive or not: an agent answering this id holds this data root. */
  startId?: string
}

/**
 * What `D/agent.json` says, or undefined when there is none to read (no
 * agent started, one stopped cleanly, a file half-written by a killed one).
 */
export function seeHolder(dataDir: string): HolderSeen | undefined {
  const file = path.join(dataDir, AGENT_HOLDER_FILE)
  let h: Partial<Holder>
  try {
    h = JSON.parse(fs.readFileSync(file, 'utf8')) as Partial<Holder>
  } catch {
    // Absent, unreadable or half-written by a killed agent: no holder to name.
    return undefined
  }
  const startId = typeof h.startId === 'string' && h.startId !== '' ? h.startId : undefined
  const running = typeof h.pid === 'number' && Number.isInteger(h.pid) && h.pid > 0 && alive(h.pid)
  const listen = running && typeof h.listen === 'string' && h.listen !== '' ? h.listen : undefined
  return { file, ...(listen === undefined ? {} : { listen }), ...(startId === undefined ? {} : { startId }) }
}

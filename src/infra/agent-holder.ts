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

/**
 * The agent `D/agent.json` names, when that file can be read, names an
 * address, and its process still runs; undefined otherwise (no agent
 * started, one stopped cleanly or was killed, one not listening yet).
 */
export function liveHolder(dataDir: string): (Holder & { file: string }) | undefined {
  const file = path.join(dataDir, AGENT_HOLDER_FILE)
  let h: Partial<Holder>
  try {
    h = JSON.parse(fs.readFileSync(file, 'utf8')) as Partial<Holder>
  } catch {
    // Absent, unreadable or half-written by a killed agent: no holder to name.
    return undefined
  }
  if (typeof h.pid !== 'number' || !Number.isInteger(h.pid) || h.pid <= 0) return undefined
  if (typeof h.listen !== 'string' || h.listen === '' || !alive(h.pid)) return undefined
  return { ...(h as Holder), file }
}

// One agent per data root (design §4.4): `D/agent.lock`, held for the
// agent's lifetime with a lock the kernel drops when the process dies, and
// `D/agent.json`, who holds it, so a refused second agent can name the holder
// and the CLI finds the agent of *its* data root, not whatever answers on the
// default port.
//
// Node has no flock(2); SQLite's POSIX locks die with the process (kill -9
// too), so the lock is an open `BEGIN IMMEDIATE` on a small SQLite file, and
// another opener fails at once with SQLITE_BUSY. It lives outside `D/layout`
// so no journal or hold listing sees it.
import { randomUUID } from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import Database from 'better-sqlite3'
import { errorMessage, errors } from '../errors.js'
import { AGENT_HOLDER_FILE, type Holder } from './agent-holder.js'

export const AGENT_LOCK_FILE = 'agent.lock'
export { AGENT_HOLDER_FILE, type Holder }

function isBusy(err: unknown): boolean {
  return err instanceof Database.SqliteError && (err.code === 'SQLITE_BUSY' || err.code === 'SQLITE_LOCKED')
}

/** The holder as its file says, or why it cannot be told (a holder killed before it wrote, a file removed). */
export function describeHolder(file: string): string {
  try {
    const h = JSON.parse(fs.readFileSync(file, 'utf8')) as Partial<Holder>
    const pid = typeof h.pid === 'number' ? `pid ${h.pid}` : 'pid unknown'
    const listen = typeof h.listen === 'string' && h.listen !== '' ? `listening on ${h.listen}` : 'not listening yet'
    return `${pid}, ${listen}`
  } catch (err) {
    return `its holder could not be read from ${file}: ${errorMessage(err)}`
  }
}

export class AgentLock {
  readonly #db: Database.Database
  readonly #holderFile: string
  #holder: Holder

  private constructor(db: Database.Database, holderFile: string, holder: Holder) {
    this.#db = db
    this.#holderFile = holderFile
    this.#holder = holder
  }

  /**
   * Takes the data root's lock, or throws `data_dir_locked` naming the
   * holder. Nothing else under the data root is read or written first, and
   * a refused agent writes nothing at all.
   */
  static acquire(dataDir: string, now: () => Date = () => new Date()): AgentLock {
    fs.mkdirSync(dataDir, { recursive: true })
    const file = path.join(dataDir, AGENT_LOCK_FILE)
    const holderFile = path.join(dataDir, AGENT_HOLDER_FILE)
    const db = new Database(file)
    try {
      db.pragma('busy_timeout = 0')
      // The lock is the RESERVED lock of an open write transaction; nothing
      // is ever written in it, so the rollback journal is never made.
      db.exec('BEGIN IMMEDIATE')
    } catch (err) {
      db.close()
      if (isBusy(err)) throw errors.dataDirLocked(dataDir, describeHolder(holderFile))
      throw err
    }
    const lock = new AgentLock(db, holderFile, {
      pid: process.pid,
      listen: '',
      startedAt: now().toISOString(),
      dataDir: fs.realpathSync(dataDir),
      startId: randomUUID(),
    })
    lock.#writeHolder()
    return lock
  }

  /**
   * Whether an agent holds dataDir's lock now, taking nothing: the lock
   * file is opened only if it exists, and a write transaction that could
   * begin is rolled back at once.
   */
  static held(dataDir: string): boolean {
    let db: Database.Database
    try {
      db = new Database(path.join(dataDir, AGENT_LOCK_FILE), { fileMustExist: true })
    } catch {
      return false
    }
    try {
      db.pragma('busy_timeout = 0')
      db.exec('BEGIN IMMEDIATE')
      db.exec('ROLLBACK')
      return false
    } catch (err) {
      if (isBusy(err)) return true
      throw err
    } finally {
      db.close()
    }
  }

  /** Who holds dataDir's lock, as its `D/agent.json` says (pid and address), for a refusal to name. */
  static describeHolder(dataDir: string): string {
    return describeHolder(path.join(dataDir, AGENT_HOLDER_FILE))
  }

  /** Who holds the lock: this agent, as `D/agent.json` says it. */
  get holder(): Readonly<Holder> {
    return this.#holder
  }

  /** Which agent this is, as `GET /agent` answers it: the holder but its address, which a client already dialled. */
  get identity(): Readonly<Omit<Holder, 'listen'>> {
    const { pid, dataDir, startId, startedAt } = this.#holder
    return { pid, dataDir, startId, startedAt }
  }

  /** Records the address the agent listens on, for the next agent's refusal. */
  listening(address: string): void {
    this.#holder = { ...this.#holder, listen: address }
    this.#writeHolder()
  }

  /** Releases the lock and removes the holder file: a clean stop. */
  release(): void {
    if (!this.#db.open) return
    try {
      fs.rmSync(this.#holderFile, { force: true })
    } finally {
      // Closing the connection ends the transaction and drops the lock.
      this.#db.close()
    }
  }

  // Written whole to a temporary name and renamed, so a refused agent never
  // reads half a holder. Only the lock's holder writes it, so one fixed name
  // serves: a holder killed mid-write leaves one file the next overwrites.
  #writeHolder(): void {
    const tmp = `${this.#holderFile}.tmp`
    fs.writeFileSync(tmp, `${JSON.stringify(this.#holder)}\n`, { mode: 0o644 })
    fs.renameSync(tmp, this.#holderFile)
  }
}

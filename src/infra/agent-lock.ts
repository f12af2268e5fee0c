// One agent per data root (design §4.4): `D/agent.lock`, held for the agent's life, and `D/agent.json` naming the
// holder. Node has no flock(2), so the lock is an open `BEGIN IMMEDIATE` on a SQLite file, whose POSIX lock dies
// with the process, kill -9 too.
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

/** The holder, or why its file cannot be read. */
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

  /** Taken before anything else under dataDir is touched; refused with `data_dir_locked` naming the holder. */
  static acquire(dataDir: string, now: () => Date = () => new Date()): AgentLock {
    fs.mkdirSync(dataDir, { recursive: true })
    const file = path.join(dataDir, AGENT_LOCK_FILE)
    const holderFile = path.join(dataDir, AGENT_HOLDER_FILE)
    const db = new Database(file)
    try {
      db.pragma('busy_timeout = 0')
      // A write transaction that writes nothing holds RESERVED and makes no journal.
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

  /** Taking nothing: the transaction is rolled back at once. */
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

  static describeHolder(dataDir: string): string {
    return describeHolder(path.join(dataDir, AGENT_HOLDER_FILE))
  }

  get holder(): Readonly<Holder> {
    return this.#holder
  }

  /** `GET /agent`: the holder less the address a client dialled. */
  get identity(): Readonly<Omit<Holder, 'listen'>> {
    const { pid, dataDir, startId, startedAt } = this.#holder
    return { pid, dataDir, startId, startedAt }
  }

  /** For the next agent's refusal. */
  listening(address: string): void {
    this.#holder = { ...this.#holder, listen: address }
    this.#writeHolder()
  }

  release(): void {
    if (!this.#db.open) return
    try {
      fs.rmSync(this.#holderFile, { force: true })
    } finally {
      // Closing drops the lock.
      this.#db.close()
    }
  }

  // Renamed whole, so no reader sees half; only the holder writes, so one temp name serves.
  #writeHolder(): void {
    const tmp = `${this.#holderFile}.tmp`
    fs.writeFileSync(tmp, `${JSON.stringify(this.#holder)}\n`, { mode: 0o644 })
    fs.renameSync(tmp, this.#holderFile)
  }
}

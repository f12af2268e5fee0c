// Whether the registry file the agent opened is still the one it can trust (design §2.2): the same file at its path,
// not removed, overwritten or corrupt, and on a disk with room for a claim. A full disk clears with room; the rest
// stand until a restart.
import fs from 'node:fs'
import path from 'node:path'
import { AppError, errors } from '../errors.js'
import type { Logger } from '../domain/ports.js'
import type { ReasonCode } from '../domain/reason-codes.js'

/** Reason codes (docs/runbook.md). */
export type RegistryFaultCode = Extract<
  ReasonCode,
  'registry_removed' | 'registry_replaced' | 'registry_corrupt' | 'registry_full'
>

const SQLITE_HEADER = Buffer.from('SQLite format 3\0', 'latin1')

/** Room again, for a full disk. */
const ROOM_BYTES = 1 << 20

const WHAT_TO_DO: Record<RegistryFaultCode, string> = {
  registry_removed:
    'it was removed while layoutd runs: put the file back (from a backup) and restart layoutd; ' +
    'no claim is granted from rows it can no longer read',
  registry_replaced:
    'another file was put at its path while layoutd runs (a different inode or device): ' +
    'restart layoutd to read the file now there; no claim is granted from the rows of the old one',
  registry_corrupt:
    'it is not a SQLite database, or is corrupt: stop layoutd, move it aside and restore it from a backup; ' +
    'no claim is granted from rows it can no longer trust',
  registry_full: 'its disk is full: free space there; claims are refused until a write has room again',
}

function isCorruption(code: string): boolean {
  return code === 'SQLITE_NOTADB' || code.startsWith('SQLITE_CORRUPT')
}

function sqliteCode(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code
  return typeof code === 'string' && code.startsWith('SQLITE_') ? code : ''
}

export class RegistryWatch {
  readonly file: string
  readonly #identity: { dev: number; ino: number }
  /** The header is read through it: closing any fd of the file drops SQLite's POSIX lock. */
  #fd: number | undefined
  logger: Pick<Logger, 'error' | 'warn' | 'info'> | undefined
  #fault: AppError | null = null

  /** Call right after opening file. */
  constructor(file: string) {
    this.file = file
    // Followed as SQLite follows it.
    this.#fd = fs.openSync(file, 'r')
    const st = fs.fstatSync(this.#fd)
    this.#identity = { dev: st.dev, ino: st.ino }
  }

  /** After every connection closed. */
  close(): void {
    if (this.#fd !== undefined) fs.closeSync(this.#fd)
    this.#fd = undefined
  }

  /** Reads nothing. */
  get fault(): AppError | null {
    return this.#fault
  }

  /** A stat and 16 bytes, so asked per claim. */
  check(): void {
    if (this.#fault !== null && this.#fault.code !== 'registry_full') throw this.#fault
    const seen = this.#look()
    if (seen !== null) throw this.#raise(seen.code, seen.detail)
    if (this.#fault?.code === 'registry_full') {
      if (!this.#hasRoom()) throw this.#fault
      this.logger?.info({ file: this.file, code: 'registry_full' }, `registry: ${this.file} has room again`)
      this.#fault = null
    }
  }

  /** Corruption and a full disk become the fault, a foreign lock `registry_busy`; else err. */
  coded(err: unknown): unknown {
    if (err instanceof AppError) return err
    const code = sqliteCode(err)
    if (code === 'SQLITE_BUSY' || code.startsWith('SQLITE_BUSY_') || code.startsWith('SQLITE_LOCKED'))
      return errors.registryBusy(this.file)
    if (code === 'SQLITE_FULL' || code === 'SQLITE_IOERR_WRITE' || code === 'SQLITE_IOERR_FSYNC') {
      if (code === 'SQLITE_FULL' || !this.#hasRoom()) return this.#raise('registry_full', 'no space left')
    }
    if (isCorruption(code)) return this.#raise('registry_corrupt', (err as Error).message)
    return err
  }

  corrupt(detail: string): AppError {
    return this.#raise('registry_corrupt', detail)
  }

  #look(): { code: RegistryFaultCode; detail: string } | null {
    let st: fs.Stats
    try {
      st = fs.statSync(this.file)
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { code: 'registry_removed', detail: 'no such file' }
      throw err
    }
    if (st.dev !== this.#identity.dev || st.ino !== this.#identity.ino) {
      return {
        code: 'registry_replaced',
        detail:
          `opened as device ${this.#identity.dev} inode ${this.#identity.ino}, ` +
          `now device ${st.dev} inode ${st.ino}`,
      }
    }
    // Same inode as the path's, so in-place writes are read here.
    if (this.#fd === undefined) return null
    const head = Buffer.alloc(SQLITE_HEADER.length)
    const n = fs.readSync(this.#fd, head, 0, head.length, 0)
    if (n < head.length || !head.equals(SQLITE_HEADER))
      return { code: 'registry_corrupt', detail: 'its header is not a SQLite database header' }
    return null
  }

  #hasRoom(): boolean {
    try {
      const s = fs.statfsSync(path.dirname(this.file))
      return s.bavail * s.bsize >= ROOM_BYTES
    } catch {
      return false
    }
  }

  /** Said once. */
  #raise(code: RegistryFaultCode, detail: string): AppError {
    // The first fault stands, but a file gone, replaced or corrupt outranks a full disk.
    if (this.#fault !== null && (this.#fault.code !== 'registry_full' || code === 'registry_full')) return this.#fault
    this.#fault = errors.registryFault(code, this.file, detail, WHAT_TO_DO[code])
    this.logger?.error(
      { file: this.file, code, detail },
      `registry: ${this.file}: ${detail}; ${WHAT_TO_DO[code]} (/ready answers 503 with code ${code})`,
    )
    return this.#fault
  }
}

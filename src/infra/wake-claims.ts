// The wake claims (design §4 "the sweep", §6): which hosts the activator has awake. In the registry, to outlive
// layoutd, and in memory for reads without I/O; unreadable at start, every host counts awake (no unproven stop).
import { errorMessage } from '../errors.js'
import Database from 'better-sqlite3'
import type { Claims } from '../domain/fence.js'
import { requireValidHost } from '../domain/hostname.js'
import type { Logger } from '../domain/ports.js'

export interface ClaimStore {
  wakes(): string[]
  /** The first claim time stays. */
  claimWake(host: string, at: Date): void
  /** false when host held no claim. */
  releaseWake(host: string): boolean
  /** In one transaction. */
  replaceWakes(hosts: readonly string[], at: Date): void
}

/** A sibling's commit, not a foreign lock: the wait blocks the thread answering every request (design §6). */
export const CLAIM_BUSY_TIMEOUT_MS = 25

/**
 * `synchronous = NORMAL`: a WAL frame outlives layoutd, and a power cut stops every instance too (`PUT /wakes` then
 * names what is awake), so a claim costs no fsync.
 */
export function openClaimsConnection(file: string): Database.Database {
  const db = new Database(file, { fileMustExist: true })
  try {
    db.pragma(`busy_timeout = ${CLAIM_BUSY_TIMEOUT_MS}`)
    db.pragma('synchronous = NORMAL')
    return db
  } catch (err) {
    db.close()
    throw err
  }
}

export class SqliteClaimStore implements ClaimStore {
  readonly #db: Database.Database
  /** Only a connection this store opened. */
  readonly #ownsConnection: boolean
  readonly #stmt

  private constructor(db: Database.Database, ownsConnection: boolean) {
    this.#db = db
    this.#ownsConnection = ownsConnection
    this.#stmt = {
      wakes: db.prepare<[], string>('SELECT host FROM wakes ORDER BY host').pluck(),
      claim: db.prepare<[string, string]>(
        'INSERT INTO wakes (host, claimed_at) VALUES (?, ?) ON CONFLICT (host) DO NOTHING',
      ),
      release: db.prepare<[string]>('DELETE FROM wakes WHERE host = ?'),
    }
  }

  /** close() closes its own connection. */
  static open(file: string): SqliteClaimStore {
    return new SqliteClaimStore(openClaimsConnection(file), true)
  }

  /** The Registry's connection, the Registry's to close. */
  static on(db: Database.Database): SqliteClaimStore {
    return new SqliteClaimStore(db, false)
  }

  close(): void {
    if (this.#ownsConnection && this.#db.open) this.#db.close()
  }

  wakes(): string[] {
    return this.#stmt.wakes.all()
  }

  claimWake(host: string, at: Date): void {
    requireValidHost(host)
    this.#stmt.claim.run(host, at.toISOString())
  }

  releaseWake(host: string): boolean {
    return this.#stmt.release.run(host).changes > 0
  }

  replaceWakes(hosts: readonly string[], at: Date): void {
    for (const h of hosts) requireValidHost(h)
    const keep = new Set(hosts)
    const stamp = at.toISOString()
    this.#db
      .transaction(() => {
        for (const h of this.#stmt.wakes.all()) if (!keep.has(h)) this.#stmt.release.run(h)
        for (const h of keep) this.#stmt.claim.run(h, stamp)
      })
      .immediate()
  }
}

export interface WakeClaimsOptions {
  store: ClaimStore
  /** Empty: the release is waited for. */
  activatorUrl: string
  logger: Logger
  now?: () => Date
}

export class WakeClaims implements Claims {
  readonly #awake = new Set<string>()
  /** After a failed sweep, a release proves sleep, or no host could move until PUT /wakes. */
  readonly #provenAsleep = new Set<string>()
  readonly #released = new Map<string, Set<() => void>>()
  readonly #o: WakeClaimsOptions
  #swept = false

  constructor(opts: WakeClaimsOptions) {
    this.#o = opts
  }

  /** Whether the claims could be read. */
  sweep(): boolean {
    try {
      for (const h of this.#o.store.wakes()) this.#awake.add(h)
      this.#swept = true
    } catch (err) {
      this.#o.logger.error({ err }, 'layout: wake claims unreadable at start; every host counts as awake')
      this.#swept = false
    }
    return this.#swept
  }

  get swept(): boolean {
    return this.#swept
  }

  claimed(host: string): boolean {
    return this.#awake.has(host) || (!this.#swept && !this.#provenAsleep.has(host))
  }

  list(): string[] {
    return [...this.#awake].sort()
  }

  /** On disk first, so a restart never forgets it; synchronous, inside FenceTable.admit's tick. */
  claim(host: string): void {
    this.#o.store.claimWake(host, this.#now())
    this.#awake.add(host)
    this.#provenAsleep.delete(host)
  }

  /** A stop waiting on it ends. */
  release(host: string): boolean {
    const had = this.#o.store.releaseWake(host)
    this.#forget(host)
    return had
  }

  /** `PUT /wakes`: every other claim ends. */
  replace(hosts: readonly string[]): void {
    this.#o.store.replaceWakes(hosts, this.#now())
    const keep = new Set(hosts)
    for (const h of [...this.#awake]) if (!keep.has(h)) this.#forget(h)
    for (const h of keep) this.#awake.add(h)
    // Also a stop on a host awake only by a failed sweep: the activator said it sleeps.
    for (const h of [...this.#released.keys()]) if (!keep.has(h)) this.#forget(h)
    // The set is now known whole.
    this.#swept = true
  }

  #forget(host: string): void {
    this.#awake.delete(host)
    this.#provenAsleep.add(host)
    for (const done of this.#released.get(host) ?? []) done()
    this.#released.delete(host)
  }

  #now(): Date {
    return this.#o.now?.() ?? new Date()
  }

  canAskStop(): boolean {
    return this.#o.activatorUrl !== ''
  }

  async stop(host: string, signal: AbortSignal): Promise<boolean> {
    if (!this.claimed(host)) return true
    const released = new Promise<boolean>((resolve) => {
      if (signal.aborted) {
        resolve(false)
        return
      }
      const done = () => resolve(true)
      const waiters = this.#released.get(host) ?? new Set()
      waiters.add(done)
      this.#released.set(host, waiters)
      signal.addEventListener(
        'abort',
        () => {
          waiters.delete(done)
          resolve(false)
        },
        { once: true },
      )
    })
    const { activatorUrl, logger } = this.#o
    if (activatorUrl === '') {
      logger.warn(
        { host },
        `layout: ${host}: awake, and no CARLOS_ACTIVATOR_URL to ask for a stop; waiting for its release`,
      )
    } else {
      const url = `${activatorUrl.replace(/\/+$/, '')}/instances/${encodeURIComponent(host)}/stop`
      try {
        // Loaded on first use.
        const { request } = await import('undici')
        const res = await request(url, { method: 'POST', signal, headersTimeout: 10_000, bodyTimeout: 10_000 })
        await res.body.dump()
        if (res.statusCode >= 300)
          logger.warn({ host, status: res.statusCode }, `layout: ${host}: activator answered ${res.statusCode} to stop`)
      } catch (err) {
        if (!signal.aborted)
          logger.warn({ host, err }, `layout: ${host}: asking the activator to stop it failed: ${errorMessage(err)}`)
      }
    }
    return released
  }
}

// The wake claims (design §4 "the sweep", §6): which hosts the activator has
// awake. Kept in the registry's `wakes` table so a claim outlives layoutd,
// and mirrored in memory so the pass and a wake read them without I/O. A
// table unreadable at start makes every host count as awake: the pass
// trusts no stop it cannot prove.
import { errorMessage } from '../errors.js'
import Database from 'better-sqlite3'
import type { Claims } from '../domain/fence.js'
import { requireValidHost } from '../domain/hostname.js'
import type { Logger } from '../domain/ports.js'

/** Where claims are persisted: the registry's `wakes` table. */
export interface ClaimStore {
  /** Every claimed host, sorted. */
  wakes(): string[]
  /** Records host as awake; a host already claimed keeps its first claim time. */
  claimWake(host: string, at: Date): void
  /** false when host held no claim. */
  releaseWake(host: string): boolean
  /** Makes hosts the whole claim set, in one transaction. */
  replaceWakes(hosts: readonly string[], at: Date): void
}

/**
 * How long a claim's write waits for another writer's lock: a sibling's
 * commit, never a foreign lock's, since better-sqlite3 waits on the thread
 * that answers every request. Past it the claim is answered 503
 * `registry_busy` with Retry-After, recording nothing (design §6).
 */
export const CLAIM_BUSY_TIMEOUT_MS = 25

/**
 * Opens the claims' own connection to the registry file (Registry.open made
 * and migrated it), at `synchronous = NORMAL`: a claim must outlive layoutd,
 * which a committed WAL frame does, but not a power cut, which stops every
 * instance too (the activator's `PUT /wakes` then names what is awake). So a
 * claim costs no fsync; a row rewrite, the move's commit point, does (FULL).
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

/** The `wakes` table, on a claims connection (openClaimsConnection). */
export class SqliteClaimStore implements ClaimStore {
  readonly #db: Database.Database
  /** Whether close() closes the connection: only one this store opened itself. */
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

  /** A claim store on a claims connection of its own, which close() closes. */
  static open(file: string): SqliteClaimStore {
    return new SqliteClaimStore(openClaimsConnection(file), true)
  }

  /** A claim store on a claims connection its owner (the Registry) opened and closes. */
  static on(db: Database.Database): SqliteClaimStore {
    return new SqliteClaimStore(db, false)
  }

  /** Closes the connection this store opened; a registry's claims connection is the registry's to close. */
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
  /** CARLOS_ACTIVATOR_URL: asked to stop an instance; empty: nobody to ask, the release is waited for. */
  activatorUrl: string
  logger: Logger
  now?: () => Date
}

export class WakeClaims implements Claims {
  readonly #awake = new Set<string>()
  /**
   * While the sweep has failed every host counts as awake, except those the
   * activator has since released: a release is proof of sleep, and without
   * this a host could never be moved (nor its stop succeed) until PUT /wakes.
   */
  readonly #provenAsleep = new Set<string>()
  readonly #released = new Map<string, Set<() => void>>()
  readonly #o: WakeClaimsOptions
  #swept = false

  constructor(opts: WakeClaimsOptions) {
    this.#o = opts
  }

  /** Loads the persisted claims; reports whether it could (the sweep's answer). */
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

  /** Every host holding a claim, sorted. */
  list(): string[] {
    return [...this.#awake].sort()
  }

  /**
   * Records host as awake: on disk first, so a claim layoutd answered is
   * never one a restart forgets. Synchronous, so the wake API can make it
   * inside FenceTable.admit, in the same tick as the fence check.
   */
  claim(host: string): void {
    this.#o.store.claimWake(host, this.#now())
    this.#awake.add(host)
    this.#provenAsleep.delete(host)
  }

  /** The host is asleep: its claim is gone, on disk and here, and a stop waiting on it ends. */
  release(host: string): boolean {
    const had = this.#o.store.releaseWake(host)
    this.#forget(host)
    return had
  }

  /** The activator's whole awake set (`PUT /wakes`): every other claim ends. */
  replace(hosts: readonly string[]): void {
    this.#o.store.replaceWakes(hosts, this.#now())
    const keep = new Set(hosts)
    for (const h of [...this.#awake]) if (!keep.has(h)) this.#forget(h)
    for (const h of keep) this.#awake.add(h)
    // A stop waiting on a host that counted as awake only because the sweep
    // failed is answered too: the activator has just said it is asleep.
    for (const h of [...this.#released.keys()]) if (!keep.has(h)) this.#forget(h)
    // The set is now known whole, whatever the sweep could read.
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
        // undici is loaded on the first stop asked, not by every start.
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

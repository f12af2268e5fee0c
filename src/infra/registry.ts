// The box's registry, `<data>/registry.db` (design §2): routes, wake claims and the fence generation counter.
// better-sqlite3 is synchronous, so a move's row rewrite is one transaction.
import fs from 'node:fs'
import path from 'node:path'
import Database from 'better-sqlite3'
import { errors, type AppError } from '../errors.js'
import { PathClaims } from '../domain/classify.js'
import { requireValidHost } from '../domain/hostname.js'
import { isNormalPath } from '../domain/paths.js'
import type { AddOptions, Logger, RouteStore, RowsSnapshot } from '../domain/ports.js'
import { ROUTE_KINDS, type Route, type RouteKind, type RowPaths } from '../domain/schemas.js'
import { fsyncSkipped } from './failpoint.js'
import { fdatasyncFd } from './fsutil.js'
import { migrate } from './migrations.js'
import { RegistryWatch } from './registry-watch.js'
import { carriedSnapshot, listedSnapshot } from './rows-snapshot.js'
import { CHECKPOINT_PAGES, WalCheckpointer } from './wal-checkpointer.js'
import { openClaimsConnection, SqliteClaimStore } from './wake-claims.js'

export const REGISTRY_FILE = 'registry.db'

/** The CLI's wait on another process's write lock. */
const BUSY_TIMEOUT_MS = 5000

/** The agent's wait: long enough for a sibling's commit, never for a held lock. */
export const AGENT_BUSY_TIMEOUT_MS = 25

export function isBusy(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code
  return code === 'SQLITE_BUSY' || code === 'SQLITE_BUSY_SNAPSHOT' || code === 'registry_busy'
}

interface RouteRow {
  host: string
  kind: string
  socket: string
  dir: string
  db: string
  hibernate: number
}

export interface RegistryOptions {
  now?: () => Date
  /** false: never create a database a running agent does not read. */
  create?: boolean
  /** Durable at commit, or once sync() answers (design §3.5, §3.6). */
  durableAt?: 'commit' | 'sync'
  checkpointThread?: URL
  checkpointThreadIdleMs?: number
}

function openFile(file: string, create: boolean): Database.Database {
  try {
    return new Database(file, { fileMustExist: !create })
  } catch (err) {
    if (!create && !fs.existsSync(file)) throw errors.registryGone(file)
    throw errors.registryUnopenable(file, err)
  }
}

function insidePath(child: string, parent: string): boolean {
  // The pass's paths are normal, so a prefix decides (design §3.6).
  if (isNormalPath(child) && isNormalPath(parent)) return child.startsWith(`${parent}/`)
  const rel = path.relative(parent, child)
  return rel !== '' && rel !== '..' && !rel.startsWith(`..${path.sep}`) && !path.isAbsolute(rel)
}

/** Relative paths differ per reader; a db outside its dir stays behind a move. */
function pathsError(p: RowPaths, what: string): AppError | null {
  for (const field of ['dir', 'socket', 'db'] as const) {
    const v = p[field]
    if (v !== '' && !path.isAbsolute(v))
      return errors.badRequest(`${what}: ${field} ${JSON.stringify(v)} is not an absolute path`)
  }
  if (p.db !== '' && (p.dir === '' || !insidePath(p.db, p.dir))) {
    return errors.badRequest(`${what}: db ${JSON.stringify(p.db)} is not inside dir ${JSON.stringify(p.dir)}`)
  }
  return null
}

/** What `add` would refuse (duplicates aside), checked before anything is created. */
export function validateRoute(route: Route): void {
  requireValidHost(route.host)
  if (!ROUTE_KINDS.includes(route.kind)) {
    throw errors.badRequest(`${route.host}: kind ${JSON.stringify(route.kind)} is not one of ${ROUTE_KINDS.join(', ')}`)
  }
  const bad = pathsError(route, route.host)
  if (bad !== null) throw bad
}

/** The `conflict` rule (design §1.1): another row claims route's dir or socket. */
export function refuseClaimedPaths(route: Route, rows: readonly Route[]): void {
  refuseClaimedIn(new PathClaims(rows.filter((r) => r.host !== route.host)), route)
}

function refuseClaimedIn(claims: PathClaims, route: Route): void {
  const claimant =
    (route.dir !== '' ? claims.dirClaimant(route.dir, route.host) : undefined) ??
    (route.socket !== '' ? claims.socketClaimant(route.socket, route.host) : undefined)
  if (claimant !== undefined) throw errors.pathClaimed(route.host, claimant.reason, claimant.host)
}

function toRoute(r: RouteRow): Route {
  // The table's CHECKs hold kind to ROUTE_KINDS.
  return {
    host: r.host,
    kind: r.kind as RouteKind,
    socket: r.socket,
    dir: r.dir,
    db: r.db,
    hibernate: r.hibernate === 1,
  }
}

// Parsed once, so no statement can fail to parse mid-move.
function prepare(db: Database.Database) {
  const cols = 'host, kind, socket, dir, db, hibernate'
  return {
    list: db.prepare<[], RouteRow>(`SELECT ${cols} FROM routes ORDER BY host`),
    get: db.prepare<[string], RouteRow>(`SELECT ${cols} FROM routes WHERE host = ?`),
    addedAfter: db.prepare<[string], { host: string; createdAt: string }>(
      'SELECT host, created_at AS createdAt FROM routes WHERE created_at > ?',
    ),
    insert: db.prepare<[string, string, string, string, string, number, string, string]>(
      'INSERT INTO routes (host, kind, socket, dir, db, hibernate, created_at, updated_at) ' +
        'VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
    ),
    remove: db.prepare<[string]>('DELETE FROM routes WHERE host = ?'),
    setPaths: db.prepare<[string, string, string, string, string]>(
      'UPDATE routes SET dir = ?, socket = ?, db = ?, updated_at = ? WHERE host = ?',
    ),
    nextGeneration: db.prepare<[], { generation: number }>(
      "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation' " +
        'RETURNING CAST(value AS INTEGER) AS generation',
    ),
    ping: db.prepare<[], number>('PRAGMA data_version').pluck(),
  }
}

/** Its data_version moves only on others' commits, so a claim never forces a relist. */
interface ClaimsConnection {
  db: Database.Database
  dataVersion: Database.Statement<[], number>
  claims: SqliteClaimStore
}

export class Registry implements RouteStore {
  readonly file: string
  readonly #db: Database.Database
  readonly #now: () => Date
  readonly #stmt: ReturnType<typeof prepare>
  readonly #watch: RegistryWatch
  readonly #durableAt: 'commit' | 'sync'
  #claimsConnection: ClaimsConnection | undefined
  #snapshot: { version: number; rows: RowsSnapshot } | undefined
  #wal: number | undefined
  /** Off the loop's thread (durableAt 'sync'), until that fails. */
  #checkpointer: WalCheckpointer | undefined

  private constructor(file: string, db: Database.Database, now: () => Date, opts: RegistryOptions) {
    const durableAt = opts.durableAt ?? 'commit'
    this.file = file
    this.#db = db
    this.#now = now
    this.#durableAt = durableAt
    this.#stmt = prepare(db)
    this.#watch = new RegistryWatch(file)
    try {
      if (durableAt === 'sync') this.#checkpointer = this.#checkpointElsewhere(opts)
    } catch (err) {
      this.#watch.close()
      throw err
    }
  }

  /** A commit must not wait on checkpoint fsyncs; if the thread fails, the connections checkpoint (design §3.6). */
  #checkpointElsewhere({ checkpointThread: script, checkpointThreadIdleMs: idleMs }: RegistryOptions): WalCheckpointer {
    const synchronous = fsyncSkipped('registry-commit') ? 'OFF' : 'NORMAL'
    this.#db.pragma('wal_autocheckpoint = 0')
    return new WalCheckpointer(
      { file: this.file, synchronous },
      {
        ...(script === undefined ? {} : { worker: script }),
        ...(idleMs === undefined ? {} : { idleMs }),
        onFailed: (reason) => {
          for (const db of [this.#db, this.#claimsConnection?.db]) {
            if (db?.open === true) db.pragma(`wal_autocheckpoint = ${CHECKPOINT_PAGES}`)
          }
          this.#watch.logger?.warn(
            { file: this.file, reason },
            `registry: ${reason}; the registry's checkpoints are made on the loop's thread again, a commit ` +
              'that reaches one waiting on its fsyncs; restart the agent to move them off it',
          )
        },
      },
    )
  }

  static open(dataDir: string, opts: RegistryOptions = {}): Registry {
    fs.mkdirSync(dataDir, { recursive: true })
    const file = path.join(dataDir, REGISTRY_FILE)
    const db = openFile(file, opts.create ?? true)
    try {
      db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`)
      // WAL: the agent reads while the CLI writes.
      const mode = db.pragma('journal_mode = WAL', { simple: true })
      if (mode !== 'wal') throw new Error(`${file}: could not switch to WAL mode (journal_mode is ${String(mode)})`)
      // A row rewrite commits a move: durable before its journal goes (design §3.5); NORMAL where sync() does it.
      const durableAt = opts.durableAt ?? 'commit'
      db.pragma(`synchronous = ${fsyncSkipped('registry-commit') ? 'OFF' : durableAt === 'commit' ? 'FULL' : 'NORMAL'}`)
      migrate(db)
      return new Registry(file, db, opts.now ?? (() => new Date()), { ...opts, durableAt })
    } catch (err) {
      db.close()
      throw err instanceof Database.SqliteError ? errors.registryUnopenable(file, err) : err
    }
  }

  /** Each fault said once. */
  logFaultsTo(logger: Pick<Logger, 'error' | 'warn' | 'info'>): void {
    this.#watch.logger = logger
  }

  /** Throws registry_corrupt unless quick_check passes; asked once, before a row is trusted. */
  verify(): void {
    let answer: unknown
    try {
      answer = this.#db.pragma('quick_check', { simple: true })
    } catch (err) {
      throw this.coded(err)
    }
    if (answer !== 'ok') throw this.#watch.corrupt(`PRAGMA quick_check answered ${JSON.stringify(answer)}`)
  }

  /** Throws once the file cannot be served from (removed, replaced, corrupt, full). */
  health(): void {
    this.#watch.check()
  }

  /** No I/O. */
  get fault(): AppError | null {
    return this.#watch.fault
  }

  /** registry_busy, registry_full, registry_corrupt, or err. */
  coded(err: unknown): unknown {
    return this.#watch.coded(err)
  }

  close(): void {
    this.#checkpointer?.stop()
    if (this.#claimsConnection?.db.open === true) this.#claimsConnection.db.close()
    if (this.#db.open) this.#db.close()
    this.#checkpointer?.closeIndexAfterConnections()
    if (this.#wal !== undefined) fs.closeSync(this.#wal)
    this.#wal = undefined
    this.#watch.close()
  }

  /** A WAL frame counts only with those before it, so this makes every commit so far durable. */
  async sync(): Promise<void> {
    if (this.#durableAt === 'commit' || fsyncSkipped('registry-commit')) return
    if (this.#wal === undefined) {
      try {
        this.#wal = fs.openSync(`${this.file}-wal`, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW)
      } catch (err) {
        // No WAL: nothing committed since the database was last whole.
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return
        throw err
      }
    }
    await fdatasyncFd(this.#wal)
    void this.#checkpointer?.consider()
  }

  /** Checkpoint counts (tests). */
  get checkpoints(): { asked: number; done: number; failed: boolean } | undefined {
    const c = this.#checkpointer
    return c === undefined ? undefined : { asked: c.asked, done: c.done, failed: c.failed }
  }

  /** A large run is over: the checkpoint thread ends now, not after its idle wait. */
  releaseCheckpointThread(): void {
    this.#checkpointer?.release()
  }

  /** A large run is over: each connection gives back the pages it read, which SQLite keeps until it closes. */
  releaseCaches(): void {
    for (const db of [this.#db, this.#claimsConnection?.db]) {
      try {
        if (db?.open === true) db.pragma('shrink_memory')
      } catch {
        // A cache kept costs memory only; the next release tries again.
      }
    }
  }

  /** Checkpoint threads (tests). */
  get checkpointThread(): { started: number; running: boolean } | undefined {
    const c = this.#checkpointer
    return c === undefined ? undefined : { started: c.started, running: c.running }
  }

  claimStore(): SqliteClaimStore {
    return this.#claimsConnectionOpen().claims
  }

  /** The rows, relisted only after another connection committed. */
  snapshot(): RowsSnapshot {
    try {
      const version = this.#claimsConnectionOpen().dataVersion.get() ?? 0
      if (this.#snapshot?.version !== version) {
        this.#snapshot = { version, rows: listedSnapshot(this.list()) }
      }
      return this.#snapshot.rows
    } catch (err) {
      throw this.coded(err)
    }
  }

  /** Both connections answer (data_version reads no rows). */
  ping(): void {
    this.health()
    try {
      this.#stmt.ping.get()
      this.#claimsConnectionOpen().dataVersion.get()
    } catch (err) {
      throw this.coded(err)
    }
  }

  #claimsConnectionOpen(): ClaimsConnection {
    if (this.#claimsConnection === undefined) {
      const db = openClaimsConnection(this.file)
      if (this.#checkpointer?.failed === false) db.pragma('wal_autocheckpoint = 0')
      this.#claimsConnection = {
        db,
        dataVersion: db.prepare<[], number>('PRAGMA data_version').pluck(),
        claims: SqliteClaimStore.on(db),
      }
    }
    return this.#claimsConnection
  }

  list(): Route[] {
    return this.#stmt.list.all().map(toRoute)
  }

  get(host: string): Route | undefined {
    const r = this.#stmt.get.get(host)
    return r === undefined ? undefined : toRoute(r)
  }

  /** What instance keys scan between runs (design §4.5). */
  addedAfter(after: string): Array<{ host: string; createdAt: string }> {
    try {
      return this.#stmt.addedAfter.all(after)
    } catch (err) {
      throw this.coded(err)
    }
  }

  add(route: Route, opts: AddOptions = {}): void {
    validateRoute(route)
    const at = this.#now().toISOString()
    // IMMEDIATE: the rows the claims check cannot change before the insert commits.
    const insert = this.#db.transaction(() => {
      if (opts.refuseClaimed === true) refuseClaimedPaths(route, this.list())
      this.#stmt.insert.run(route.host, route.kind, route.socket, route.dir, route.db, route.hibernate ? 1 : 0, at, at)
    })
    try {
      insert.immediate()
    } catch (err) {
      // The insert detects a duplicate, so two writers cannot both pass an earlier check.
      if (err instanceof Database.SqliteError && err.code === 'SQLITE_CONSTRAINT_PRIMARYKEY')
        throw errors.hostExists(route.host)
      throw err
    }
  }

  /** All or none, claims checked against stored rows and the batch. */
  addMany(routes: readonly Route[]): void {
    this.#db
      .transaction(() => {
        const claims = new PathClaims([...this.list(), ...routes])
        for (const route of routes) {
          refuseClaimedIn(claims, route)
          this.add(route)
        }
      })
      .immediate()
  }

  remove(host: string): boolean {
    return this.#stmt.remove.run(host).changes > 0
  }

  setPaths(rows: ReadonlyArray<{ host: string } & RowPaths>): void {
    // Never commit a move into a file no longer the registry: the pass then moves the files back.
    this.health()
    const at = this.#now().toISOString()
    this.#carrying(
      () => {
        for (const r of rows) {
          const bad = pathsError(r, r.host)
          if (bad !== null) throw bad
          if (this.#stmt.setPaths.run(r.dir, r.socket, r.db, at, r.host).changes === 0) {
            throw errors.notFound(`setPaths: host ${r.host} is not in the registry; no row was rewritten`)
          }
        }
      },
      new Map(rows.map((r) => [r.host, r])),
    )
  }

  /** A write's wait on another process's lock before SQLITE_BUSY (design §2.2). */
  waitOnLocksAtMost(ms: number): void {
    this.#db.pragma(`busy_timeout = ${ms}`)
  }

  nextGeneration(): number {
    // No fence, so no move, on a registry that cannot be trusted.
    this.health()
    const row = this.#carrying(() => this.#stmt.nextGeneration.get(), undefined)
    if (row === undefined) throw new Error(`${this.file}: the generation counter is missing from meta`)
    return row.generation
  }

  /** The snapshot is patched when no other connection committed (data_version). */
  #carrying<T>(write: () => T, rewritten: ReadonlyMap<string, RowPaths> | undefined): T {
    const conn = this.#claimsConnectionOpen()
    let mine: number | undefined
    const result = this.#db
      .transaction(() => {
        const out = write()
        if (this.#snapshot !== undefined && conn.dataVersion.get() === this.#snapshot.version)
          mine = this.#stmt.ping.get()
        return out
      })
      .immediate()
    const before = this.#snapshot
    if (mine === undefined || before === undefined) return result
    const version = conn.dataVersion.get() ?? 0
    if (this.#stmt.ping.get() !== mine) return result
    this.#snapshot = { version, rows: rewritten === undefined ? before.rows : carriedSnapshot(before.rows, rewritten) }
    return result
  }
}

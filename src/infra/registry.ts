// The box's registry, `<data>/registry.db` (design §2): the routes the box
// serves, the wake claims the activator holds, and the fence generation
// counter; whether the routes changed since the last look, and whether the
// database answers and is still its file (registry-watch.ts). better-sqlite3
// is synchronous, which lets a move's row rewrite be one transaction.
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

/** How long a statement waits for another process's write lock (the CLI beside the agent). */
const BUSY_TIMEOUT_MS = 5000

/** The agent's wait on a foreign write lock: long enough for a sibling's commit, never for a held lock. */
export const AGENT_BUSY_TIMEOUT_MS = 25

/** SQLite's answer when another connection holds the write lock past the busy timeout. */
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
  /** The clock rows and claims are stamped with; tests pin it. */
  now?: () => Date
  /**
   * false: the file must exist already (a command beside a running agent,
   * which must not create a database that agent never reads). Default true.
   */
  create?: boolean
  /**
   * When a commit is on disk (design §3.5): 'commit' (the default) when its
   * transaction returns; 'sync' once sync() answers, the WAL fsynced on the
   * pool so the agent's loop never waits on the disk (design §3.6).
   */
  durableAt?: 'commit' | 'sync'
  /** The checkpoint thread's script (durableAt 'sync'); tests hand in one that fails. */
  checkpointThread?: URL
  /** How long the checkpoint thread is kept after its last checkpoint (wal-checkpointer.ts; tests shorten it). */
  checkpointThreadIdleMs?: number
}

/** Opens the file as a database, a failure named with its path; a missing file refused when it must exist. */
function openFile(file: string, create: boolean): Database.Database {
  try {
    return new Database(file, { fileMustExist: !create })
  } catch (err) {
    if (!create && !fs.existsSync(file)) throw errors.registryGone(file)
    throw errors.registryUnopenable(file, err)
  }
}

function insidePath(child: string, parent: string): boolean {
  // Paths the pass built are normal already: a prefix decides, where
  // path.relative would resolve both (some 40% of a group commit's time on
  // the loop's thread, design §3.6). Any other pair goes by path.relative.
  if (isNormalPath(child) && isNormalPath(parent)) return child.startsWith(`${parent}/`)
  const rel = path.relative(parent, child)
  return rel !== '' && rel !== '..' && !rel.startsWith(`..${path.sep}`) && !path.isAbsolute(rel)
}

/**
 * Why the row's paths cannot be stored, or null. Paths are compared as
 * strings by every rule of the pass, so a relative one would mean a
 * different directory to each process that reads it; a db outside its dir
 * would be left behind when the dir moves.
 */
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

/**
 * Throws the coded error `add` would refuse the route with (duplicates
 * aside), so a caller can check before it creates anything for the row.
 */
export function validateRoute(route: Route): void {
  requireValidHost(route.host)
  if (!ROUTE_KINDS.includes(route.kind)) {
    throw errors.badRequest(`${route.host}: kind ${JSON.stringify(route.kind)} is not one of ${ROUTE_KINDS.join(', ')}`)
  }
  const bad = pathsError(route, route.host)
  if (bad !== null) throw bad
}

/**
 * Throws `path_claimed` when another of rows claims route's dir (the same
 * directory, one inside it, or one around it) or its socket: the rule that
 * makes a row `conflict` (design §1.1), asked before such a row is stored.
 */
export function refuseClaimedPaths(route: Route, rows: readonly Route[]): void {
  refuseClaimedIn(new PathClaims(rows.filter((r) => r.host !== route.host)), route)
}

/** Throws `path_claimed` when another row of claims claims route's dir, or else its socket. */
function refuseClaimedIn(claims: PathClaims, route: Route): void {
  const claimant =
    (route.dir !== '' ? claims.dirClaimant(route.dir, route.host) : undefined) ??
    (route.socket !== '' ? claims.socketClaimant(route.socket, route.host) : undefined)
  if (claimant !== undefined) throw errors.pathClaimed(route.host, claimant.reason, claimant.host)
}

function toRoute(r: RouteRow): Route {
  // The table's CHECK constraints hold kind to the four kinds and hibernate to 0/1.
  return {
    host: r.host,
    kind: r.kind as RouteKind,
    socket: r.socket,
    dir: r.dir,
    db: r.db,
    hibernate: r.hibernate === 1,
  }
}

// Prepared once per Registry: the pass runs these per host, and a statement
// parsed once is a statement that cannot fail to parse mid-move.
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

/**
 * The registry's second connection: claims commit on it, and it watches
 * the routes. `PRAGMA data_version` moves whenever another connection has
 * committed since this one last looked (the routes connection's row
 * rewrites, the CLI beside the agent), never on its own commits. So a
 * claim, committed here, never makes the next snapshot list the rows again.
 */
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
  /** Whether the file at the path is still the one opened, a database, with room (design §2.2). */
  readonly #watch: RegistryWatch
  readonly #durableAt: 'commit' | 'sync'
  #claimsConnection: ClaimsConnection | undefined
  #snapshot: { version: number; rows: RowsSnapshot } | undefined
  /** The WAL, opened for sync() at its first call. */
  #wal: number | undefined
  /** Where the agent's checkpoints are made (durableAt 'sync'): off the loop's thread, until it fails. */
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

  /**
   * The agent's connections never checkpoint (their commits would wait on
   * the checkpoint's fsyncs): a thread of the registry's own does, and
   * should it fail, they go back to checkpointing themselves (design §3.6).
   */
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

  /** Opens (creating when absent) `<dataDir>/registry.db` and brings its schema up to date. */
  static open(dataDir: string, opts: RegistryOptions = {}): Registry {
    fs.mkdirSync(dataDir, { recursive: true })
    const file = path.join(dataDir, REGISTRY_FILE)
    const db = openFile(file, opts.create ?? true)
    try {
      db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`)
      // WAL lets the agent read while the CLI writes, and the reverse.
      const mode = db.pragma('journal_mode = WAL', { simple: true })
      if (mode !== 'wal') throw new Error(`${file}: could not switch to WAL mode (journal_mode is ${String(mode)})`)
      // A row rewrite is a move's commit point: it must be on disk before
      // the move's journal goes, or a power cut could undo a move whose
      // files have already been renamed: FULL when the transaction returns,
      // NORMAL (no fsync at a commit) when sync() makes it so.
      // (A test may take that fsync out to show the power-loss audit notices, §3.5.)
      const durableAt = opts.durableAt ?? 'commit'
      db.pragma(`synchronous = ${fsyncSkipped('registry-commit') ? 'OFF' : durableAt === 'commit' ? 'FULL' : 'NORMAL'}`)
      migrate(db)
      return new Registry(file, db, opts.now ?? (() => new Date()), { ...opts, durableAt })
    } catch (err) {
      db.close()
      throw err instanceof Database.SqliteError ? errors.registryUnopenable(file, err) : err
    }
  }

  /** Where the registry's faults are said, once each (the agent's logger). */
  logFaultsTo(logger: Pick<Logger, 'error' | 'warn' | 'info'>): void {
    this.#watch.logger = logger
  }

  /**
   * Throws the coded fault (registry_corrupt) unless `PRAGMA quick_check`
   * finds the database whole: the agent asks once, before it trusts a row.
   */
  verify(): void {
    let answer: unknown
    try {
      answer = this.#db.pragma('quick_check', { simple: true })
    } catch (err) {
      throw this.coded(err)
    }
    if (answer !== 'ok') throw this.#watch.corrupt(`PRAGMA quick_check answered ${JSON.stringify(answer)}`)
  }

  /**
   * Throws the registry's coded fault (removed, replaced, corrupt, full)
   * when its file can no longer be served from: asked before a claim is
   * judged, and by readiness. A stat and a 16-byte read.
   */
  health(): void {
    this.#watch.check()
  }

  /** The fault found so far (no I/O): readiness asks again at once when there is one. */
  get fault(): AppError | null {
    return this.#watch.fault
  }

  /** The coded error a failed registry call stands for (registry_busy, registry_full, registry_corrupt), or err. */
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

  /**
   * Every commit made so far on disk: the WAL fdatasynced off the calling
   * thread (a WAL frame counts only with the frames before it, so this
   * covers each commit before it, both connections' alike). Answers at once
   * where each commit was on disk when it returned (durableAt 'commit').
   */
  async sync(): Promise<void> {
    if (this.#durableAt === 'commit' || fsyncSkipped('registry-commit')) return
    if (this.#wal === undefined) {
      try {
        this.#wal = fs.openSync(`${this.file}-wal`, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW)
      } catch (err) {
        // No WAL yet: nothing was committed since the database was last whole.
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return
        throw err
      }
    }
    await fdatasyncFd(this.#wal)
    void this.#checkpointer?.consider()
  }

  /** The checkpoints asked and made off the loop's thread so far, and whether it has failed or stopped (tests). */
  get checkpoints(): { asked: number; done: number; failed: boolean } | undefined {
    const c = this.#checkpointer
    return c === undefined ? undefined : { asked: c.asked, done: c.done, failed: c.failed }
  }

  /** A large run is over: the checkpoint thread ends now instead of after its idle wait (wal-checkpointer.ts). */
  releaseCheckpointThread(): void {
    this.#checkpointer?.release()
  }

  /** The checkpoint threads started so far, and whether one lives now (tests). */
  get checkpointThread(): { started: number; running: boolean } | undefined {
    const c = this.#checkpointer
    return c === undefined ? undefined : { started: c.started, running: c.running }
  }

  /** The wake claims' store, on the registry's claims connection (opened on first use, closed with the registry). */
  claimStore(): SqliteClaimStore {
    return this.#claimsConnectionOpen().claims
  }

  /**
   * The rows, listed again only when someone has committed to the registry
   * since the last look: a claim is answered from the rows as they are at
   * that tick without listing a registry of thousands of rows for each one.
   */
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

  /**
   * Throws unless the database answers a query (its data_version: no rows
   * read) on both connections: the rows are read on one, and the claims and
   * the snapshot's change detection run on the other.
   */
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

  /**
   * The rows added after a time (their created_at, as the writer's clock
   * stamped it, later than after): what the agent's instance keys look at
   * between runs instead of the whole registry (design §4.5). One scan in
   * SQLite, a few rows out.
   */
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
    // IMMEDIATE: the rows the claims are checked against cannot change
    // (another `routes add`) before the insert commits.
    const insert = this.#db.transaction(() => {
      if (opts.refuseClaimed === true) refuseClaimedPaths(route, this.list())
      this.#stmt.insert.run(route.host, route.kind, route.socket, route.dir, route.db, route.hibernate ? 1 : 0, at, at)
    })
    try {
      insert.immediate()
    } catch (err) {
      // The insert itself detects the duplicate, so two writers cannot both pass a check made before it.
      if (err instanceof Database.SqliteError && err.code === 'SQLITE_CONSTRAINT_PRIMARYKEY')
        throw errors.hostExists(route.host)
      throw err
    }
  }

  /**
   * Adds every route (`layoutd routes import`) in one IMMEDIATE
   * transaction, or none: each through add (validated, a duplicate host
   * refused), the first whose dir or socket a stored row or another of the
   * batch claims refused, against one index of both built once rather than
   * the registry listed per row.
   */
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
    // A move's commit point, never written into a file that is no longer
    // the registry at its path (removed, replaced, corrupt): the pass then
    // moves the files back, and the row still says where they are.
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

  /**
   * How long a write of this connection waits on another process's lock before SQLITE_BUSY. The CLI waits 5 s;
   * the agent, whose connection is on the thread that answers the activator, AGENT_BUSY_TIMEOUT_MS (design §2.2).
   */
  waitOnLocksAtMost(ms: number): void {
    this.#db.pragma(`busy_timeout = ${ms}`)
  }

  nextGeneration(): number {
    // No fence is raised, so no move starts, on a registry that cannot be trusted.
    this.health()
    const row = this.#carrying(() => this.#stmt.nextGeneration.get(), undefined)
    if (row === undefined) throw new Error(`${this.file}: the generation counter is missing from meta`)
    return row.generation
  }

  /**
   * write in one IMMEDIATE transaction, carrying the snapshot over it (so
   * a wake after each batch of a converge need not list 10,000 rows): when
   * the snapshot was current inside the transaction, whose write lock keeps
   * other writers out, and the routes connection's data_version (which only
   * another connection's commit moves) still reads as it did in there, the
   * new snapshot is the old one patched. Otherwise the next look lists.
   */
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

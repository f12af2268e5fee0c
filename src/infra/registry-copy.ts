// The registry's backup and restore (design §2.2, §8): `layoutd registry
// backup FILE` uses SQLite's online backup, so a copy beside a running agent
// is one moment, never torn; `registry restore FILE` checks FILE is a layoutd
// registry, then puts a copy in place durably, the agent stopped. Both write a
// temporary file and rename it, so a crash leaves one whole file. A copy is
// a single file (rollback journal); the agent turns it back to WAL on open.
import fs from 'node:fs'
import path from 'node:path'
import Database from 'better-sqlite3'
import { AppError, errorMessage, errors } from '../errors.js'
import { AGENT_HOLDER_FILE } from './agent-holder.js'
import { AgentLock, describeHolder } from './agent-lock.js'
import { fsyncDir } from './fsutil.js'
import { MIGRATIONS, type Migration } from './migrations.js'
import { REGISTRY_FILE } from './registry.js'

/** SQLite's files that belong to a database beside it: a WAL and its index, or a rollback journal. */
const SIDE_FILES = ['-wal', '-shm', '-journal'] as const

/** What a copy holds: its schema version and its rows. */
export interface CopyFacts {
  version: number
  routes: number
  wakes: number
}

/** The schema a layoutd registry at version n has: every object of the first n steps, as SQLite stores it. */
function schemaAt(n: number, steps: readonly Migration[] = MIGRATIONS): string[] {
  const db = new Database(':memory:')
  try {
    for (const step of steps.slice(0, n)) step.up(db)
    return objects(db)
  } finally {
    db.close()
  }
}

function objects(db: Database.Database): string[] {
  return db
    .prepare<[], { type: string; name: string; sql: string | null }>(
      "SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name",
    )
    .all()
    .map((o) => `${o.type} ${o.name}: ${o.sql ?? ''}`)
}

/**
 * Throws `not_a_registry` naming why, unless db is whole (quick_check) and
 * holds exactly the schema of a version this build knows, with the fence
 * generation counter. Answers what it holds.
 */
export function checkRegistry(db: Database.Database, file: string): CopyFacts {
  const refuse = (why: string) => errors.notARegistry(file, why)
  let version: number
  let check: unknown
  try {
    check = db.pragma('quick_check', { simple: true })
    version = db.pragma('user_version', { simple: true }) as number
  } catch (err) {
    throw refuse(`SQLite cannot read it: ${errorMessage(err)}`)
  }
  if (check !== 'ok') throw refuse(`PRAGMA quick_check answered ${JSON.stringify(check)}`)
  if (version < 1) throw refuse('it has no layoutd schema (user_version 0)')
  if (version > MIGRATIONS.length)
    throw refuse(`its schema version ${version} is newer than this build knows (${MIGRATIONS.length})`)
  const want = schemaAt(version)
  const have = objects(db)
  const differs = [...want.filter((o) => !have.includes(o)), ...have.filter((o) => !want.includes(o))]
  if (differs.length > 0) throw refuse(`its tables are not a layoutd registry's at version ${version}: ${differs[0]}`)
  const generation = db.prepare("SELECT value FROM meta WHERE key = 'generation'").pluck().get()
  if (generation === undefined) throw refuse('its fence generation counter is missing')
  const count = (table: string) => db.prepare(`SELECT count(*) FROM ${table}`).pluck().get() as number
  return { version, routes: count('routes'), wakes: count('wakes') }
}

/** Opens file as an existing SQLite database, or throws `not_a_registry` naming why. */
function openExisting(file: string, readonly: boolean): Database.Database {
  try {
    return new Database(file, { fileMustExist: true, readonly })
  } catch (err) {
    throw errors.notARegistry(file, errorMessage(err))
  }
}

/** Removes a file and what SQLite keeps beside it; absent ones are fine. */
function removeWithSides(file: string): void {
  for (const f of [file, ...SIDE_FILES.map((s) => file + s)]) fs.rmSync(f, { force: true })
}

/**
 * Copies the open database src to tmp with SQLite's online backup, makes
 * the copy a single file, checks it, and fsyncs it. Every page is asked
 * for in one step, so commits made meanwhile by other connections (the
 * agent's) restart the copy at most once per step, never starve it.
 */
async function copyTo(src: Database.Database, tmp: string, shownAs: string): Promise<CopyFacts> {
  removeWithSides(tmp)
  await src.backup(tmp, { progress: () => 0x7fffffff })
  const copy = new Database(tmp, { fileMustExist: true })
  let facts: CopyFacts
  try {
    copy.pragma('journal_mode = DELETE')
    facts = checkRegistry(copy, shownAs)
  } finally {
    copy.close()
  }
  const fd = fs.openSync(tmp, 'r')
  try {
    fs.fsyncSync(fd)
  } finally {
    fs.closeSync(fd)
  }
  return facts
}

/**
 * `registry backup FILE`: the registry of dataDir, as of one moment, at
 * dest (which must not exist yet). Safe beside a running agent: the online
 * backup reads as any reader does.
 */
export async function backupRegistry(dataDir: string, dest: string): Promise<CopyFacts> {
  const target = path.resolve(dest)
  if (fs.existsSync(target) || isSymlink(target)) throw errors.backupExists(target)
  const live = path.join(dataDir, REGISTRY_FILE)
  if (!fs.existsSync(live)) throw errors.registryUnopenable(live, new Error('there is no registry to back up'))
  const tmp = path.join(path.dirname(target), `.${path.basename(target)}.tmp-${process.pid}`)
  const src = new Database(live, { fileMustExist: true })
  try {
    src.pragma('busy_timeout = 5000')
    const facts = await copyTo(src, tmp, live)
    fs.renameSync(tmp, target)
    await fsyncDir(path.dirname(target))
    return facts
  } catch (err) {
    removeWithSides(tmp)
    throw err
  } finally {
    src.close()
  }
}

function isSymlink(p: string): boolean {
  try {
    return fs.lstatSync(p).isSymbolicLink()
  } catch {
    return false
  }
}

/** The data root's lock, taken for the restore: refused, naming the agent, while one runs. */
function lockForRestore(dataDir: string): AgentLock {
  try {
    return AgentLock.acquire(dataDir)
  } catch (err) {
    if (!(err instanceof AppError) || err.code !== 'data_dir_locked') throw err
    throw errors.restoreAgentRunning(dataDir, describeHolder(path.join(dataDir, AGENT_HOLDER_FILE)))
  }
}

/**
 * `registry restore FILE`: FILE, checked to be a layoutd registry, becomes
 * `D/registry.db`, with no agent running (the data root's lock is held
 * throughout, so none starts meanwhile). The live registry's -wal and -shm
 * (and any rollback journal) are removed, and that made durable, before
 * the copy is renamed into place: SQLite would otherwise replay the old
 * WAL's frames onto the restored file at the next open. Nothing is changed
 * before FILE has been read and checked whole.
 */
export async function restoreRegistry(dataDir: string, from: string): Promise<CopyFacts> {
  const source = path.resolve(from)
  const st = fs.statSync(source, { throwIfNoEntry: false })
  if (st === undefined) throw errors.notARegistry(source, 'there is no such file')
  if (!st.isFile()) throw errors.notARegistry(source, 'it is not a regular file')
  const src = openExisting(source, true)
  try {
    checkRegistry(src, source)
    const lock = lockForRestore(dataDir)
    try {
      return await putInPlace(src, source, dataDir)
    } finally {
      lock.release()
    }
  } finally {
    src.close()
  }
}

/** The checked source copied to a temporary file beside the registry, the live one's side files gone, renamed in. */
async function putInPlace(src: Database.Database, source: string, dataDir: string): Promise<CopyFacts> {
  const live = path.join(dataDir, REGISTRY_FILE)
  const tmp = `${live}.restoring`
  try {
    const facts = await copyTo(src, tmp, source)
    for (const side of SIDE_FILES) fs.rmSync(live + side, { force: true })
    await fsyncDir(dataDir)
    fs.renameSync(tmp, live)
    await fsyncDir(dataDir)
    return facts
  } catch (err) {
    removeWithSides(tmp)
    throw err
  }
}

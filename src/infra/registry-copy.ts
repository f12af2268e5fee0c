// The registry's backup and restore (design §2.2, §8): `layoutd registry backup FILE` uses SQLite's online backup,
// so a copy beside a running agent is one moment, never torn; `registry restore FILE` checks FILE is a layoutd
// registry, then puts a copy in place durably, the agent stopped. Both rename a whole temp file into place.
import fs from 'node:fs'
import path from 'node:path'
import Database from 'better-sqlite3'
import { AppError, errorMessage, errors } from '../errors.js'
import { AGENT_HOLDER_FILE } from './agent-holder.js'
import { AgentLock, describeHolder } from './agent-lock.js'
import { fsyncDir } from './fsutil.js'
import { MIGRATIONS, type Migration } from './migrations.js'
import { REGISTRY_FILE } from './registry.js'

/** A WAL and its index, or a journal. */
const SIDE_FILES = ['-wal', '-shm', '-journal'] as const

export interface CopyFacts {
  version: number
  routes: number
  wakes: number
}

/** A registry's schema at version n, as SQLite stores it. */
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

/** Throws `not_a_registry` unless db is whole and exactly a known version's schema, with the generation counter. */
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

function openExisting(file: string, readonly: boolean): Database.Database {
  try {
    return new Database(file, { fileMustExist: true, readonly })
  } catch (err) {
    throw errors.notARegistry(file, errorMessage(err))
  }
}

function removeWithSides(file: string): void {
  for (const f of [file, ...SIDE_FILES.map((s) => file + s)]) fs.rmSync(f, { force: true })
}

/** Made one file, checked, fsynced; all pages in one step, so others' commits restart it at most once per step. */
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

/** dest must not exist. */
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

/** Refused while an agent runs. */
function lockForRestore(dataDir: string): AgentLock {
  try {
    return AgentLock.acquire(dataDir)
  } catch (err) {
    if (!(err instanceof AppError) || err.code !== 'data_dir_locked') throw err
    throw errors.restoreAgentRunning(dataDir, describeHolder(path.join(dataDir, AGENT_HOLDER_FILE)))
  }
}

/** The live -wal, -shm and journal go durably before the rename, or SQLite would replay the old WAL onto the copy. */
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

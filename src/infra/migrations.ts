// The registry's schema, as numbered steps. `PRAGMA user_version` holds how
// many steps a database has had; opening it applies the rest, each in its
// own transaction together with the version bump, so a crash mid-migration
// leaves the database at a step boundary, never half-way through one.
// Append new steps; never edit or reorder a step a released build has run.
import { errorMessage } from '../errors.js'
import type Database from 'better-sqlite3'

export interface Migration {
  /** What the step does, for the error when it fails. */
  readonly name: string
  up(db: Database.Database): void
}

export const MIGRATIONS: readonly Migration[] = [
  {
    name: 'routes, wakes and meta',
    up(db) {
      db.exec(`
        CREATE TABLE routes (
          host TEXT PRIMARY KEY,
          kind TEXT NOT NULL CHECK (kind IN ('instance', 'sidecar', 'static', 'service')),
          socket TEXT NOT NULL DEFAULT '',
          dir TEXT NOT NULL DEFAULT '',
          db TEXT NOT NULL DEFAULT '',
          hibernate INTEGER NOT NULL CHECK (hibernate IN (0, 1)),
          created_at TEXT NOT NULL,
          updated_at TEXT NOT NULL
        );
        CREATE TABLE wakes (
          host TEXT PRIMARY KEY,
          claimed_at TEXT NOT NULL
        );
        CREATE TABLE meta (
          key TEXT PRIMARY KEY,
          value TEXT NOT NULL
        );
        INSERT INTO meta (key, value) VALUES ('generation', '0');
      `)
    },
  },
]

function userVersion(db: Database.Database): number {
  return db.pragma('user_version', { simple: true }) as number
}

/**
 * Brings db up to the last step and returns its version. Refuses a
 * database a newer build has migrated: this build cannot know what those
 * steps changed, and writing to it could undo them.
 */
export function migrate(db: Database.Database, steps: readonly Migration[] = MIGRATIONS): number {
  const target = steps.length
  // IMMEDIATE takes the write lock before the version is read, so the CLI
  // and the agent opening the same file at once cannot both apply a step.
  const step = db.transaction((): boolean => {
    const version = userVersion(db)
    if (version > target) {
      throw new Error(
        `${db.name} is at schema version ${version}, newer than this build knows (${target}): ` +
          'run a build at least as new as the one that last opened it',
      )
    }
    const next = steps[version]
    if (next === undefined) return false
    try {
      next.up(db)
    } catch (err) {
      throw new Error(`${db.name}: migration ${version + 1} (${next.name}) failed: ${errorMessage(err)}`, {
        cause: err,
      })
    }
    db.pragma(`user_version = ${version + 1}`)
    return true
  })
  let more = true
  while (more) more = step.immediate()
  return target
}

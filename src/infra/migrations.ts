// The registry's schema, as numbered steps. `PRAGMA user_version` counts the steps applied; each runs in one
// transaction with its bump, so a crash leaves a step boundary. Append only: never edit a step a release has run.
import { errorMessage } from '../errors.js'
import type Database from 'better-sqlite3'

export interface Migration {
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

/** Refuses a database a newer build migrated: writing to it could undo steps this build cannot know. */
export function migrate(db: Database.Database, steps: readonly Migration[] = MIGRATIONS): number {
  const target = steps.length
  // IMMEDIATE locks before the version is read, so two openers cannot both apply a step.
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

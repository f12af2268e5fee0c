// Where a host's files live in each layout (design §2). Pure path
// arithmetic; every function refuses an invalid host rather than build a
// path from it.
import path from 'node:path'
import { hostError, requireValidHost } from './hostname.js'
import type { Mode } from './modes.js'
import type { Route, RowPaths } from './schemas.js'

/** A nested socket path longer than this cannot be bound (sun_path is 108 bytes with its NUL). */
export const MAX_SOCKET_PATH = 107

export interface Dirs {
  dataDir: string
  runDir: string
}

function checked(host: string): string {
  requireValidHost(host)
  return host
}

export function flatPaths(d: Dirs, host: string): RowPaths {
  const h = checked(host)
  return { dir: path.join(d.dataDir, 'apps', h), socket: path.join(d.runDir, `${h}.sock`), db: '' }
}

/** The host's own nested root, `D/nested/<host>` (mode 0750). */
export function nestedRoot(d: Dirs, host: string): string {
  return path.join(d.dataDir, 'nested', checked(host))
}

export function nestedPaths(d: Dirs, host: string): RowPaths {
  const root = nestedRoot(d, host)
  return { dir: path.join(root, 'data'), socket: path.join(root, 'run', 'app.sock'), db: '' }
}

export function pathsFor(d: Dirs, host: string, mode: Mode): RowPaths {
  return mode === 'nested' ? nestedPaths(d, host) : flatPaths(d, host)
}

/** The row's db carried from one dir to another: the same path relative to dir. Empty stays empty. */
export function carryDb(db: string, fromDir: string, toDir: string): string {
  if (db === '') return ''
  const rel = path.relative(fromDir, db)
  if (rel === '' || rel.startsWith('..') || path.isAbsolute(rel)) {
    throw new Error(`db ${JSON.stringify(db)} is not inside dir ${JSON.stringify(fromDir)}`)
  }
  return path.join(toDir, rel)
}

/** Whether the row's dir and socket have the given shape (its db, if any, inside dir). */
export function hasShape(d: Dirs, route: Route, mode: Mode): boolean {
  if (hostError(route.host) !== null) return false
  const want = pathsFor(d, route.host, mode)
  if (route.dir !== want.dir || route.socket !== want.socket) return false
  if (route.db === '') return true
  const rel = path.relative(route.dir, route.db)
  return rel !== '' && !rel.startsWith('..') && !path.isAbsolute(rel)
}

/** The row is at the nested paths (design §2). */
export function isNested(d: Dirs, route: Route): boolean {
  return hasShape(d, route, 'nested')
}

export function isFlat(d: Dirs, route: Route): boolean {
  return hasShape(d, route, 'flat')
}

/** An activator-managed row: an instance that hibernates and has a socket (design §1). */
export function activatorManaged(route: Route): boolean {
  return route.kind === 'instance' && route.hibernate && route.socket !== ''
}

export function external(route: Route): boolean {
  return route.kind === 'instance' && !route.hibernate && route.socket !== ''
}

export function journalPath(d: Dirs, host: string): string {
  return path.join(d.dataDir, 'layout', `${checked(host)}.journal`)
}

export function holdPath(d: Dirs, host: string): string {
  return path.join(d.dataDir, 'layout', `${checked(host)}.hold`)
}

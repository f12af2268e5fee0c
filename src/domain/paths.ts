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

/** The parents every host's paths are built under, joined once per Dirs. */
interface Parents {
  /** The Dirs' fields they were joined from: a Dirs changed since is joined again. */
  dataDir: string
  runDir: string
  apps: string
  nested: string
  run: string
}

const parentsOf = new WeakMap<Dirs, Parents>()

/**
 * A valid host is one path segment (no `/`, never `.` or `..`), so a path
 * under a joined parent is the parent, `/` and the host: what path.join
 * would build, without normalizing the whole path again for each of
 * 10,000 rows. A parent that is the root itself (`/`) ends with its slash.
 */
function parents(d: Dirs): Parents {
  let p = parentsOf.get(d)
  if (p === undefined || p.dataDir !== d.dataDir || p.runDir !== d.runDir) {
    p = {
      dataDir: d.dataDir,
      runDir: d.runDir,
      apps: withSlash(path.join(d.dataDir, 'apps')),
      nested: withSlash(path.join(d.dataDir, 'nested')),
      run: withSlash(path.normalize(d.runDir)),
    }
    parentsOf.set(d, p)
  }
  return p
}

function withSlash(dir: string): string {
  if (dir === '.') return '' // path.join('.', host) is host
  return dir.endsWith('/') ? dir : `${dir}/`
}

export function flatPaths(d: Dirs, host: string): RowPaths {
  const h = checked(host)
  const p = parents(d)
  return { dir: `${p.apps}${h}`, socket: `${p.run}${h}.sock`, db: '' }
}

/** The host's own nested root, `D/nested/<host>` (mode 0750). */
export function nestedRoot(d: Dirs, host: string): string {
  return `${parents(d).nested}${checked(host)}`
}

export function nestedPaths(d: Dirs, host: string): RowPaths {
  const root = nestedRoot(d, host)
  return { dir: `${root}/data`, socket: `${root}/run/app.sock`, db: '' }
}

export function pathsFor(d: Dirs, host: string, mode: Mode): RowPaths {
  return mode === 'nested' ? nestedPaths(d, host) : flatPaths(d, host)
}

/**
 * A path already as path.resolve makes it: absolute, no empty, `.` or `..`
 * segment, no trailing slash (`/` itself is not matched). Every path the
 * pass and the CLI store has this form, so a caller that compares paths
 * as strings can skip resolving them (classify.ts, the registry's checks).
 */
const NORMAL_PATH = /^(?:\/(?!\.{1,2}(?:\/|$))[^/]+)+$/

export function isNormalPath(p: string): boolean {
  return NORMAL_PATH.test(p)
}

/** A clean relative rest: segments with no `.`, `..` or empty one, not starting with `..`. */
const CLEAN_REST = /^(?!\.\.)(?:[^/]+\/)*[^/]+$/
const DOT_SEGMENT = /(?:^|\/)\.{1,2}(?:\/|$)/

/** What follows dir and a slash in p when that is a clean rest (CLEAN_REST, no dot segment), else undefined. */
function cleanRestBelow(dir: string, p: string): string | undefined {
  if (p.length <= dir.length + 1 || !p.startsWith(dir) || p.charCodeAt(dir.length) !== 0x2f) return undefined
  const rest = p.slice(dir.length + 1)
  return CLEAN_REST.test(rest) && !DOT_SEGMENT.test(rest) ? rest : undefined
}

/** The row's db carried from one dir to another: the same path relative to dir. Empty stays empty. */
export function carryDb(db: string, fromDir: string, toDir: string): string {
  if (db === '') return ''
  // The common case without resolving the paths (a plan carries every
  // row's): both dirs normal, and db fromDir, a slash and a clean rest.
  const rest = cleanRestBelow(fromDir, db)
  if (rest !== undefined && isNormalPath(fromDir) && isNormalPath(toDir)) return `${toDir}/${rest}`
  const rel = path.relative(fromDir, db)
  if (rel === '' || rel.startsWith('..') || path.isAbsolute(rel)) {
    throw new Error(`db ${JSON.stringify(db)} is not inside dir ${JSON.stringify(fromDir)}`)
  }
  return path.join(toDir, rel)
}

/**
 * hasShape's answers per row, with the dirs they were judged against. A
 * row is never changed in place (a rewrite is a new object), so a report
 * or a plan built again over 10,000 rows validates and joins the paths
 * only of the rows that changed.
 */
const shapes = new WeakMap<Route, { dataDir: string; runDir: string; flat?: boolean; nested?: boolean }>()

/** Whether the row's dir and socket have the given shape (its db, if any, inside dir). */
export function hasShape(d: Dirs, route: Route, mode: Mode): boolean {
  let memo = shapes.get(route)
  if (memo?.dataDir !== d.dataDir || memo.runDir !== d.runDir)
    shapes.set(route, (memo = { dataDir: d.dataDir, runDir: d.runDir }))
  return (memo[mode] ??= shapeOf(d, route, mode))
}

function shapeOf(d: Dirs, route: Route, mode: Mode): boolean {
  if (hostError(route.host) !== null) return false
  const want = pathsFor(d, route.host, mode)
  if (route.dir !== want.dir || route.socket !== want.socket) return false
  return route.db === '' || dbInside(route.dir, route.db)
}

/** Whether db lies inside dir (not dir itself). */
function dbInside(dir: string, db: string): boolean {
  // The common case without resolving both paths: db is dir, a slash and a clean rest.
  if (cleanRestBelow(dir, db) !== undefined) return true
  const rel = path.relative(dir, db)
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

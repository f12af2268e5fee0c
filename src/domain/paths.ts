// Where a host's files live in each layout (design §2). Every function
// refuses an invalid host rather than build a path from it.
import path from 'node:path'
import { hostError, requireValidHost } from './hostname.js'
import type { Mode } from './modes.js'
import type { Route, RowPaths } from './schemas.js'

/** sun_path is 108 bytes with its NUL. */
export const MAX_SOCKET_PATH = 107

export interface Dirs {
  dataDir: string
  runDir: string
}

function checked(host: string): string {
  requireValidHost(host)
  return host
}

interface Parents {
  /** A changed Dirs is joined again. */
  dataDir: string
  runDir: string
  apps: string
  nested: string
  run: string
}

const parentsOf = new WeakMap<Dirs, Parents>()

/** A valid host is one segment, so parent + host is path.join's answer, normalized once. */
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

/** `D/nested/<host>`, 0710 (design §2). */
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

/** As path.resolve makes it: every stored path is, so a compare need not resolve. */
const NORMAL_PATH = /^(?:\/(?!\.{1,2}(?:\/|$))[^/]+)+$/

export function isNormalPath(p: string): boolean {
  return NORMAL_PATH.test(p)
}

const CLEAN_REST = /^(?!\.\.)(?:[^/]+\/)*[^/]+$/
const DOT_SEGMENT = /(?:^|\/)\.{1,2}(?:\/|$)/

function cleanRestBelow(dir: string, p: string): string | undefined {
  if (p.length <= dir.length + 1 || !p.startsWith(dir) || p.charCodeAt(dir.length) !== 0x2f) return undefined
  const rest = p.slice(dir.length + 1)
  return CLEAN_REST.test(rest) && !DOT_SEGMENT.test(rest) ? rest : undefined
}

/** The same path relative to toDir; empty stays empty. */
export function carryDb(db: string, fromDir: string, toDir: string): string {
  if (db === '') return ''
  // The common case, unresolved: a plan carries every row's.
  const rest = cleanRestBelow(fromDir, db)
  if (rest !== undefined && isNormalPath(fromDir) && isNormalPath(toDir)) return `${toDir}/${rest}`
  const rel = path.relative(fromDir, db)
  if (rel === '' || rel.startsWith('..') || path.isAbsolute(rel)) {
    throw new Error(`db ${JSON.stringify(db)} is not inside dir ${JSON.stringify(fromDir)}`)
  }
  return path.join(toDir, rel)
}

/** Rows are never changed in place, so a rebuilt report judges only new ones. */
const shapes = new WeakMap<Route, { dataDir: string; runDir: string; flat?: boolean; nested?: boolean }>()

/** Its db, if any, inside dir. */
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

function dbInside(dir: string, db: string): boolean {
  if (cleanRestBelow(dir, db) !== undefined) return true
  const rel = path.relative(dir, db)
  return rel !== '' && !rel.startsWith('..') && !path.isAbsolute(rel)
}

export function isNested(d: Dirs, route: Route): boolean {
  return hasShape(d, route, 'nested')
}

export function isFlat(d: Dirs, route: Route): boolean {
  return hasShape(d, route, 'flat')
}

/** Design §1's activator-managed row. */
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

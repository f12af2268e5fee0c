// What a row is, for a wake and the status report alike (design §1.1).
// Pure: `fenced` comes from the pass's memory, so a wake never waits on disk.
import path from 'node:path'
import { hostError } from './hostname.js'
import type { RowLayout } from './modes.js'
import { external, isFlat, isNested, isNormalPath, type Dirs } from './paths.js'
import type { Classification } from './ports.js'
import { why, type ReasonCode, type Why } from './reason-codes.js'
import type { Route } from './schemas.js'

export interface ClassifyContext {
  dirs: Dirs
  fenced: (host: string) => Why | undefined
}

export interface Claimant {
  host: string
  code: Extract<ReasonCode, 'dir_claimed' | 'socket_claimed'>
  reason: string
}

// Paths compare as resolved strings; resolving an absolute path does no I/O.
function norm(p: string): string {
  return isNormalPath(p) ? p : path.resolve(p)
}

const INDEX_SHARDS = 64
const FNV_OFFSET = 0x811c9dc5
const FNV_PRIME = 0x01000193

function shardOfHash(h: number): number {
  return (h ^ (h >>> 16)) & (INDEX_SHARDS - 1)
}

/** Over the whole path: paths differ in the middle. */
function shardOf(key: string): number {
  let h = FNV_OFFSET
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), FNV_PRIME)
  return shardOfHash(h)
}

interface Ancestry {
  shard: number
  paths: string[]
  shards: number[]
}

const SLASH = 0x2f

const NO_ANCESTRY: Ancestry = { shard: 0, paths: [], shards: [] }

function ancestry(dir: string): Ancestry {
  if (!isNormalPath(dir)) {
    const paths: string[] = []
    for (let cur = dir, up = path.dirname(dir); up !== cur; cur = up, up = path.dirname(up)) paths.push(up)
    return { shard: shardOf(dir), paths, shards: paths.map(shardOf) }
  }
  // An ancestor's hash is the running hash at its slash: one pass hashes them all.
  const paths: string[] = []
  const shards: number[] = []
  let h = FNV_OFFSET
  for (let i = 0; i < dir.length; i++) {
    const c = dir.charCodeAt(i)
    if (c === SLASH && i > 0) {
      paths.push(dir.slice(0, i))
      shards.push(shardOfHash(h))
    }
    h = Math.imul(h ^ c, FNV_PRIME)
    if (i === 0) {
      paths.push('/')
      shards.push(shardOfHash(h))
    }
  }
  return { shard: shardOfHash(h), paths: paths.reverse(), shards: shards.reverse() }
}

/** Chunked: V8 copies a Set whole to grow it, and a shared ancestor holds every host. */
class HostBag implements Iterable<string> {
  readonly #chunks: Array<Set<string>> = []
  #size = 0

  constructor(hosts: readonly string[]) {
    for (const host of hosts) this.add(host)
  }

  get size(): number {
    return this.#size
  }

  add(host: string): void {
    for (const chunk of this.#chunks) if (chunk.has(host)) return
    let last = this.#chunks.at(-1)
    if (last === undefined || last.size >= BAG_CHUNK) {
      last = new Set()
      this.#chunks.push(last)
    }
    last.add(host)
    this.#size++
  }

  delete(host: string): void {
    for (let i = 0; i < this.#chunks.length; i++) {
      const chunk = this.#chunks[i] as Set<string>
      if (!chunk.delete(host)) continue
      this.#size--
      if (chunk.size === 0) this.#chunks.splice(i, 1)
      return
    }
  }

  *[Symbol.iterator](): Iterator<string> {
    for (const chunk of this.#chunks) yield* chunk
  }
}

const BAG_CHUNK = 1024

/** A name per path, a HostBag only where shared (saves memory); sharded, as V8 rehashes a Map whole. */
class PathIndex {
  readonly #shards: Array<Map<string, string | HostBag>> = Array.from(
    { length: INDEX_SHARDS },
    () => new Map<string, string | HostBag>(),
  )

  get(key: string, shard = shardOf(key)): string | HostBag | undefined {
    return this.shard(shard).get(key)
  }

  shard(n: number): Map<string, string | HostBag> {
    return this.#shards[n] as Map<string, string | HostBag>
  }
}

function push(index: PathIndex, key: string, host: string, shard = shardOf(key)): void {
  const m = index.shard(shard)
  const held = m.get(key)
  if (held === undefined) m.set(key, host)
  else if (typeof held === 'string') {
    if (held !== host) m.set(key, new HostBag([held, host]))
  } else held.add(host)
}

function drop(index: PathIndex, key: string, host: string, shard = shardOf(key)): void {
  const m = index.shard(shard)
  const held = m.get(key)
  if (held === undefined) return
  if (typeof held === 'string') {
    if (held === host) m.delete(key)
    return
  }
  held.delete(host)
  if (held.size === 0) m.delete(key)
}

/** The least, so the claimant named does not depend on the rows' order. */
function other(held: string | HostBag | undefined, host: string): string | undefined {
  if (held === undefined) return undefined
  if (typeof held === 'string') return held === host ? undefined : held
  let least: string | undefined
  for (const h of held) if (h !== host && (least === undefined || h < least)) least = h
  return least
}

/** Who else claims a dir, or one in or around it, costs the dir's depth, not the row count. */
export class PathClaims {
  readonly #dirs = new PathIndex()
  readonly #under = new PathIndex()
  readonly #sockets = new PathIndex()
  readonly #dirOf = new Map<string, string>()

  constructor(routes: readonly Route[] = []) {
    for (const row of routes) this.add(row)
  }

  /** One row at a time, so a caller can yield between rows. */
  add(row: Route): void {
    if (row.dir !== '') {
      const dir = norm(row.dir)
      const up = ancestry(dir)
      this.#dirOf.set(row.host, dir)
      push(this.#dirs, dir, row.host, up.shard)
      for (let i = 0; i < up.paths.length; i++) push(this.#under, up.paths[i] as string, row.host, up.shards[i])
    }
    if (row.socket !== '') push(this.#sockets, norm(row.socket), row.host)
  }

  remove(row: Route): void {
    if (row.dir !== '') {
      const dir = norm(row.dir)
      const up = ancestry(dir)
      this.#dirOf.delete(row.host)
      drop(this.#dirs, dir, row.host, up.shard)
      for (let i = 0; i < up.paths.length; i++) drop(this.#under, up.paths[i] as string, row.host, up.shards[i])
    }
    if (row.socket !== '') drop(this.#sockets, norm(row.socket), row.host)
  }

  /** The shared ancestors, where the big sets are, stay put. */
  replace(old: Route, now: Route): void {
    const was = old.dir === '' ? undefined : norm(old.dir)
    const is = now.dir === '' ? undefined : norm(now.dir)
    if (was !== is) {
      const before = was === undefined ? NO_ANCESTRY : ancestry(was)
      const after = is === undefined ? NO_ANCESTRY : ancestry(is)
      if (was !== undefined) {
        drop(this.#dirs, was, old.host, before.shard)
        for (let i = 0; i < before.paths.length; i++) {
          const a = before.paths[i] as string
          if (!after.paths.includes(a)) drop(this.#under, a, old.host, before.shards[i])
        }
      }
      if (is === undefined) this.#dirOf.delete(now.host)
      else {
        this.#dirOf.set(now.host, is)
        push(this.#dirs, is, now.host, after.shard)
        for (let i = 0; i < after.paths.length; i++) {
          const a = after.paths[i] as string
          if (!before.paths.includes(a)) push(this.#under, a, now.host, after.shards[i])
        }
      }
    }
    const sockWas = old.socket === '' ? undefined : norm(old.socket)
    const sockIs = now.socket === '' ? undefined : norm(now.socket)
    if (sockWas === sockIs) return
    if (sockWas !== undefined) drop(this.#sockets, sockWas, old.host)
    if (sockIs !== undefined) push(this.#sockets, sockIs, now.host)
  }

  dirClaimant(dir: string, host: string): Claimant | undefined {
    const d = norm(dir)
    const up = ancestry(d)
    const same = other(this.#dirs.get(d, up.shard), host)
    if (same !== undefined) return { host: same, code: 'dir_claimed', reason: `dir ${d} is also claimed by ${same}` }
    const inner = other(this.#under.get(d, up.shard), host)
    if (inner !== undefined)
      return {
        host: inner,
        code: 'dir_claimed',
        reason: `dir ${d} contains ${inner}'s dir ${this.#dirOf.get(inner) ?? ''}`,
      }
    for (let i = 0; i < up.paths.length; i++) {
      const a = up.paths[i] as string
      const outer = other(this.#dirs.get(a, up.shards[i]), host)
      if (outer !== undefined)
        return { host: outer, code: 'dir_claimed', reason: `dir ${d} is inside ${outer}'s dir ${a}` }
    }
    return undefined
  }

  socketClaimant(socket: string, host: string): Claimant | undefined {
    const s = norm(socket)
    const claimant = other(this.#sockets.get(s), host)
    return claimant === undefined
      ? undefined
      : { host: claimant, code: 'socket_claimed', reason: `socket ${s} is also ${claimant}'s` }
  }
}

function classified(layout: RowLayout, because?: Why): Classification {
  return because === undefined ? { layout, code: '', reason: '' } : { layout, ...because }
}

export function classifyWith(route: Route, claims: PathClaims, ctx: ClassifyContext): Classification {
  // Another supervisor's: nobody's to fence, move or judge, whatever its paths say.
  if (external(route)) return classified('external')
  const fenced = ctx.fenced(route.host)
  if (fenced !== undefined) return classified('fenced', fenced)
  const claimant =
    (route.dir !== '' ? claims.dirClaimant(route.dir, route.host) : undefined) ??
    (route.socket !== '' ? claims.socketClaimant(route.socket, route.host) : undefined)
  if (claimant !== undefined) return classified('conflict', why(claimant.code, claimant.reason))
  const bad = hostError(route.host)
  if (bad !== null) return classified('foreign', why('invalid_host', `not a valid hostname: ${bad}`))
  if (isNested(ctx.dirs, route)) return classified('nested')
  if (isFlat(ctx.dirs, route)) return classified('flat')
  if (route.socket === '') return classified('foreign', why('no_socket', 'no socket: the activator does not manage it'))
  return classified(
    'foreign',
    why(
      'unknown_shape',
      `paths are neither the flat nor the nested shape ` +
        `(dir ${JSON.stringify(route.dir)}, socket ${JSON.stringify(route.socket)})`,
    ),
  )
}

/** O(rows): for many, classifyAll or classifyWith. */
export function classify(route: Route, routes: readonly Route[], ctx: ClassifyContext): Classification {
  return classifyWith(route, new PathClaims(routes), ctx)
}

export function classifyAll(routes: readonly Route[], ctx: ClassifyContext): Map<string, Classification> {
  const claims = new PathClaims(routes)
  const out = new Map<string, Classification>()
  for (const row of routes) out.set(row.host, classifyWith(row, claims, ctx))
  return out
}

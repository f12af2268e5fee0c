// The registry's rows as this process last saw them (design §3.3 "Many hosts"): a listing carried over the pass's own
// row rewrites instead of listed again, with the hosts rewritten since.
import type { RowsSnapshot } from '../domain/ports.js'
import type { Route, RowPaths } from '../domain/schemas.js'

/**
 * A listing's identity, shared by the lists carried from it: a token rather than the listing, so a run that
 * rewrote every row does not keep the rows it replaced.
 */
export type Lineage = Readonly<Record<never, never>>

/** A carried list's listing and the hosts rewritten since (may repeat). */
export interface Rewrites {
  since: Lineage
  hosts: readonly string[]
}

// Beside the lists, which readers get as plain arrays.
const carried = new WeakMap<readonly Route[], Rewrites>()
const indexes = new WeakMap<readonly Route[], ReadonlyMap<string, number>>()
const listings = new WeakMap<readonly Route[], Lineage>()

/** undefined for a listing. */
export function rewritesOf(routes: readonly Route[]): Rewrites | undefined {
  return carried.get(routes)
}

/** The lineage of the listing routes was carried from, or of routes itself when it is a listing. */
export function lineageOf(routes: readonly Route[]): Lineage {
  const since = carried.get(routes)?.since
  if (since !== undefined) return since
  let own = listings.get(routes)
  if (own === undefined) {
    own = {}
    listings.set(routes, own)
  }
  return own
}

/** Lists sharing a listing hold the same hosts; false for two listings. */
export function sameRowsCarried(a: readonly Route[], b: readonly Route[] | undefined): boolean {
  return b !== undefined && lineageOf(a) === lineageOf(b)
}

export function rowIn(routes: readonly Route[], host: string): Route | undefined {
  const index = indexes.get(routes)
  if (index === undefined) return routes.find((r) => r.host === host)
  const i = index.get(host)
  return i === undefined ? undefined : routes[i]
}

function snapshotOf(routes: Route[], index: ReadonlyMap<string, number>): RowsSnapshot {
  indexes.set(routes, index)
  return { routes, byHost: { get: (host) => rowIn(routes, host) } }
}

export function listedSnapshot(routes: Route[]): RowsSnapshot {
  return snapshotOf(routes, new Map(routes.map((r, i) => [r.host, i])))
}

/** Once rewrites outnumber rows a new lineage starts, so the hosts rewritten since stay fewer than the rows. */
export function carriedSnapshot(before: RowsSnapshot, rewritten: ReadonlyMap<string, RowPaths>): RowsSnapshot {
  const index = indexes.get(before.routes) ?? new Map(before.routes.map((r, i) => [r.host, i]))
  const routes = before.routes.slice()
  const hosts: string[] = []
  for (const [host, p] of rewritten) {
    const i = index.get(host)
    const row = i === undefined ? undefined : routes[i]
    if (i === undefined || row === undefined) continue
    routes[i] = { ...row, dir: p.dir, socket: p.socket, db: p.db }
    hosts.push(host)
  }
  const lineage = carried.get(before.routes)
  const all = [...(lineage?.hosts ?? []), ...hosts]
  if (all.length <= routes.length) carried.set(routes, { since: lineageOf(before.routes), hosts: all })
  return snapshotOf(routes, index)
}

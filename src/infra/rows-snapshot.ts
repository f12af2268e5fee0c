// The registry's rows as this process last saw them (design §3.3 "Many
// hosts"): a listing carried over the pass's own row rewrites instead of
// listed again, with the hosts rewritten since. Carrying costs the rewritten
// rows, not the box's, so after each batch a wake waits for the batch only.
import type { RowsSnapshot } from '../domain/ports.js'
import type { Route, RowPaths } from '../domain/schemas.js'

/** A carried list: the listing it began as, and every host rewritten since, write by write (a host may repeat). */
export interface Rewrites {
  since: readonly Route[]
  hosts: readonly string[]
}

// Kept beside the lists rather than in them: a list is a plain array its
// readers only read, and an entry goes with its list.
const carried = new WeakMap<readonly Route[], Rewrites>()
const indexes = new WeakMap<readonly Route[], ReadonlyMap<string, number>>()

/** How routes came to be, when the registry carried them over rewrites; undefined for a listing or any other list. */
export function rewritesOf(routes: readonly Route[]): Rewrites | undefined {
  return carried.get(routes)
}

/**
 * Whether two lists share a listing, so hold the same hosts (carrying only
 * rewrites paths); false for two listings, whatever they hold.
 */
export function sameRowsCarried(a: readonly Route[], b: readonly Route[] | undefined): boolean {
  if (b === undefined) return false
  return (carried.get(a)?.since ?? a) === (carried.get(b)?.since ?? b)
}

/** host's row in routes, through the list's index when it has one. */
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

/** A listing's snapshot: the rows, and the same rows by host. */
export function listedSnapshot(routes: Route[]): RowsSnapshot {
  return snapshotOf(routes, new Map(routes.map((r, i) => [r.host, i])))
}

/**
 * before with the rows in rewritten given their new paths. The rewrites
 * accumulate from the listing before began as; once they outnumber the
 * rows, the new list starts a lineage of its own (a follower then compares
 * it whole, once), so no list keeps an old listing alive for ever.
 */
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
  if (all.length <= routes.length) carried.set(routes, { since: lineage?.since ?? before.routes, hosts: all })
  return snapshotOf(routes, index)
}

// The path claims the pass classifies against (design §1.1), followed from
// one list of the registry's rows to the next by the hosts rewritten, never
// built again while a wake waits (design §3.3). The report classifies every
// row against one list, and a wake after each batch of a converge asks
// against a list that differs from the last by that batch alone.
import { PathClaims } from '../../domain/classify.js'
import type { Route } from '../../domain/schemas.js'
import { rewritesOf, rowIn } from '../rows-snapshot.js'

/** The path claims of one list of rows, and how that list came to be. */
export interface ClaimsOf {
  routes: readonly Route[]
  /** The listing routes was carried from (rows-snapshot.ts), or routes itself. */
  since: readonly Route[]
  /** How many of the rewrites since that listing the claims hold. */
  followed: number
  /** Each host's row as the claims hold it. */
  claimed: Map<string, Route>
  claims: PathClaims
}

/** Moves one host's claims from the row the claims hold to now (undefined: the row is gone). */
function follow(c: ClaimsOf, host: string, now: Route | undefined): void {
  const old = c.claimed.get(host)
  if (now === undefined) {
    if (old !== undefined) c.claims.remove(old)
    c.claimed.delete(host)
    return
  }
  if (old === undefined) c.claims.add(now)
  else if (old.dir !== now.dir || old.socket !== now.socket) c.claims.replace(old, now)
  c.claimed.set(host, now)
}

/** The claims of routes, from an index built over exactly those rows (or built here, in one go). */
export function claimsOfRows(routes: readonly Route[], claims = new PathClaims(routes)): ClaimsOf {
  const rewrites = rewritesOf(routes)
  return {
    routes,
    since: rewrites?.since ?? routes,
    followed: rewrites?.hosts.length ?? 0,
    claimed: new Map(routes.map((r) => [r.host, r])),
    claims,
  }
}

/**
 * The claims of routes, from those of an earlier list, so a wake after a
 * commit never waits for them to be rebuilt: a list carried from the followed
 * one names its rewritten hosts; any other is compared row by row, and only
 * rows that changed, came or went are taken back and added.
 */
export function followRows(prev: ClaimsOf | undefined, routes: readonly Route[]): ClaimsOf {
  const rewrites = rewritesOf(routes)
  const since = rewrites?.since ?? routes
  const followed = rewrites?.hosts.length ?? 0
  if (prev === undefined) return claimsOfRows(routes)
  if (rewrites !== undefined && rewrites.since === prev.since && followed >= prev.followed) {
    for (const host of new Set(rewrites.hosts.slice(prev.followed))) follow(prev, host, rowIn(routes, host))
    return { ...prev, routes, followed }
  }
  const byHost = new Map(routes.map((r) => [r.host, r]))
  for (const host of [...prev.claimed.keys()]) if (!byHost.has(host)) follow(prev, host, undefined)
  for (const row of routes) follow(prev, row.host, row)
  return { ...prev, routes, since, followed }
}

/**
 * Follows at most `most` more rewritten hosts of routes carried from prev's
 * list: a step of the pass's catch-up after a commit, so the next wake finds
 * the claims followed. Between steps a reader follows the rest itself
 * (followRows). Undefined when routes was not carried: the next wake compares it.
 */
export function followSome(prev: ClaimsOf, routes: readonly Route[], most: number): ClaimsOf | undefined {
  const rewrites = rewritesOf(routes)
  if (rewrites === undefined || rewrites.since !== prev.since || rewrites.hosts.length < prev.followed) return undefined
  const upTo = Math.min(prev.followed + most, rewrites.hosts.length)
  for (const host of new Set(rewrites.hosts.slice(prev.followed, upTo))) follow(prev, host, rowIn(routes, host))
  return upTo === rewrites.hosts.length ? { ...prev, routes, followed: upTo } : { ...prev, routes: [], followed: upTo }
}

// The path claims the pass classifies against (design §1.1), followed from
// one list of rows to the next by the hosts rewritten, never rebuilt while a
// wake waits (design §3.3).
import { PathClaims } from '../../domain/classify.js'
import type { Route } from '../../domain/schemas.js'
import { lineageOf, rewritesOf, rowIn, type Lineage } from '../rows-snapshot.js'

export interface ClaimsOf {
  routes: readonly Route[]
  /** The lineage of the listing routes was carried from (rows-snapshot.ts), or of routes itself. */
  since: Lineage
  /** How many of those rewrites the claims hold. */
  followed: number
  claimed: Map<string, Route>
  claims: PathClaims
}

/** One host's claims moved to now (undefined: the row is gone). */
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

export function claimsOfRows(routes: readonly Route[], claims = new PathClaims(routes)): ClaimsOf {
  const rewrites = rewritesOf(routes)
  return {
    routes,
    since: lineageOf(routes),
    followed: rewrites?.hosts.length ?? 0,
    claimed: new Map(routes.map((r) => [r.host, r])),
    claims,
  }
}

/** Claims followed to routes: by its rewritten hosts when carried from prev's list, else row by row. */
export function followRows(prev: ClaimsOf | undefined, routes: readonly Route[]): ClaimsOf {
  const rewrites = rewritesOf(routes)
  const since = lineageOf(routes)
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

/** Follows at most `most` more rewritten hosts; undefined when routes was not carried. */
export function followSome(prev: ClaimsOf, routes: readonly Route[], most: number): ClaimsOf | undefined {
  const rewrites = rewritesOf(routes)
  if (rewrites === undefined || rewrites.since !== prev.since || rewrites.hosts.length < prev.followed) return undefined
  const upTo = Math.min(prev.followed + most, rewrites.hosts.length)
  for (const host of new Set(rewrites.hosts.slice(prev.followed, upTo))) follow(prev, host, rowIn(routes, host))
  return upTo === rewrites.hosts.length ? { ...prev, routes, followed: upTo } : { ...prev, routes: [], followed: upTo }
}

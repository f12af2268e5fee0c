// Many rows into the registry at once (`layoutd routes import`): the rules
// one `add` keeps, and the claims of every row checked against one index of
// the rows stored and the batch, not the whole registry listed per row.
import { errors } from '../errors.js'
import { PathClaims } from '../domain/classify.js'
import type { Route } from '../domain/schemas.js'
import type { Registry } from './registry.js'

/**
 * Inserts routes through registry.add (each validated, a duplicate host
 * refused), refusing the first whose dir or socket a stored row or another
 * of the batch claims. Run inside the caller's transaction: all or none.
 */
export function insertChecked(registry: Pick<Registry, 'list' | 'add'>, routes: readonly Route[]): void {
  const claims = new PathClaims([...registry.list(), ...routes])
  for (const route of routes) {
    const claimant =
      (route.dir !== '' ? claims.dirClaimant(route.dir, route.host) : undefined) ??
      (route.socket !== '' ? claims.socketClaimant(route.socket, route.host) : undefined)
    if (claimant !== undefined) throw errors.pathClaimed(route.host, claimant.reason, claimant.host)
    registry.add(route)
  }
}

// Hosts are DNS names (design §2): the rule, and the one coded error a
// refused host raises (the catalogue's `invalid_host`, InvalidHostError).
// Nothing built from an invalid host is ever used as a path: every path
// helper checks first.
import { errors } from '../errors.js'

const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/

/**
 * The whole rule in one expression, for the common case: a host that
 * matches is valid (ASCII, so its length is its bytes). A host that does
 * not is taken apart below, to say why.
 */
const VALID = /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/

/**
 * A first character no hostname can take (LABEL and VALID start with a-z
 * or 0-9): a file of `<data>/layout` named with it, a batch's journal, is
 * never taken for a host's own (`<host>.journal`).
 */
export const NOT_A_HOST_PREFIX = '_'

/** Why host is not a valid hostname, or null when it is. */
export function hostError(host: string): string | null {
  if (VALID.test(host)) return null
  if (host.length === 0) return 'hostname is empty'
  if (Buffer.byteLength(host) > 253) return `hostname is ${Buffer.byteLength(host)} bytes, over 253`
  if (host !== host.toLowerCase()) return 'hostname must be lower case'
  for (const label of host.split('.')) {
    if (label.length === 0) return 'hostname has an empty label'
    if (label.length > 63) return `hostname label ${JSON.stringify(label.slice(0, 16))}… is over 63 bytes`
    if (!LABEL.test(label)) return `hostname label ${JSON.stringify(label)} is not a-z, 0-9 and inner hyphens`
  }
  return null
}

export function validHost(host: string): boolean {
  return hostError(host) === null
}

/** Throws InvalidHostError (`invalid_host`), naming why, when host is not a valid hostname. */
export function requireValidHost(host: string): void {
  const why = hostError(host)
  if (why !== null) throw errors.invalidHost(host, why)
}

/**
 * The host as a proxy may pass it, in the one spelling the registry keeps: ASCII upper case folded (DNS names
 * are case-blind) and one trailing dot dropped (the root's, `ok.example.com.`). Nothing else is changed, so a
 * name that is not a hostname still fails the rule and says why.
 */
export function canonicalHost(host: string): string {
  const folded = /[A-Z]/.test(host) ? host.replace(/[A-Z]+/g, (s) => s.toLowerCase()) : host
  return folded.length > 1 && folded.endsWith('.') ? folded.slice(0, -1) : folded
}

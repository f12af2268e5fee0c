// Hosts are DNS names (design §2): the rule, and the coded error
// (`invalid_host`) a refused host raises.
import { errors } from '../errors.js'

const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/

/** The common case; a miss is taken apart below to say why. */
const VALID = /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/

/** No hostname starts with it, so a batch's journal is never taken for a host's. */
export const NOT_A_HOST_PREFIX = '_'

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

export function requireValidHost(host: string): void {
  const why = hostError(host)
  if (why !== null) throw errors.invalidHost(host, why)
}

/** The registry's spelling; nothing else changes, so a bad name still fails the rule and says why. */
export function canonicalHost(host: string): string {
  const folded = /[A-Z]/.test(host) ? host.replace(/[A-Z]+/g, (s) => s.toLowerCase()) : host
  return folded.length > 1 && folded.endsWith('.') ? folded.slice(0, -1) : folded
}

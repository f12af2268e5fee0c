// The gate's states and Retry-After (design §6.4): what a wake's answer
// means to a proxy in front of the tenants (ready, not yet, never), the
// status each form of the gate answers it with, and how many seconds a
// not-yet answer tells its client to wait, from what the agent knows. No I/O.
import { PASSING_CODES, type ReasonCode } from './reason-codes.js'

/**
 * Where a host stands for a proxy: `ready` wakes now; `starting`, `stopping`, `fenced` and `gate_shut` will
 * pass on their own (not yet); `held`, `conflict`, `unmanaged` and `unknown` need a person or are not
 * layoutd's (never).
 */
export type GateState =
  'ready' | 'starting' | 'stopping' | 'fenced' | 'gate_shut' | 'held' | 'conflict' | 'unmanaged' | 'unknown'

export const NOT_YET: ReadonlySet<GateState> = new Set<GateState>(['starting', 'stopping', 'fenced', 'gate_shut'])

/** A refusal as the wake verdict answers it: its row word and its code. */
export interface Refused {
  layout: string
  code: ReasonCode
}

/** A refused host's state by its code: a fence that lifts on its own is not yet; one an operator must clear is held. */
export function refusedState(r: Refused, phase: string): GateState {
  switch (r.code) {
    case 'not_ready':
      return phase === 'stopping' ? 'stopping' : 'starting'
    case 'gate_pending':
      return 'starting'
    case 'gate_shut':
      return 'gate_shut'
    case 'unknown_host':
      return 'unknown'
    case 'no_activator':
    case 'not_managed':
      return 'unmanaged'
    default:
      if (PASSING_CODES.has(r.code)) return 'fenced'
      return r.layout === 'conflict' ? 'conflict' : r.layout === 'fenced' ? 'held' : 'unmanaged'
  }
}

/**
 * The status of the forward-auth gate (`/gate/:host`), handed to the client
 * as is. A grant is `204` (no body, so the proxy's connection is reused).
 * nginx's `auth_request` takes only 2xx, 401 and 403, so there not yet is
 * 401 and never 403, mapped by its configuration from the state header.
 */
export function gateStatus(state: GateState, authRequest: boolean): number {
  if (state === 'ready') return 204
  if (NOT_YET.has(state)) return authRequest ? 401 : 503
  if (authRequest) return 403
  return state === 'unknown' ? 404 : 403
}

/** The fewest and most seconds a Retry-After says: at least a second, and never so long a wake is forgotten. */
export const MIN_RETRY_S = 1
export const MAX_RETRY_S = 60

export interface RetryFacts {
  /** Why not yet; `waiters` is a wait refused because too many already wait. */
  state: GateState | 'waiters' | 'registry'
  /** How long the host's fence may still stand, in ms (the fence table's estimate); null when it cannot say. */
  fenceRemainingMs?: number | null
  /** How often the intent is read and the gate asked again before a leg run, in ms (CARLOS_LAYOUT_POLL). */
  pollMs: number
}

function clampSeconds(ms: number): number {
  return Math.min(MAX_RETRY_S, Math.max(MIN_RETRY_S, Math.ceil(ms / 1000)))
}

/** Retry-After for a not-yet answer: a fence's expected rest, a shut gate's poll interval, else a second. */
export function retryAfterSeconds(f: RetryFacts): number {
  switch (f.state) {
    case 'fenced':
      return f.fenceRemainingMs === null || f.fenceRemainingMs === undefined
        ? MIN_RETRY_S
        : clampSeconds(f.fenceRemainingMs)
    case 'gate_shut':
      return clampSeconds(f.pollMs)
    default:
      return MIN_RETRY_S
  }
}

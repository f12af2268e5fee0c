// The gate's states and Retry-After (design §6.4): what a wake's answer
// means to a proxy (ready, not yet, never), and how long to wait. No I/O.
import { PASSING_CODES, type ReasonCode } from './reason-codes.js'

/** `ready` wakes; NOT_YET's pass on their own; the rest need a person or are not layoutd's. */
export type GateState =
  'ready' | 'starting' | 'stopping' | 'fenced' | 'gate_shut' | 'held' | 'conflict' | 'unmanaged' | 'unknown'

export const NOT_YET: ReadonlySet<GateState> = new Set<GateState>(['starting', 'stopping', 'fenced', 'gate_shut'])

export interface Refused {
  layout: string
  code: ReasonCode
}

/** A fence that lifts on its own is not yet; one an operator must clear is held. */
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

/** 204 has no body, so the proxy reuses its connection; nginx's `auth_request` takes only 2xx, 401 and 403. */
export function gateStatus(state: GateState, authRequest: boolean): number {
  if (state === 'ready') return 204
  if (NOT_YET.has(state)) return authRequest ? 401 : 503
  if (authRequest) return 403
  return state === 'unknown' ? 404 : 403
}

/** Never so long that a wake is forgotten. */
export const MIN_RETRY_S = 1
export const MAX_RETRY_S = 60

export interface RetryFacts {
  /** `waiters`: refused because too many already wait. */
  state: GateState | 'waiters' | 'registry'
  fenceRemainingMs?: number | null
  /** CARLOS_LAYOUT_POLL. */
  pollMs: number
}

function clampSeconds(ms: number): number {
  return Math.min(MAX_RETRY_S, Math.max(MIN_RETRY_S, Math.ceil(ms / 1000)))
}

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

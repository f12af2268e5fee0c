// Readiness (design §6, GET /ready): the registry answers, the wake claims
// were loaded, start-up recovery is done; and, as information beside them,
// the isolation gate's checks and whether nested instances may wake.
import type { Phase, Readiness, ReadyCheck } from '../agent-api.js'
import { errorMessage } from '../errors.js'
import type { Isolation } from '../infra/isolation.js'
import type { Registry } from '../infra/registry.js'
import type { WakeClaims } from '../infra/wake-claims.js'

export interface ReadinessFacts {
  phase: Phase
  /** An activator is armed on this box (CARLOS_ACTIVATOR is not `none`). */
  armed: boolean
  registry: Pick<Registry, 'ping' | 'file'>
  claims: Pick<WakeClaims, 'swept'>
  /** null where no activator is armed. */
  gate: Isolation | null
}

/** The registry answers a query (its data_version: no rows read). */
function registryCheck(registry: ReadinessFacts['registry']): ReadyCheck {
  try {
    registry.ping()
    return { name: 'registry', ok: true, detail: registry.file }
  } catch (err) {
    return { name: 'registry', ok: false, detail: `${registry.file}: ${errorMessage(err)}` }
  }
}

function wakeClaimsCheck({ phase, armed, claims }: ReadinessFacts): ReadyCheck {
  return {
    name: 'wake-claims',
    ok: phase === 'ready' && (!armed || claims.swept),
    detail: !armed ? 'no activator armed' : claims.swept ? 'loaded' : phase === 'ready' ? 'unreadable: every host counts as awake' : 'not yet loaded',
  }
}

export function readinessOf(facts: ReadinessFacts): Readiness {
  const { phase, gate } = facts
  const registry = registryCheck(facts.registry)
  const checks: ReadyCheck[] = [registry, wakeClaimsCheck(facts), { name: 'recovery', ok: phase === 'ready', detail: phase === 'ready' ? 'done' : phase }]
  const shut = gate === null ? 'no activator is armed on this box' : gate.check()
  const readiness: Readiness = {
    // Wake claims that could not be read do not hold the box down: the
    // pass treats every host as awake, and flat wakes go on. A registry
    // that cannot answer does: no claim could be judged.
    ready: phase === 'ready' && registry.ok,
    phase,
    checks,
    nested: { allowed: shut === null, reason: shut ?? '' },
  }
  if (gate !== null) readiness.isolation = gate.report()
  return readiness
}

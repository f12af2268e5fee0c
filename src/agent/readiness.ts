// Readiness (design §6, GET /ready): the registry answers, the wake claims
// were loaded, recovery is done; beside them, the gate's checks.
import type { Phase, Readiness, ReadyCheck } from '../agent-api.js'
import { AppError, errorMessage } from '../errors.js'
import type { GateCheck, Isolation } from '../infra/isolation.js'
import type { Registry } from '../infra/registry.js'
import type { WakeClaims } from '../infra/wake-claims.js'

export interface ReadinessFacts {
  phase: Phase
  /** CARLOS_ACTIVATOR is not `none`. */
  armed: boolean
  registry: Pick<Registry, 'ping' | 'file'> & { readonly fault?: unknown }
  claims: Pick<WakeClaims, 'swept'>
  gate: Isolation | null
  /** In ms; performance.now unless a test steps it. */
  now?: () => number
}

/** How long a passing check stands: each takes the database's shared-memory locks, so not per request. */
export const REGISTRY_CHECK_MS = 1000

/** Its file is still the one opened, a database, with room; a fault carries its code. */
function pingRegistry(registry: ReadinessFacts['registry']): ReadyCheck {
  try {
    registry.ping()
    return { name: 'registry', ok: true, detail: registry.file }
  } catch (err) {
    if (err instanceof AppError && err.code.startsWith('registry_'))
      return { name: 'registry', ok: false, code: err.code, detail: err.message }
    return { name: 'registry', ok: false, detail: `${registry.file}: ${errorMessage(err)}` }
  }
}

const registryChecks = new WeakMap<ReadinessFacts['registry'], { at: number; check: ReadyCheck }>()

function registryCheck(facts: ReadinessFacts): ReadyCheck {
  const now = (facts.now ?? performance.now.bind(performance))()
  const last = registryChecks.get(facts.registry)
  // A fault a claim has met already is not hidden behind a passing check.
  if (last !== undefined && last.check.ok && now - last.at < REGISTRY_CHECK_MS && !facts.registry.fault)
    return last.check
  const check = pingRegistry(facts.registry)
  registryChecks.set(facts.registry, { at: now, check })
  return check
}

function wakeClaimsCheck({ phase, armed, claims }: ReadinessFacts): ReadyCheck {
  return {
    name: 'wake-claims',
    ok: phase === 'ready' && (!armed || claims.swept),
    detail: !armed
      ? 'no activator armed'
      : claims.swept
        ? 'loaded'
        : phase === 'ready'
          ? 'unreadable: every host counts as awake'
          : 'not yet loaded',
  }
}

interface Answered {
  phase: Phase
  armed: boolean
  swept: boolean
  registry: ReadyCheck
  gate: Isolation | null
  shut: string | null
  isolation: readonly GateCheck[] | undefined
  readiness: Readiness
}

/** Unchanged, the answer is the same object, so the route serializes it once. */
const answered = new WeakMap<ReadinessFacts['registry'], Answered>()

function sameCheck(a: ReadyCheck, b: ReadyCheck): boolean {
  return a === b || (a.ok === b.ok && a.detail === b.detail && a.name === b.name && a.code === b.code)
}

function sameGateChecks(a: readonly GateCheck[] | undefined, b: readonly GateCheck[] | undefined): boolean {
  if (a === undefined || b === undefined) return a === b
  if (a.length !== b.length) return false
  return a.every((c, i) => {
    const d = b[i]
    return (
      d !== undefined &&
      c.name === d.name &&
      c.ok === d.ok &&
      c.code === d.code &&
      c.reason === d.reason &&
      c.detail === d.detail
    )
  })
}

export function readinessOf(facts: ReadinessFacts): Readiness {
  const { phase, gate, armed } = facts
  const registry = registryCheck(facts)
  const swept = facts.claims.swept
  const shut = gate === null ? 'no activator is armed on this box' : gate.check()
  const isolation = gate?.report()
  const last = answered.get(facts.registry)
  if (
    last !== undefined &&
    last.phase === phase &&
    last.armed === armed &&
    last.swept === swept &&
    last.gate === gate &&
    last.shut === shut &&
    sameCheck(last.registry, registry) &&
    sameGateChecks(last.isolation, isolation)
  ) {
    return last.readiness
  }
  const checks: ReadyCheck[] = [
    registry,
    wakeClaimsCheck(facts),
    { name: 'recovery', ok: phase === 'ready', detail: phase === 'ready' ? 'done' : phase },
  ]
  const readiness: Readiness = {
    // Unreadable claims do not hold the box down (every host counts as awake); a dead registry does.
    ready: phase === 'ready' && registry.ok,
    phase,
    checks,
    nested: { allowed: shut === null, reason: shut ?? '' },
  }
  if (isolation !== undefined) readiness.isolation = isolation
  answered.set(facts.registry, { phase, armed, swept, registry, gate, shut, isolation, readiness })
  return readiness
}

// One run of the leg (design §5): read the intent, converge, log.
import { errorMessage } from '../errors.js'
import type { DefaultInputs } from './layout-default.js'
import { defaultLayoutIntent, LAYOUT_DEFAULT_ENV, nestedByDefault } from './layout-default.js'
import { setImmediate as nextTurn } from 'node:timers/promises'
import { INTENT_TIMEOUT_MS, loadLayoutIntent, type IntentRead } from './intent.js'
import type { IntentState } from './intent-state.js'
import { validMode, type Mode, type Result } from './modes.js'
import type { DeployStore, Logger } from './ports.js'
import type { LegOutcome } from './leg.js'

export interface LegRunDeps extends DefaultInputs {
  store: DeployStore
  box: string
  state: IntentState
  logger: Logger
  /** force: stop awake hosts now, no grace. */
  converge: (mode: Mode, force: boolean, signal: AbortSignal) => Promise<Result[]>
  timeoutMs?: number
}

/** An unreadable intent moves nothing: a failed read is no proof the fleet still wants the last mode. */
export async function layoutLegWith(
  deps: LegRunDeps,
  signal: AbortSignal = new AbortController().signal,
): Promise<LegOutcome> {
  const { logger, state } = deps
  let read: IntentRead
  try {
    read = await loadLayoutIntent(deps.store, deps.box, signal, deps.timeoutMs ?? INTENT_TIMEOUT_MS)
  } catch (error) {
    // Stopping is not news about the intent.
    if (signal.aborted) throw error
    const err = errorMessage(error)
    logger.warn({ intent: 'unreadable', err: error }, `layout: intent -> unreadable: ${err}; not converging this move`)
    state.noteIntent('unreadable', err)
    return { results: [], retry: false, unfinished: true }
  }
  if (!read.found) {
    // The default stands in (design §5.2), logged once per change of answer.
    const d = defaultLayoutIntent(deps)
    const prev = state.lastDefault()
    if (prev.blocked !== d.reason || prev.applied !== (d.mode === 'nested')) {
      if (d.mode === 'nested') {
        logger.info(
          { intent: 'none', default: 'nested' },
          `layout: no intent recorded -> nested by default (${LAYOUT_DEFAULT_ENV} unset or nested; ` +
            `record \`layoutd intent revert --box LABEL\` to opt out)`,
        )
      } else if (d.reason !== '') {
        logger.info(
          { intent: 'none', blocked: d.reason },
          `layout: no intent recorded; nested by default is not in force -> ${d.reason}`,
        )
      }
    }
    state.noteDefault(d.mode, d.reason, d.by)
    if (d.mode !== 'nested') {
      // The gate's probe answers in wall time; a quiet fleet would never ask again.
      return { results: [], retry: nestedByDefault(deps.layoutDefault), unfinished: false }
    }
    return convergedOutcome(deps.converge('nested', false, signal), logger, 'nested')
  }
  const { id, mode, force } = read.intent
  if (!validMode(mode)) {
    logger.warn(
      { intent: 'unreadable', id, mode },
      `layout: intent ${id} -> unreadable: mode ${JSON.stringify(mode)} is not flat or nested; ` +
        `not converging this move`,
    )
    // Not a fault that passes: only a new intent ends it.
    state.noteIntent('unreadable', `intent ${id} names mode ${JSON.stringify(mode)}, which is not flat or nested`)
    return { results: [], retry: false, unfinished: false }
  }
  state.noteIntent(mode)
  return convergedOutcome(deps.converge(mode, force, signal), logger, mode)
}

/** A turn after the results came in: logging walks them all. */
async function convergedOutcome(converged: Promise<Result[]>, logger: Logger, mode: Mode): Promise<LegOutcome> {
  const results = await converged
  await nextTurn()
  const retry = logLayoutResults(results, logger)
  logger.info({ mode, ...countOutcomes(results) }, `layout: run toward ${mode}: ${summarizeOutcomes(results)}`)
  return { results, retry, unfinished: results.some((r) => r.outcome === 'failed') }
}

export function countOutcomes(results: readonly Result[]): Record<string, number> {
  const counts: Record<string, number> = {}
  for (const r of results) counts[r.outcome] = (counts[r.outcome] ?? 0) + 1
  return counts
}

export function summarizeOutcomes(results: readonly Result[]): string {
  const counts = Object.entries(countOutcomes(results))
  return counts.length === 0 ? 'no host to move' : counts.map(([outcome, n]) => `${n} ${outcome}`).join(', ')
}

/** A warn line per host, for alerts. */
const NEEDS_A_LOOK: ReadonlySet<string> = new Set(['failed', 'refused', 'held'])

/** Levels as design §9 says; true when the leg must come back: a grace or a hold clears in wall time. */
export function logLayoutResults(
  results: readonly Result[],
  logger: Logger,
  routine: 'debug' | 'info' = 'debug',
): boolean {
  let retry = false
  const awake: string[] = []
  // A line nobody keeps is not built.
  const routineKept = logger.isLevelEnabled?.(routine) ?? true
  for (const r of results) {
    if (r.outcome === 'unchanged') continue
    if (r.outcome === 'held') retry = true
    if (r.outcome === 'deferred' && r.code === 'awake_grace') {
      awake.push(`${r.host} (${r.reason})`)
      continue
    }
    const needsALook = NEEDS_A_LOOK.has(r.outcome)
    if (!needsALook && !routineKept) continue
    const fields = { host: r.host, outcome: r.outcome, code: r.code, reason: r.reason, ...(r.to ? { to: r.to } : {}) }
    const line =
      r.host === ''
        ? `layout: ${r.outcome} -> ${r.reason}`
        : r.reason === ''
          ? `layout: ${r.host}: ${r.outcome}`
          : `layout: ${r.host}: ${r.outcome} -> ${r.reason}`
    if (needsALook) logger.warn(fields, line)
    else logger[routine](fields, line)
  }
  if (awake.length > 0) {
    logger[routine](
      { outcome: 'deferred', code: 'awake_grace', hosts: awake.length },
      `layout: deferred until asleep -> ${awake.join(', ')}`,
    )
  }
  return retry || awake.length > 0
}

// One run of the leg: what the box's intent is, and whether and how to
// converge to it, and which results are logged and retried (design §5).
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
  /** This box's label. */
  box: string
  state: IntentState
  logger: Logger
  /**
   * The armed pass's Converge. force stops awake hosts now; without it they
   * get the pass's awake grace. The leg is single-flight, so flipping the
   * pass's deferral for one run races nothing.
   */
  converge: (mode: Mode, force: boolean, signal: AbortSignal) => Promise<Result[]>
  /** The intent read timeout; default 30 s. */
  timeoutMs?: number
}

/**
 * The leg's decision: converge only when an intent addresses this box with a
 * mode this build knows. An unreadable intent moves nothing and is noted
 * `unreadable` over the mode seen before (a failed read is no proof the fleet
 * still wants it). retry: a host waits on wall time (awake, held, the gate);
 * unfinished: the read failed or a result is `failed`, so backoff (design §5.1).
 */
export async function layoutLegWith(
  deps: LegRunDeps,
  signal: AbortSignal = new AbortController().signal,
): Promise<LegOutcome> {
  const { logger, state } = deps
  let read: IntentRead
  try {
    read = await loadLayoutIntent(deps.store, deps.box, signal, deps.timeoutMs ?? INTENT_TIMEOUT_MS)
  } catch (error) {
    // Stopping the agent is not news about the intent: status keeps what it knew.
    if (signal.aborted) throw error
    const err = errorMessage(error)
    logger.warn({ intent: 'unreadable', err: error }, `layout: intent -> unreadable: ${err}; not converging this move`)
    state.noteIntent('unreadable', err)
    return { results: [], retry: false, unfinished: true }
  }
  if (!read.found) {
    // The deployment's default stands in, on a box that is ready for it.
    // It never forces, so an awake host keeps its grace; a box that is not
    // ready converges nothing and status says why. Logged once per change
    // of answer, not on every serial move.
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
      // A box the default has not reached yet is retried on the leg's timer,
      // as an awake host is: the probe that gates it answers in wall time,
      // and a quiet fleet would otherwise never come back to ask. The
      // opt-out and a typo are not waiting on anything.
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
    // Not a fault that passes: a new intent (a serial move) is what ends it.
    state.noteIntent('unreadable', `intent ${id} names mode ${JSON.stringify(mode)}, which is not flat or nested`)
    return { results: [], retry: false, unfinished: false }
  }
  state.noteIntent(mode)
  return convergedOutcome(deps.converge(mode, force, signal), logger, mode)
}

/**
 * A converge's results, logged, and what they ask of the retry timer; one
 * line at info sums the run up. In the turn after the one the results came
 * in (ordered by row, pass.ts): at 10,000 results each is a walk of them.
 */
async function convergedOutcome(converged: Promise<Result[]>, logger: Logger, mode: Mode): Promise<LegOutcome> {
  const results = await converged
  await nextTurn()
  const retry = logLayoutResults(results, logger)
  logger.info({ mode, ...countOutcomes(results) }, `layout: run toward ${mode}: ${summarizeOutcomes(results)}`)
  return { results, retry, unfinished: results.some((r) => r.outcome === 'failed') }
}

/** How many results of each outcome, by outcome name (the summary line's fields). */
export function countOutcomes(results: readonly Result[]): Record<string, number> {
  const counts: Record<string, number> = {}
  for (const r of results) counts[r.outcome] = (counts[r.outcome] ?? 0) + 1
  return counts
}

/** `2 moved, 1 refused, 40 unchanged`, in the order outcomes first came; `no host to move` for none. */
export function summarizeOutcomes(results: readonly Result[]): string {
  const counts = Object.entries(countOutcomes(results))
  return counts.length === 0 ? 'no host to move' : counts.map(([outcome, n]) => `${n} ${outcome}`).join(', ')
}

/** The outcomes an operator must look at: logged at warn, one line a host. */
const NEEDS_A_LOOK: ReadonlySet<string> = new Set(['failed', 'refused', 'held'])

/**
 * Logs every result that changed or withheld something, and answers whether
 * the leg should run again on its own: a host deferred for being awake has
 * a grace that runs out in wall time, and a held host should come back
 * within the retry interval of an operator clearing its reason, quiet fleet
 * or not. A failed, refused or held host is a warn line of its own, what
 * an operator alerts on; the rest (moved, released, deferred …) are debug,
 * since a box of thousands would otherwise log thousands of lines a run,
 * and the run's summary says how many (start-up recovery, which acts on a
 * few hosts once, logs them at info: routine). Awake hosts share one line: under a
 * standing intent every serial move meets them until they sleep or their
 * grace runs out.
 */
export function logLayoutResults(
  results: readonly Result[],
  logger: Logger,
  routine: 'debug' | 'info' = 'debug',
): boolean {
  let retry = false
  const awake: string[] = []
  // A line nobody keeps is not built: at info, a run of 10,000 moves is its summary alone.
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

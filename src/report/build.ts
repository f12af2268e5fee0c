// The box's status report (design §6.2), armed or unmanaged, from the rows,
// the leg's state and, with no pass armed, what `<data>/layout` holds. No I/O.
import { validHost } from '../domain/hostname.js'
import type { IntentState } from '../domain/intent-state.js'
import type { ReportMode } from '../domain/modes.js'
import { activatorManaged, external, isNested, journalPath, type Dirs } from '../domain/paths.js'
import { heldDown } from '../domain/fence.js'
import type { LayoutPass, RowsSnapshot } from '../domain/ports.js'
import { NO_REASON, why, type Why } from '../domain/reason-codes.js'
import type { LayoutReport, LegState, Route, RowReport } from '../domain/schemas.js'
import { warnOfOperatorRows } from '../domain/short-of-intent.js'

/** No activator armed: never ran, never will. */
export const IDLE_LEG: LegState = { running: false, pending: false, lastRun: null, retryAt: null }

export const MIXED_WARNING = 'nested instances share this box with flat ones: they are not isolated until none remains'

interface CommonInput {
  box: string
  /** The registry's rows, as the caller read them. */
  routes: readonly Route[]
}

export interface ManagedReportInput extends CommonInput {
  pass: Pick<LayoutPass, 'classify' | 'held' | 'note'>
  state: Pick<IntentState, 'lastIntent' | 'lastDefault' | 'unreadableWhy'>
  leg: LegState
  /** For a build in slices: each row judged with its slice's pass. */
  rowsNow?: () => RowsSnapshot
}

export interface UnmanagedReportInput extends CommonInput {
  pass: null
  dirs: Dirs
  journalHosts: ReadonlySet<string>
  holdHosts: ReadonlySet<string>
  /** Idle when absent. */
  leg?: LegState
  /** Rows say recovering, not that the box has no activator. */
  recovering?: boolean
}

function row(layout: string, because: Pick<RowReport, 'code' | 'reason'> = NO_REASON, note = ''): RowReport {
  return { layout, code: because.code, reason: because.reason, note }
}

/** By the pass's own classify, so status says what a wake would see. */
export function layoutStatusReport(input: ManagedReportInput | UnmanagedReportInput): LayoutReport {
  if (input.pass === null) return unmanagedLayoutReport(input)
  const steps = managedReportSteps(input)
  for (;;) {
    const step = steps.next()
    if (step.done === true) return step.value
  }
}

export const REPORT_ROWS_PER_STEP = 256

/** Yields every few hundred rows so a caller can give the loop back. */
export function* managedReportSteps(input: ManagedReportInput): Generator<void, LayoutReport, void> {
  const { pass, state, routes, rowsNow } = input
  const def = state.lastDefault()
  const rows: Record<string, RowReport> = {}
  let judged = 0
  let now = rowsNow?.()
  for (const listed of routes) {
    if (++judged % REPORT_ROWS_PER_STEP === 0) {
      yield
      now = rowsNow?.()
    }
    const route = now === undefined ? listed : now.byHost.get(listed.host)
    // Other kinds are outside the pass.
    if (route === undefined || route.kind !== 'instance') continue
    if (activatorManaged(route)) {
      const judged = pass.classify(route, now?.routes ?? routes)
      // Held down after a refused nested move: flat, but it does not wake.
      const held = judged.layout === 'flat' ? pass.held(route.host) : undefined
      rows[route.host] =
        held === undefined
          ? row(judged.layout, judged, pass.note(route.host))
          : row('fenced', heldDown(held), pass.note(route.host))
    } else if (external(route)) {
      // Run by another supervisor: not ours to migrate.
      rows[route.host] = row('external')
    }
  }
  const mode: ReportMode = state.lastIntent()
  const warnings = mixedWarning(rows)
  if (mode === 'unreadable') {
    const why = state.unreadableWhy()
    warnings.push(
      `the layout intent cannot be read${why === '' ? '' : ` (${why})`}: ` +
        `nothing moves and nothing is released flat until it can`,
    )
  }
  if (def.blocked !== '') warnings.push(`nested by default is not in force: ${def.blocked}`)
  return { box: input.box, mode, default: def.applied, defaultBlocked: def.blocked, rows, leg: input.leg, warnings }
}

/**
 * With no activator armed, paths still say whether a downgrade would strand a nested instance.
 * Fenced first, as in classify: a mid-move row can still carry flat paths.
 */
export function unmanagedLayoutReport(input: Omit<UnmanagedReportInput, 'pass'>): LayoutReport {
  const { dirs, journalHosts, holdHosts } = input
  const words = input.recovering === true ? RECOVERING_WORDS : UNMANAGED_WORDS
  const rows: Record<string, RowReport> = {}
  for (const route of input.routes) {
    if (route.kind !== 'instance') continue
    // No journal or hold marker is ever written for an invalid host.
    const valid = validHost(route.host)
    if (valid && journalHosts.has(route.host)) {
      rows[route.host] = row('fenced', words.journal(journalPath(dirs, route.host)))
    } else if (valid && holdHosts.has(route.host)) {
      rows[route.host] = row('fenced', words.hold)
    } else if (isNested(dirs, route)) {
      rows[route.host] = row('nested', words.nested)
    } else if (external(route)) {
      rows[route.host] = row('external')
    } else if (route.hibernate && route.socket !== '') {
      rows[route.host] = row('flat')
    }
  }
  return warnOfOperatorRows({
    box: input.box,
    mode: 'unmanaged',
    default: false,
    defaultBlocked: '',
    rows,
    leg: input.leg ?? IDLE_LEG,
    warnings: mixedWarning(rows),
  })
}

/** What rows judged by <data>/layout say. */
interface JudgedByDisk {
  journal: (journal: string) => Why
  hold: Why
  nested: Why
}

/** CARLOS_ACTIVATOR=none: nothing here will ever recover or retry. */
const UNMANAGED_WORDS: JudgedByDisk = {
  journal: (j) =>
    why('unmanaged_journal', `layout migration in flight; see ${j} (no activator on this box to recover it)`),
  hold: why('unmanaged_hold', 'held down after a refused move to nested (no activator on this box to retry it)'),
  nested: why('no_activator', 'no activator on this box; judged by path shape'),
}

/** Start-up recovery finishes the journals and restores the holds. */
const RECOVERING_WORDS: JudgedByDisk = {
  journal: (j) => why('in_flight', `layout migration in flight; see ${j} (start-up recovery under way)`),
  hold: why(
    'recovery_pending',
    'held down after a refused move to nested (start-up recovery under way; it restores the hold)',
  ),
  nested: why('recovery_pending', 'start-up recovery under way; judged by path shape until it is done'),
}

function mixedWarning(rows: Record<string, RowReport>): string[] {
  const words = new Set(Object.values(rows).map((r) => r.layout))
  return words.has('nested') && words.has('flat') ? [MIXED_WARNING] : []
}

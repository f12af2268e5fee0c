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
import { needsOperator, operatorWarning, warnOfOperatorRows, type OperatorRow } from '../domain/short-of-intent.js'
import { withheldReason, type RunReasons } from './withheld-reasons.js'

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
  /**
   * The agent's build: rows with no reason of their own take the last run's, and rows an operator must
   * act on are warned of.
   */
  reasons?: RunReasons
}

/** What the counts and the figures (figures.ts) take from every row, gathered as the rows are judged. */
export interface RowTally {
  /** Rows by word. */
  counts: Record<string, number>
  /** Hosts a hold marker holds. */
  held: number
  /** Rows awake inside their grace. */
  deferred: number
  operatorRows: OperatorRow[]
}

export interface TalliedReport {
  report: LayoutReport
  tally: RowTally
}

function emptyTally(): RowTally {
  return { counts: {}, held: 0, deferred: 0, operatorRows: [] }
}

function tallyRow(tally: RowTally, host: string, row: RowReport, held: boolean): void {
  tally.counts[row.layout] = (tally.counts[row.layout] ?? 0) + 1
  if (held) tally.held++
  if (row.code === 'awake_grace') tally.deferred++
  if (needsOperator(row)) tally.operatorRows.push({ host, code: row.code })
}

/** The tally of a report built whole; held says whether a hold marker holds a host. */
export function tallyOf(report: LayoutReport, held: (host: string) => boolean): RowTally {
  const tally = emptyTally()
  for (const [host, row] of Object.entries(report.rows)) tallyRow(tally, host, row, held(host))
  return tally
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
    if (step.done === true) return step.value.report
  }
}

export const REPORT_ROWS_PER_STEP = 64

/** Yields every few dozen rows so a caller can give the loop back; every row is judged and tallied once. */
export function* managedReportSteps(input: ManagedReportInput): Generator<void, TalliedReport, void> {
  const { pass, state, routes, rowsNow, reasons } = input
  const def = state.lastDefault()
  const rows: Record<string, RowReport> = {}
  const tally = emptyTally()
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
    const judgedRow = judgeRow(route, now?.routes ?? routes, pass)
    if (judgedRow === undefined) continue
    if (reasons !== undefined) withheldReason(route.host, judgedRow, reasons)
    rows[route.host] = judgedRow
    tallyRow(tally, route.host, judgedRow, pass.held(route.host) !== undefined)
  }
  const mode: ReportMode = state.lastIntent()
  const warnings = tally.counts.nested !== undefined && tally.counts.flat !== undefined ? [MIXED_WARNING] : []
  warnings.push(...stateWarnings(state, mode, def.blocked))
  const operator = reasons === undefined ? null : operatorWarning(tally.operatorRows)
  if (operator !== null) warnings.push(operator)
  const report = {
    box: input.box,
    mode,
    default: def.applied,
    defaultBlocked: def.blocked,
    rows,
    leg: input.leg,
    warnings,
  }
  return { report, tally }
}

/** An instance row as the pass judges it; undefined for a row that is neither the activator's nor external. */
function judgeRow(route: Route, routes: readonly Route[], pass: ManagedReportInput['pass']): RowReport | undefined {
  if (activatorManaged(route)) {
    const judged = pass.classify(route, routes)
    // Held down after a refused nested move: flat, but it does not wake.
    const hold = judged.layout === 'flat' ? pass.held(route.host) : undefined
    return hold === undefined
      ? row(judged.layout, judged, pass.note(route.host))
      : row('fenced', heldDown(hold), pass.note(route.host))
  }
  // Run by another supervisor: not ours to migrate.
  return external(route) ? row('external') : undefined
}

/** An unreadable intent, and a nested default not in force. */
function stateWarnings(state: ManagedReportInput['state'], mode: ReportMode, blocked: string): string[] {
  const out: string[] = []
  if (mode === 'unreadable') {
    const why = state.unreadableWhy()
    out.push(
      `the layout intent cannot be read${why === '' ? '' : ` (${why})`}: ` +
        `nothing moves and nothing is released flat until it can`,
    )
  }
  if (blocked !== '') out.push(`nested by default is not in force: ${blocked}`)
  return out
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

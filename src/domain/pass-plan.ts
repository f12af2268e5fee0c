// The pass's decisions, without I/O: a row's plan, group commits, a
// journal's recovery and whether a hold stands (design §3, §4).
import { errorMessage } from '../errors.js'
import type { PathClaims } from './classify.js'
import type { IntentMode, Mode, Result } from './modes.js'
import { carryDb, MAX_SOCKET_PATH, nestedRoot, pathsFor, type Dirs } from './paths.js'
import type { Classification } from './ports.js'
import { why, type Why } from './reason-codes.js'
import type { Route, RowPaths } from './schemas.js'

export interface MoveRecord {
  host: string
  to: Mode
  from: RowPaths
  dest: RowPaths
}

export function otherMode(m: Mode): Mode {
  return m === 'nested' ? 'flat' : 'nested'
}

export type RowPlan =
  | { kind: 'unchanged' }
  | ({ kind: 'refused' } & Why)
  /** The hold is moot. */
  | ({ kind: 'release' } & Why)
  | { kind: 'move'; from: RowPaths; dest: RowPaths }

export interface PlanContext {
  dirs: Dirs
  /** Fences left out: the pass decides about held hosts itself. */
  classification: Classification
  hold: Mode | undefined
  /** null: nested may wake. */
  gate: string | null
  claims: PathClaims
}

/** Design §3 step 1: refuse, before anything stops, what could not move. */
export function planRow(route: Route, mode: Mode, ctx: PlanContext): RowPlan {
  const { layout, code, reason } = ctx.classification
  // The row's own reason is the refusal's: its code says what to fix.
  if (layout === 'conflict' || layout === 'foreign' || layout === 'external') {
    return {
      kind: 'refused',
      code: code === '' ? 'not_managed' : code,
      reason: reason === '' ? layout : `${layout}: ${reason}`,
    }
  }
  if (layout === 'fenced')
    return { kind: 'refused', code: code === '' ? 'fenced_for_move' : code, reason: `fenced: ${reason}` }
  if (layout === mode) {
    return ctx.hold === undefined
      ? { kind: 'unchanged' }
      : {
          kind: 'release',
          code: 'hold_dropped',
          reason: `hold dropped: the host is ${mode} already, as the intent wants`,
        }
  }
  const dest = pathsFor(ctx.dirs, route.host, mode)
  if (mode === 'nested') {
    if (ctx.gate !== null) return { kind: 'refused', code: 'gate_shut', reason: `isolation not ready: ${ctx.gate}` }
    const n = Buffer.byteLength(dest.socket)
    if (n > MAX_SOCKET_PATH) {
      return {
        kind: 'refused',
        code: 'socket_too_long',
        reason: `nested socket path ${dest.socket} is ${n} bytes, over ${MAX_SOCKET_PATH}: it could not be bound`,
      }
    }
  }
  // A move sets aside what is at its destination, another row's files too.
  const destDir = mode === 'nested' ? nestedRoot(ctx.dirs, route.host) : dest.dir
  const claimant = ctx.claims.dirClaimant(destDir, route.host) ?? ctx.claims.socketClaimant(dest.socket, route.host)
  if (claimant !== undefined)
    return { kind: 'refused', code: 'dest_taken', reason: `destination taken: ${claimant.reason}` }
  return {
    kind: 'move',
    from: { dir: route.dir, socket: route.socket, db: route.db },
    dest: { ...dest, db: carryDb(route.db, route.dir, dest.dir) },
  }
}

/** `unreadable` fails closed; `none` is flat only under the opt-out. */
export function wantedMode(intent: IntentMode, defaultOptedOut: boolean): Mode | undefined {
  if (intent === 'flat' || intent === 'nested') return intent
  if (intent === 'none' && defaultOptedOut) return 'flat'
  return undefined
}

export type RowAt = 'from' | 'dest' | 'other' | 'missing'

export function samePaths(a: RowPaths, b: RowPaths): boolean {
  return a.dir === b.dir && a.socket === b.socket && a.db === b.db
}

export function rowAt(route: Route | undefined, move: MoveRecord): RowAt {
  if (route === undefined) return 'missing'
  if (samePaths(route, move.from)) return 'from'
  if (samePaths(route, move.dest)) return 'dest'
  return 'other'
}

export interface RecoveryFacts {
  fromExists: boolean
  destExists: boolean
  /** A symlink at dest is never what a rename put there (design §3 step 7). */
  destIsLink?: boolean
  row: RowAt
}

export type RecoveryAction =
  | { kind: 'redo-move' }
  /** The intent now wants from's shape. */
  | { kind: 'rollback' }
  | { kind: 'redo-row' }
  | { kind: 'redo-finish' }
  | ({ kind: 'keep' } & Why)

/** The design §4.1 table. */
export function recoveryAction(move: MoveRecord, facts: RecoveryFacts, wants: Mode | undefined): RecoveryAction {
  if (facts.fromExists && facts.destExists) {
    return {
      kind: 'keep',
      code: 'ambiguous',
      reason: `ambiguous: files at both ${move.from.dir} and ${move.dest.dir}; an operator decides which to keep`,
    }
  }
  if (!facts.fromExists && !facts.destExists) {
    return {
      kind: 'keep',
      code: 'files_missing',
      reason: `files missing: neither ${move.from.dir} nor ${move.dest.dir} exists; nothing is invented`,
    }
  }
  if (!facts.fromExists && facts.destIsLink === true) {
    return {
      kind: 'keep',
      code: 'dest_symlink',
      reason: `${move.dest.dir} is a symlink, not the directory the move renamed there; an operator decides`,
    }
  }
  if (facts.row === 'missing') {
    return {
      kind: 'keep',
      code: 'row_gone',
      reason:
        `the row is gone from the registry while its files are at ` +
        `${facts.fromExists ? move.from.dir : move.dest.dir}`,
    }
  }
  if (facts.row === 'other') {
    return {
      kind: 'keep',
      code: 'row_elsewhere',
      reason: `the row's paths are neither the journal's from (${move.from.dir}) nor its dest (${move.dest.dir})`,
    }
  }
  if (facts.fromExists) {
    if (facts.row === 'dest')
      return {
        kind: 'keep',
        code: 'row_ahead',
        reason: `files are at ${move.from.dir} but the row already says ${move.dest.dir}`,
      }
    return wants === otherMode(move.to) ? { kind: 'rollback' } : { kind: 'redo-move' }
  }
  return facts.row === 'from' ? { kind: 'redo-row' } : { kind: 'redo-finish' }
}

/** Design §4.2; rowShape: the row's shape now. */
export function holdStands(
  holdTo: Mode,
  rowShape: Mode | undefined,
  intent: IntentMode,
  defaultOptedOut: boolean,
): { stands: true } | { stands: false; reason: string } {
  if (rowShape === holdTo) return { stands: false, reason: `its move to ${holdTo} is done` }
  const wants = wantedMode(intent, defaultOptedOut)
  if (wants === undefined || wants === holdTo) return { stands: true }
  if (rowShape === wants)
    return {
      stands: false,
      reason: `the intent is ${intent === 'none' ? 'none (default opted out)' : intent}; the host is ${wants} already`,
    }
  return { stands: true }
}

/** A journal outside its host's two shapes is never acted on. */
export function recordShapeError(j: MoveRecord, dirs: Dirs): string | null {
  const want = pathsFor(dirs, j.host, j.to)
  const was = pathsFor(dirs, j.host, otherMode(j.to))
  if (j.dest.dir !== want.dir || j.dest.socket !== want.socket) return `dest is not the ${j.to} paths of ${j.host}`
  if (j.from.dir !== was.dir || j.from.socket !== was.socket)
    return `from is not the ${otherMode(j.to)} paths of ${j.host}`
  if (j.from.db === '' && j.dest.db === '') return null
  let carried: string
  try {
    carried = carryDb(j.from.db, j.from.dir, j.dest.dir)
  } catch (err) {
    return errorMessage(err)
  }
  return carried === j.dest.db ? null : `dest.db ${j.dest.db} is not from.db carried to ${j.dest.dir}`
}

/** design §3 step 2 */
export function awakeReason(leftMs: number): Why {
  return why('awake_grace', `awake: ${Math.max(1, Math.ceil(leftMs / 60_000))}m of grace left`)
}

/** Design §3 step 5; secondNameFile parses it back. */
export function secondNameReason(rel: string, links: number): string {
  return `a file of its has a second name: ${rel} has ${links} links`
}

const SECOND_NAME = /^a file of its has a second name: (.+) has [0-9]+ links$/

/** undefined for other text, and for escaped bytes (`\xNN`): no typable path. */
export function secondNameFile(reason: string): string | undefined {
  const rel = SECOND_NAME.exec(reason)?.[1]
  return rel === undefined || rel.includes('\\x') ? undefined : rel
}

export interface MoveCandidate {
  record: MoveRecord
  /** A failure leaves it fenced and held. */
  wasHeld: boolean
}

/** The bounds of an adaptive group commit (design §3.3). */
export const MIN_BATCH = 128
export const MAX_BATCH = 256

/**
 * Half the hosts still waiting, within bounds: a batch's fsync rounds cost the same at any size, so a long
 * run shares them and a short one keeps few hosts fenced at once.
 */
export function adaptiveBatchSize(waiting: number): number {
  return Math.min(MAX_BATCH, Math.max(MIN_BATCH, Math.ceil(waiting / 2)))
}

/** Each slice is fenced, journaled and committed together. */
export function inBatches<T>(items: readonly T[], size: number | ((waiting: number) => number)): T[][] {
  const batches: T[][] = []
  for (let i = 0; i < items.length;) {
    const step = Math.max(1, typeof size === 'number' ? size : size(items.length - i))
    batches.push(items.slice(i, i + step))
    i += step
  }
  return batches
}

export interface ClaimSort {
  /** No wake claim: fenced and moved together. */
  sleeping: MoveCandidate[]
  /** Grace over, held or forced: stopped one at a time. */
  awake: MoveCandidate[]
  deferred: Array<{ candidate: MoveCandidate; because: Why; leftMs: number }>
}

/** graceLeft is asked only where a grace could defer: asking starts it. */
export function sortByClaim(
  batch: readonly MoveCandidate[],
  opts: { claimed: (host: string) => boolean; deferAwake: boolean; graceLeft: (host: string) => number },
): ClaimSort {
  const out: ClaimSort = { sleeping: [], awake: [], deferred: [] }
  for (const candidate of batch) {
    const host = candidate.record.host
    if (!opts.claimed(host)) {
      out.sleeping.push(candidate)
      continue
    }
    if (opts.deferAwake && !candidate.wasHeld) {
      const left = opts.graceLeft(host)
      if (left > 0) {
        out.deferred.push({ candidate, because: awakeReason(left), leftMs: left })
        continue
      }
    }
    out.awake.push(candidate)
  }
  return out
}

const ORDER_STRIDE = 256

/**
 * Row order, run-wide results first; a host's last result wins unless `unchanged`. Yields, so a large
 * run's end does not hold the loop.
 */
export async function inRowOrder(
  results: readonly Result[],
  rows: ReadonlyArray<{ host: string }>,
  pause: () => Promise<void> = () => Promise.resolve(),
): Promise<Result[]> {
  const whole: Result[] = []
  const byHost = new Map<string, Result>()
  for (const [i, r] of results.entries()) {
    if (i % ORDER_STRIDE === 0) await pause()
    if (r.host === '') whole.push(r)
    else if (r.outcome !== 'unchanged' || !byHost.has(r.host)) byHost.set(r.host, r)
  }
  const inRows: Result[] = []
  for (const [i, row] of rows.entries()) {
    if (i % ORDER_STRIDE === 0) await pause()
    const r = byHost.get(row.host)
    if (r === undefined) continue
    inRows.push(r)
    byHost.delete(row.host)
  }
  // A journal's host gone from the registry: before the rows.
  return [...whole, ...byHost.values(), ...inRows]
}

// The pass's decisions, without I/O: what to do with one row under a mode
// (design §3 step 1), how a run's moves are split into group commits and
// into sleeping and awake hosts, the order of its results, what recovery
// does with one journal (the §4 table), and whether a hold stands or drops.
import { errorMessage } from '../errors.js'
import type { PathClaims } from './classify.js'
import type { IntentMode, Mode, Result } from './modes.js'
import { carryDb, MAX_SOCKET_PATH, nestedRoot, pathsFor, type Dirs } from './paths.js'
import type { Classification } from './ports.js'
import { why, type Why } from './reason-codes.js'
import type { Route, RowPaths } from './schemas.js'

/** What a journal records about one move (its durable part is infra's; this is the shape the rules read). */
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
  /** The row is already where the mode wants it; its hold marker is moot. */
  | ({ kind: 'release' } & Why)
  | { kind: 'move'; from: RowPaths; dest: RowPaths }

export interface PlanContext {
  dirs: Dirs
  /** The row's classification with fences left out: the pass decides about held hosts itself. */
  classification: Classification
  /** The mode a hold marker on the host was refused toward, if it is held. */
  hold: Mode | undefined
  /** The isolation gate's answer (null: nested may wake). */
  gate: string | null
  claims: PathClaims
}

/**
 * Step 1, Decide: skip a row already in the target shape, refuse what must
 * not be stopped for nothing (a gate that says no, a socket that cannot be
 * bound, a destination another row claims), and never move a row the pass
 * does not recognise.
 */
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
  // The move sets aside whatever it finds at its destination, so a
  // destination another row owns would hand that row's files to aside/.
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

/**
 * The mode an intent wants rows in, or undefined when it wants none in
 * particular: `unreadable` fails closed, and `none` means flat only when
 * the deployment opted out of the nested default (the host wakes flat).
 */
export function wantedMode(intent: IntentMode, defaultOptedOut: boolean): Mode | undefined {
  if (intent === 'flat' || intent === 'nested') return intent
  if (intent === 'none' && defaultOptedOut) return 'flat'
  return undefined
}

/** Where a row stands relative to a journal. */
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
  /** What is at dest is a symlink, not a directory: never the directory a rename moved there (design §3 step 7). */
  destIsLink?: boolean
  row: RowAt
}

export type RecoveryAction =
  /** Files at from, row at from: redo steps 5–9. */
  | { kind: 'redo-move' }
  /** Files at from, row at from, and the intent now wants from's shape: drop the journal. */
  | { kind: 'rollback' }
  /** Files at dest, row at from: redo steps 8 and 9. */
  | { kind: 'redo-row' }
  /** Files at dest, row at dest: redo step 9. */
  | { kind: 'redo-finish' }
  /** Anything else: the host stays fenced, and the reason names what was found. */
  | ({ kind: 'keep' } & Why)

/** The design §4 table. `wants` is wantedMode of the intent recovery runs under. */
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

/**
 * Whether a hold marker stands under an intent (design §4, restoring holds).
 * `rowShape` is the shape the row has now (undefined: neither).
 */
export function holdStands(
  holdTo: Mode,
  rowShape: Mode | undefined,
  intent: IntentMode,
  defaultOptedOut: boolean,
): { stands: true } | { stands: false; reason: string } {
  // A move the hold refused has happened since (a crash between the move's
  // end and the marker's removal): nothing is held any more.
  if (rowShape === holdTo) return { stands: false, reason: `its move to ${holdTo} is done` }
  const wants = wantedMode(intent, defaultOptedOut)
  if (wants === undefined || wants === holdTo) return { stands: true }
  // The fleet no longer wants the move that was refused, and the host is
  // already where it wants it: it wakes as it is.
  if (rowShape === wants)
    return {
      stands: false,
      reason: `the intent is ${intent === 'none' ? 'none (default opted out)' : intent}; the host is ${wants} already`,
    }
  return { stands: true }
}

/** Why a journal's paths are not the two shapes of its host, or null. A journal outside them is never acted on. */
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

/** The deferral reason of an awake host (design §3 step 2). */
export function awakeReason(leftMs: number): Why {
  return why('awake_grace', `awake: ${Math.max(1, Math.ceil(leftMs / 60_000))}m of grace left`)
}

/**
 * The reason a host is held for a file of its with a second name (design §3
 * step 5): the file named relative to the tenant's directory (rel, as
 * shownPath shows it), which secondNameFile reads back for `status HOST`'s
 * advice. The two are one format, kept here together.
 */
export function secondNameReason(rel: string, links: number): string {
  return `a file of its has a second name: ${rel} has ${links} links`
}

const SECOND_NAME = /^a file of its has a second name: (.+) has [0-9]+ links$/

/**
 * The file, relative to the tenant's directory, that a hold marker's
 * second-name reason names; undefined for any other text, and for a name
 * shown with escaped bytes (`\xNN`), which names no path a shell can type.
 */
export function secondNameFile(reason: string): string | undefined {
  const rel = SECOND_NAME.exec(reason)?.[1]
  return rel === undefined || rel.includes('\\x') ? undefined : rel
}

/** A row the plan moves: its move as the journal will record it, and whether it was held before this run. */
export interface MoveCandidate {
  record: MoveRecord
  /** Held before this run reached it: a failure leaves it fenced and held, as it was. */
  wasHeld: boolean
}

/** The bounds of an adaptive group commit (design §3.3). */
export const MIN_BATCH = 128
export const MAX_BATCH = 256

/**
 * How many hosts the next group commit takes when `waiting` are still to
 * move (design §3.3): half of them, at least MIN_BATCH and at most
 * MAX_BATCH. Each batch costs the same few rounds of fsyncs whatever its
 * size, so a long run shares them among more hosts; a short one keeps few
 * hosts waiting fenced at once.
 */
export function adaptiveBatchSize(waiting: number): number {
  return Math.min(MAX_BATCH, Math.max(MIN_BATCH, Math.ceil(waiting / 2)))
}

/**
 * The group commits of a run (design §3 "Many hosts"): consecutive slices
 * of at most size moves, each fenced, journaled and committed together.
 * size may be a function of how many are still waiting (adaptiveBatchSize).
 */
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
  /** Hosts holding no wake claim: fenced and moved together. */
  sleeping: MoveCandidate[]
  /** Hosts holding a claim whose grace is over (or that were held, or under a forced intent): stopped one at a time. */
  awake: MoveCandidate[]
  /** Hosts holding a claim inside their grace: left alone this run (design §3 step 2), with the grace left. */
  deferred: Array<{ candidate: MoveCandidate; because: Why; leftMs: number }>
}

/**
 * Sorts a batch by its wake claims (design §3 step 2). graceLeft is asked
 * only for a claimed host that was not held, and only when awake hosts are
 * deferred at all (a forced intent stops them at once): asking starts that
 * host's grace.
 */
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

/** How many results inRowOrder takes between two asks whether to give the loop back. */
const ORDER_STRIDE = 256

/**
 * One result per host, in row order (results about the whole run first).
 * A host recovery finished and the row loop then reached says what
 * happened to it last, unless that was only `unchanged`. `pause` is asked
 * every ORDER_STRIDE results (the pass's slicer), so ordering a large run's
 * results does not hold the loop as the run ends.
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
  // One walk of the rows, no sort.
  const inRows: Result[] = []
  for (const [i, row] of rows.entries()) {
    if (i % ORDER_STRIDE === 0) await pause()
    const r = byHost.get(row.host)
    if (r === undefined) continue
    inRows.push(r)
    byHost.delete(row.host)
  }
  // What is left names no row (a journal whose host the registry no longer has): before the rows, as found.
  return [...whole, ...byHost.values(), ...inRows]
}

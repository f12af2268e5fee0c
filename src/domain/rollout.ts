// The rules of a staged rollout (design §7.6): the waves an operator asks
// for (`1,10%,pause,50%,100%`), which box is in which wave (fixed when the
// rollout is recorded, by a stable hash of the rollout's id and the label),
// when a box of the open wave may start (never more than maxParallel
// moving), whether a wave has passed, failed or is still under way (judged
// from each box's current progress, skipped boxes left out), what a
// failure, a passed deadline or a manual gate does, the events each change
// leaves, and the intent an open wave stands for on a box that has
// started. Pure: the etcd store keeps the record and advances it by
// compare-and-swap.
import { Type } from './typebox.js'
import type { Static } from 'typebox'
import type { IntentRecord } from './schemas.js'

export const ROLLOUT_STATES = ['running', 'waiting', 'paused', 'frozen', 'reverted', 'aborted', 'done'] as const
export type RolloutState = (typeof ROLLOUT_STATES)[number]

/**
 * Why a rollout stopped or waits, for code to decide by (the record's `reason` is the operator's
 * sentence): paused by an operator, its progress deadline passed, a wave over its failed-row threshold, a
 * box of the open wave gone, a manual gate reached (`waiting` until `promote`), aborted by an operator, or
 * superseded by an intent recorded over it (`revert --now`, `intent --supersede`).
 */
export const ROLLOUT_CAUSES = [
  'operator_pause',
  'progress_deadline',
  'failed_rows',
  'box_gone',
  'manual_gate',
  'operator_abort',
  'superseded',
] as const
export type RolloutCause = (typeof ROLLOUT_CAUSES)[number]
const Cause = Type.Union([
  Type.Literal('operator_pause'),
  Type.Literal('progress_deadline'),
  Type.Literal('failed_rows'),
  Type.Literal('box_gone'),
  Type.Literal('manual_gate'),
  Type.Literal('operator_abort'),
  Type.Literal('superseded'),
])
const State = Type.Union([
  Type.Literal('running'),
  Type.Literal('waiting'),
  Type.Literal('paused'),
  Type.Literal('frozen'),
  Type.Literal('reverted'),
  Type.Literal('aborted'),
  Type.Literal('done'),
])
export const ON_FAILURE = ['pause', 'revert', 'freeze'] as const
export type OnFailure = (typeof ON_FAILURE)[number]

/** The progress deadline when `--progress-deadline` is not given. */
export const DEFAULT_PROGRESS_DEADLINE_MS = 10 * 60_000

export const RolloutRecord = Type.Object(
  {
    /** The rollout's id, which is also the id of the intent its open waves stand for. */
    id: Type.String({ minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9._-]+$' }),
    mode: Type.Union([Type.Literal('nested'), Type.Literal('flat')]),
    force: Type.Boolean(),
    /** The boxes of each wave, fixed when recorded. */
    waves: Type.Array(Type.Array(Type.String(), { minItems: 1 }), { minItems: 1 }),
    maxParallel: Type.Integer({ minimum: 1 }),
    progressDeadlineMs: Type.Integer({ minimum: 1 }),
    onFailure: Type.Union([Type.Literal('pause'), Type.Literal('revert'), Type.Literal('freeze')]),
    /** A wave passes with at most this many rows of its boxes not in the rollout's layout. */
    maxFailedRows: Type.Integer({ minimum: 0 }),
    state: State,
    /** The index of the open wave (the last one opened). */
    wave: Type.Integer({ minimum: 0 }),
    waveOpenedAt: Type.String(),
    /** Why the rollout stopped or waits (paused, waiting, frozen, reverted, aborted); empty while it runs. */
    reason: Type.String(),
    /** The reason's code; absent while it runs, and in records of builds before it. */
    cause: Type.Optional(Cause),
    /** The waves (their index) that open only on `promote`: a manual gate before each. Absent: none. */
    gates: Type.Optional(Type.Array(Type.Integer({ minimum: 1 }))),
    /** How many times an operator asked each box to run again (`retry`). Absent: never. */
    retries: Type.Optional(Type.Record(Type.String(), Type.Integer({ minimum: 1 }))),
    /** The boxes an operator left out of this rollout's verdicts and lanes (`skip`), with who, when and why. */
    skipped: Type.Optional(
      Type.Record(
        Type.String(),
        Type.Object({ by: Type.String(), at: Type.String(), message: Type.String() }, { additionalProperties: false }),
      ),
    ),
    recordedAt: Type.String(),
    by: Type.String(),
    message: Type.String(),
    /** The intent recorded when the rollout ended by passing or by revert, if any. */
    finalIntent: Type.Optional(Type.String()),
  },
  { additionalProperties: false },
)
export type RolloutRecord = Static<typeof RolloutRecord>

/** One item of `--waves`: a count of boxes, or a percentage of the fleet; cumulative. `gate`: wait for promote. */
export type WaveSpec = { count: number; gate?: true } | { percent: number; gate?: true }

/**
 * `1,10%,pause,50%,100%` as specs; throws naming the bad item. The last must be 100%: every box is in a
 * wave. A `pause` item is a manual gate: the wave after it opens only on `promote`, so it stands between
 * two waves (never first, never twice in a row).
 */
export function parseWaves(text: string): WaveSpec[] {
  const items = text.split(',').map((s) => s.trim())
  const specs: WaveSpec[] = []
  let gate = false
  for (const item of items) {
    if (item === 'pause') {
      if (specs.length === 0 || gate)
        throw new Error(`--waves ${JSON.stringify(text)}: a pause stands between two waves (after one, not twice)`)
      gate = true
      continue
    }
    const m = /^([0-9]{1,6})(%?)$/.exec(item)
    const n = m === null ? NaN : Number(m[1])
    if (m === null || n === 0 || (m[2] === '%' && n > 100))
      throw new Error(
        `--waves item ${JSON.stringify(item)}: a count of boxes (like 1), a percentage (1% to 100%), or pause`,
      )
    const spec: WaveSpec = m[2] === '%' ? { percent: n } : { count: n }
    specs.push(gate ? { ...spec, gate: true } : spec)
    gate = false
  }
  const last = specs.at(-1)
  if (gate || last === undefined || !('percent' in last) || last.percent !== 100)
    throw new Error(`--waves ${JSON.stringify(text)}: the last wave must be 100%, so that every box is in one`)
  return specs
}

/** How many boxes the waves reach in all, wave by wave, for a fleet of n: cumulative, never down. */
function reached(specs: readonly WaveSpec[], n: number): number[] {
  let before = 0
  return specs.map((s) => {
    const want = 'count' in s ? s.count : Math.ceil((s.percent * n) / 100)
    before = Math.max(before, Math.min(n, want))
    return before
  })
}

/** A stable 32-bit hash (FNV-1a) of a string: the order boxes join waves in. */
function fnv1a(s: string): number {
  let h = 0x811c9dc5
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i)
    h = Math.imul(h, 0x01000193) >>> 0
  }
  return h
}

/**
 * The boxes in their waves: ordered by a hash of the rollout's id and the
 * label (so the first wave is not always the same box), then cut where
 * the specs say. Empty waves are dropped. Throws when there is no box.
 */
export function assignWaves(rolloutId: string, boxes: readonly string[], specs: readonly WaveSpec[]): string[][] {
  return cutWaves(rolloutId, boxes, specs).waves
}

/**
 * The waves and their manual gates (the index of each wave that opens only on promote). A gate before a
 * wave left empty moves to the next wave kept; one before no wave kept is dropped, as is one before the
 * first (nothing passed before it).
 */
export function cutWaves(
  rolloutId: string,
  boxes: readonly string[],
  specs: readonly WaveSpec[],
): { waves: string[][]; gates: number[] } {
  const unique = [...new Set(boxes)]
  if (unique.length === 0) throw new Error('no live box to roll out to (no summary under the boxes prefix)')
  const order = unique
    .map((box) => ({ box, h: fnv1a(`${rolloutId}/${box}`) }))
    .sort((a, b) => a.h - b.h || (a.box < b.box ? -1 : a.box > b.box ? 1 : 0))
    .map((x) => x.box)
  const waves: string[][] = []
  const gates: number[] = []
  let from = 0
  let gate = false
  const ends = reached(specs, order.length)
  ends.forEach((to, i) => {
    gate ||= specs[i]?.gate === true
    if (to <= from) return
    if (gate && waves.length > 0) gates.push(waves.length)
    gate = false
    waves.push(order.slice(from, to))
    from = to
  })
  return { waves, gates }
}

/** Where a box is in a rollout: its wave and its place in it, or undefined when it is in none. */
export function placeOf(r: Pick<RolloutRecord, 'waves'>, box: string): { wave: number; index: number } | undefined {
  for (let wave = 0; wave < r.waves.length; wave++) {
    const index = r.waves[wave]?.indexOf(box) ?? -1
    if (index >= 0) return { wave, index }
  }
  return undefined
}

/**
 * The box whose end lets this one start, or null when it may start at once:
 * the boxes of a wave go in maxParallel lanes, box i after box i - N, so
 * never more than N move at once.
 */
export function predecessorOf(r: Pick<RolloutRecord, 'waves' | 'maxParallel'>, box: string): string | null {
  const place = placeOf(r, box)
  if (place === undefined) return null
  const i = place.index - r.maxParallel
  return i < 0 ? null : (r.waves[place.wave]?.[i] ?? null)
}

/** The lane a box of a wave moves in: its place in the wave modulo maxParallel. */
export function laneOf(r: Pick<RolloutRecord, 'waves' | 'maxParallel'>, box: string): number | undefined {
  const place = placeOf(r, box)
  return place === undefined ? undefined : place.index % r.maxParallel
}

/** A lane as read: the box last started in it (null when none), and the key's revision ('0' when none). */
export interface LaneHolder {
  lane: number
  box: string | null
  rev: string
}

/** Where a started box of the rollout is; a box with no entry has not started. */
export interface BoxProgress {
  /** Its pass ended on the rollout's intent: leg idle, the summary naming the rollout's id. */
  done: boolean
  /**
   * Rows not in the rollout's layout as the box last said (held, fenced, refused, failed, foreign), the
   * deferred ones aside: the box keeps it current after its end.
   */
  failedRows: number
  /** Rows left in the other layout for their tenant's wake grace: they neither fail nor hold a wave. */
  deferredRows?: number
  /** The retries (`retry`) the box has answered with a run since: fewer than asked is a box not done. */
  retried?: number
}

/** What a box writes as its progress (the part of BoxProgress that is its own to say). */
export type BoxReport = Required<Omit<BoxProgress, 'done'>>

/** An operator left the box out of this rollout (`skip`). */
export function isSkipped(r: Pick<RolloutRecord, 'skipped'>, box: string): boolean {
  return r.skipped !== undefined && Object.hasOwn(r.skipped, box)
}

/** An operator asked the box to run again and it has not answered with a run since. */
export function retryPending(r: Pick<RolloutRecord, 'retries'>, box: string, p: BoxProgress | undefined): boolean {
  const asked = r.retries !== undefined && Object.hasOwn(r.retries, box) ? (r.retries[box] ?? 0) : 0
  return asked > (p?.retried ?? 0)
}

/** The box is done in the rollout: its pass ended on the rollout's intent, and no retry waits on it. */
export function isDone(r: Pick<RolloutRecord, 'retries'>, box: string, p: BoxProgress | undefined): boolean {
  return p?.done === true && !retryPending(r, box, p)
}

/** The box's lane lets the next one go: it is done, left the fleet, or was skipped. */
function laneFree(
  r: RolloutRecord,
  box: string,
  progress: ReadonlyMap<string, BoxProgress>,
  live: ReadonlySet<string>,
): boolean {
  return progress.get(box)?.done === true || !live.has(box) || isSkipped(r, box)
}

/** Whether a box that has not started may start now. */
export function mayStart(
  r: RolloutRecord,
  box: string,
  progress: ReadonlyMap<string, BoxProgress>,
  live: ReadonlySet<string>,
): boolean {
  const place = placeOf(r, box)
  if (r.state !== 'running' || place === undefined || place.wave > r.wave || progress.has(box)) return false
  if (isSkipped(r, box)) return false
  const pred = predecessorOf(r, box)
  // A lane moves on past a box that has left the fleet (it moves nothing) or was skipped.
  return pred === null || laneFree(r, pred, progress, live)
}

export type WaveVerdict =
  | { kind: 'under-way'; pending: string[] }
  | { kind: 'passed'; failedRows: number }
  | { kind: 'failed'; why: string; cause: 'failed_rows' | 'box_gone' }

/**
 * The open wave's verdict, from each box's current progress, skipped boxes
 * left out: passed when every box of it is done with at most maxFailedRows
 * rows not in the layout (deferred rows are not failed ones); failed when
 * more, or when a box of it left the fleet (no live summary) before it was
 * done; else under way.
 */
export function waveVerdict(
  r: RolloutRecord,
  progress: ReadonlyMap<string, BoxProgress>,
  live: ReadonlySet<string>,
): WaveVerdict {
  const boxes = (r.waves[r.wave] ?? []).filter((b) => !isSkipped(r, b))
  const done = (b: string) => isDone(r, b, progress.get(b))
  const gone = boxes.filter((b) => !done(b) && !live.has(b))
  if (gone.length > 0)
    return {
      kind: 'failed',
      cause: 'box_gone',
      why: `box ${gone.join(', ')} of wave ${r.wave + 1} left the fleet before it was done`,
    }
  const pending = boxes.filter((b) => !done(b))
  const failedRows = boxes.reduce((n, b) => n + (progress.get(b)?.failedRows ?? 0), 0)
  if (failedRows > r.maxFailedRows) {
    const worst = boxes.filter((b) => (progress.get(b)?.failedRows ?? 0) > 0)
    return {
      kind: 'failed',
      cause: 'failed_rows',
      why:
        `wave ${r.wave + 1}: ${failedRows} rows not ${r.mode} (on ${worst.join(', ')}), ` +
        `over the threshold of ${r.maxFailedRows}`,
    }
  }
  if (pending.length > 0) return { kind: 'under-way', pending }
  return { kind: 'passed', failedRows }
}

/** The open wave's deadline passed with the wave not passed: the rollout pauses. */
export function deadlinePassed(r: RolloutRecord, nowMs: number): boolean {
  return r.state === 'running' && nowMs - Date.parse(r.waveOpenedAt) > r.progressDeadlineMs
}

/** What an advance does to the record: the next one, or null when nothing changes. */
export function advance(
  r: RolloutRecord,
  verdict: WaveVerdict,
  nowMs: number,
  deadlineMs = r.progressDeadlineMs,
): RolloutRecord | null {
  if (r.state !== 'running') return null
  const at = new Date(nowMs).toISOString()
  if (verdict.kind === 'passed') {
    if (r.wave + 1 >= r.waves.length) return running({ ...r, state: 'done' })
    // A manual gate: the wave passed, and the next opens on promote.
    if (r.gates?.includes(r.wave + 1) === true)
      return {
        ...r,
        state: 'waiting',
        cause: 'manual_gate',
        reason: `wave ${r.wave + 1} passed; wave ${r.wave + 2} opens on \`layoutd fleet rollout promote\``,
      }
    return { ...r, wave: r.wave + 1, waveOpenedAt: at }
  }
  if (verdict.kind === 'failed') return failed(r, verdict.why, verdict.cause)
  if (nowMs - Date.parse(r.waveOpenedAt) > deadlineMs)
    return {
      ...r,
      state: 'paused',
      cause: 'progress_deadline',
      reason:
        `progress deadline: wave ${r.wave + 1} did not pass within ${Math.round(deadlineMs / 1000)}s ` +
        `(waiting on ${verdict.pending.slice(0, 10).join(', ')}${verdict.pending.length > 10 ? ', …' : ''})`,
    }
  return null
}

/** The record with no reason and no cause: it runs (or is done). */
export function running(r: RolloutRecord): RolloutRecord {
  const next = { ...r, reason: '' }
  delete next.cause
  return next
}

/** A failed wave, as --on-failure says: paused (resumable), frozen (ends where it is), or reverted. */
function failed(r: RolloutRecord, why: string, cause: RolloutCause): RolloutRecord {
  const state: RolloutState = r.onFailure === 'pause' ? 'paused' : r.onFailure === 'freeze' ? 'frozen' : 'reverted'
  return { ...r, state, reason: why, cause }
}

/** A rollout no agent advances any more. */
export function isFinal(r: Pick<RolloutRecord, 'state'>): boolean {
  return r.state === 'frozen' || r.state === 'reverted' || r.state === 'aborted' || r.state === 'done'
}

/**
 * The intent the rollout stands for on a box that has started in it:
 * box-addressed, with the rollout's id, so that selectIntent weighs it
 * against the records like any other (a record made later wins).
 */
export function rolloutIntent(r: RolloutRecord, box: string): IntentRecord {
  return { id: r.id, mode: r.mode, force: r.force, box, recordedAt: r.recordedAt, by: r.by }
}

/** The records with the rollouts' intents for box merged in, sorted by id (newest last). */
export function withRolloutIntents(
  records: readonly IntentRecord[],
  rollouts: readonly RolloutRecord[],
  box: string,
  started: (rolloutId: string) => boolean,
): IntentRecord[] {
  const extra = rollouts.filter((r) => r.state !== 'reverted' && started(r.id)).map((r) => rolloutIntent(r, box))
  if (extra.length === 0) return [...records]
  return [...records, ...extra].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
}

/** A record as read, with the revision its next change must compare against. */
export interface StoredRollout {
  record: RolloutRecord
  rev: string
}

/** The active pointer as read: its revision ('0' when none was ever set) and the rollout it names. */
export interface ActiveRollout {
  pointerRev: string
  current: StoredRollout | undefined
}

/** Where rollouts are kept (the etcd store; the directory store, serving one box, keeps none). */
export interface RolloutPort {
  describe(): string
  /** Aborted once the store is closed. */
  readonly closed: AbortSignal
  list(signal: AbortSignal): Promise<StoredRollout[]>
  get(id: string, signal: AbortSignal): Promise<StoredRollout | undefined>
  active(signal: AbortSignal): Promise<ActiveRollout>
  /** event: written in the same transaction (the rollout's `recorded`). */
  create(r: RolloutRecord, seen: ActiveRollout, signal: AbortSignal, event?: RolloutEvent): Promise<boolean>
  /** intent: recorded in the same transaction; event: the change's, written in it too. */
  update(
    s: StoredRollout,
    next: RolloutRecord,
    signal: AbortSignal,
    intent?: IntentRecord,
    event?: RolloutEvent,
  ): Promise<boolean>
  recordIntentAborting(
    intent: IntentRecord,
    running: StoredRollout | undefined,
    signal: AbortSignal,
    event?: RolloutEvent,
  ): Promise<boolean>
  /**
   * Starts box, only while the record is at s.rev and its lane as read
   * (lane.rev): a lane's starts are serialised, so a box that comes back
   * after its lane moved on cannot start beside the box that took it.
   */
  start(s: StoredRollout, box: string, wave: number, signal: AbortSignal, lane?: LaneHolder): Promise<boolean>
  /** The box a lane of a wave was last given to, and the revision a start must compare against. */
  laneHolder(id: string, wave: number, lane: number, signal: AbortSignal): Promise<LaneHolder>
  /** The box's progress as it is now (after its end): a plain put, only that box writes it. */
  putProgress(id: string, box: string, wave: number, report: BoxReport, signal: AbortSignal): Promise<void>
  hasStarted(id: string, box: string, wave: number, signal: AbortSignal): Promise<boolean>
  hasFinished(id: string, box: string, wave: number, signal: AbortSignal): Promise<boolean>
  isLive(box: string, signal: AbortSignal): Promise<boolean>
  progress(id: string, wave: number | undefined, signal: AbortSignal): Promise<Map<string, BoxProgress>>
  doneCount(id: string, wave: number, signal: AbortSignal): Promise<number>
  liveBoxes(signal: AbortSignal): Promise<Set<string>>
  /** The rollout's events, oldest first. */
  events(id: string, signal: AbortSignal): Promise<RolloutEvent[]>
  watch(onChange: () => void, signal: AbortSignal): void
}

/** What happened to a rollout: every change of its record leaves one, written in the change's transaction. */
export const ROLLOUT_EVENT_KINDS = [
  'recorded',
  'wave_opened',
  'waiting',
  'promoted',
  'paused',
  'resumed',
  'retried',
  'skipped',
  'aborted',
  'frozen',
  'reverted',
  'done',
] as const
export type RolloutEventKind = (typeof ROLLOUT_EVENT_KINDS)[number]

/**
 * One event: when, who (`user@host` of the CLI, or `agent BOX`), what, the wave it left open (from 1), the
 * box it names (retry, skip), the operator's message (`-m`), the reason and its code (a pause, a gate), and
 * the state it left. Admits fields it does not name: a reader of a build before a field still lists it.
 */
export const RolloutEvent = Type.Object({
  at: Type.String(),
  by: Type.String(),
  kind: Type.Union([
    Type.Literal('recorded'),
    Type.Literal('wave_opened'),
    Type.Literal('waiting'),
    Type.Literal('promoted'),
    Type.Literal('paused'),
    Type.Literal('resumed'),
    Type.Literal('retried'),
    Type.Literal('skipped'),
    Type.Literal('aborted'),
    Type.Literal('frozen'),
    Type.Literal('reverted'),
    Type.Literal('done'),
  ]),
  state: State,
  wave: Type.Optional(Type.Integer({ minimum: 1 })),
  box: Type.Optional(Type.String()),
  message: Type.Optional(Type.String()),
  reason: Type.Optional(Type.String()),
  cause: Type.Optional(Cause),
})
export type RolloutEvent = Static<typeof RolloutEvent>

/** The event of a change from prev to next, by who, at: its kind given, or read off the change. */
export function changeEvent(
  prev: RolloutRecord | undefined,
  next: RolloutRecord,
  at: string,
  by: string,
  o: { kind?: RolloutEventKind; box?: string; message?: string } = {},
): RolloutEvent {
  const kind: RolloutEventKind =
    o.kind ??
    (prev === undefined
      ? 'recorded'
      : next.state === 'running'
        ? prev.state === 'running'
          ? 'wave_opened'
          : 'resumed'
        : next.state)
  return {
    at,
    by,
    kind,
    state: next.state,
    wave: next.state === 'done' ? next.waves.length : next.wave + 1,
    ...(o.box === undefined ? {} : { box: o.box }),
    ...(o.message === undefined || o.message === '' ? {} : { message: o.message }),
    ...(next.reason === '' ? {} : { reason: next.reason }),
    ...(next.cause === undefined ? {} : { cause: next.cause }),
  }
}

/**
 * An event as one line, for `rollout history` and the fleet page:
 * `2026-12-07T10:00:00.000Z paused wave 2 by agent web-07: progress deadline: … [progress_deadline] — "lunch"`.
 */
export function eventLine(e: RolloutEvent): string {
  const where = `${e.wave === undefined ? '' : ` wave ${e.wave}`}${e.box === undefined ? '' : ` box ${e.box}`}`
  const why = e.reason === undefined ? '' : `: ${e.reason}${e.cause === undefined ? '' : ` [${e.cause}]`}`
  const message = e.message === undefined ? '' : ` — ${JSON.stringify(e.message)}`
  return `${e.at} ${e.kind}${where} by ${e.by}${why}${message}`
}

/** Events newest first (a history lists them so); ties kept in the order they were written. */
export function newestFirst(events: readonly RolloutEvent[]): RolloutEvent[] {
  return [...events].reverse()
}

/**
 * The records with the rollout's intent for every box that has started in
 * it (box-addressed, so one list serves every box's selection): what the
 * fleet's view judges each box against while a rollout runs.
 */
export function fleetRecords(
  records: readonly IntentRecord[],
  r: RolloutRecord | undefined,
  progress: ReadonlyMap<string, BoxProgress>,
): IntentRecord[] {
  if (r === undefined || r.state === 'reverted') return [...records]
  const extra = [...progress.keys()].map((box) => rolloutIntent(r, box))
  return [...records, ...extra].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
}

/** What a rollout's boxes say now: the figures of `rollout status`, every command's line, and the page. */
export interface RolloutCounts {
  /** The boxes of its waves, the skipped ones aside. */
  boxes: number
  done: number
  /** Started boxes whose leg runs toward the rollout's intent now (not done, or a retry asked). */
  moving: number
  skipped: number
  failedRows: number
  deferredRows: number
}

/** A wave's state in the wave tables (CLI and page): passed, the rollout's state, gate or not open. */
export function waveState(r: Pick<RolloutRecord, 'wave' | 'state' | 'gates'>, i: number): string {
  if (i < r.wave || r.state === 'done' || (i === r.wave && r.state === 'waiting')) return 'passed'
  if (i === r.wave) return r.state
  return r.gates?.includes(i) === true ? 'gate' : 'not open'
}

/** The counts of the whole rollout, or of one of its waves (from 0): the CLI's and the page's wave tables. */
export function rolloutCounts(
  r: RolloutRecord,
  progress: ReadonlyMap<string, BoxProgress>,
  wave?: number,
): RolloutCounts {
  const counts: RolloutCounts = { boxes: 0, done: 0, moving: 0, skipped: 0, failedRows: 0, deferredRows: 0 }
  // A reverted rollout's intent stands for no box any more: none of its boxes moves toward it.
  const stands = r.state !== 'reverted'
  for (const b of wave === undefined ? r.waves.flat() : (r.waves[wave] ?? [])) {
    if (isSkipped(r, b)) {
      counts.skipped++
      continue
    }
    counts.boxes++
    const p = progress.get(b)
    if (p === undefined) continue
    if (isDone(r, b, p)) counts.done++
    else if (stands) counts.moving++
    counts.failedRows += p.failedRows
    counts.deferredRows += p.deferredRows ?? 0
  }
  return counts
}

/**
 * `rollout R (nested): wave 2/4, 12/40 boxes done, 3 moving; running`: the line of `rollout status`, and
 * of every command that changes the rollout (the state it left, counted as the next status counts it).
 */
export function progressLine(r: RolloutRecord, progress: ReadonlyMap<string, BoxProgress>): string {
  const c = rolloutCounts(r, progress)
  const open = r.state === 'done' ? r.waves.length : r.wave + 1
  const extra =
    (c.skipped > 0 ? `, ${c.skipped} skipped` : '') + (c.deferredRows > 0 ? `, ${c.deferredRows} deferred rows` : '')
  const why = r.reason === '' ? '' : `: ${r.reason}${r.cause === undefined ? '' : ` [${r.cause}]`}`
  return (
    `rollout ${r.id} (${r.mode}): wave ${open}/${r.waves.length}, ${c.done}/${c.boxes} boxes done, ` +
    `${c.moving} moving${extra}; ${r.state}${why}`
  )
}

/** What an operator asks of the rollout in play. */
export type OperatorAction =
  { kind: 'pause' | 'resume' | 'abort' | 'promote' } | { kind: 'retry' | 'skip'; box: string; started: boolean }

/** An operator's change refused: `conflict` (not in a state for it), `box` (the box is in none of its waves). */
export interface Refusal {
  refused: 'conflict' | 'box'
  why: string
}

/**
 * The record an operator's action leaves and its event, or why it is refused. A change is asked of the
 * record as read; the caller lands it by compare-and-swap and asks again when an agent changed it first.
 */
export function operatorChange(
  r: RolloutRecord,
  action: OperatorAction,
  o: { by: string; at: string; message?: string },
): { next: RolloutRecord; event: RolloutEvent } | Refusal {
  const refuse = (why: string): Refusal => ({ refused: 'conflict', why: `rollout ${r.id} is ${r.state}: ${why}` })
  if (isFinal(r)) return refuse(`it is over; nothing to ${action.kind}`)
  const who = `${o.by}${o.message === undefined ? '' : `: ${o.message}`}`
  const done = (next: RolloutRecord, extra: { kind: RolloutEventKind; box?: string }) => ({
    next,
    event: changeEvent(r, next, o.at, o.by, { ...extra, message: o.message }),
  })
  switch (action.kind) {
    case 'pause':
      if (r.state !== 'running') return refuse('only a running rollout pauses')
      return done({ ...r, state: 'paused', cause: 'operator_pause', reason: `paused by ${who}` }, { kind: 'paused' })
    case 'resume':
      if (r.state === 'waiting') return refuse('it waits at a manual gate: `promote` opens the next wave')
      if (r.state !== 'paused') return refuse('only a paused rollout resumes')
      // The deadline starts again: a pause is not progress the wave failed to make.
      return done({ ...running(r), state: 'running', waveOpenedAt: o.at }, { kind: 'resumed' })
    case 'abort':
      return done({ ...r, state: 'aborted', cause: 'operator_abort', reason: `aborted by ${who}` }, { kind: 'aborted' })
    case 'promote':
      if (r.wave + 1 >= r.waves.length)
        return refuse(`wave ${r.wave + 1} is the last: nothing to promote (the rollout is done once it passes)`)
      return done({ ...running(r), state: 'running', wave: r.wave + 1, waveOpenedAt: o.at }, { kind: 'promoted' })
    default:
      return boxChange(r, action, o, refuse, done)
  }
}

/** retry and skip: the box must be one of the rollout's, not skipped; a retried box must have started. */
function boxChange(
  r: RolloutRecord,
  action: { kind: 'retry' | 'skip'; box: string; started: boolean },
  o: { by: string; at: string; message?: string },
  refuse: (why: string) => Refusal,
  done: (
    next: RolloutRecord,
    extra: { kind: RolloutEventKind; box?: string },
  ) => {
    next: RolloutRecord
    event: RolloutEvent
  },
): { next: RolloutRecord; event: RolloutEvent } | Refusal {
  const { box } = action
  const place = placeOf(r, box)
  if (place === undefined)
    return { refused: 'box', why: `box ${box} is in no wave of rollout ${r.id} (${r.waves.flat().length} boxes)` }
  if (isSkipped(r, box)) return refuse(`box ${box} was skipped (${r.skipped?.[box]?.by ?? '?'}); it is left out`)
  if (action.kind === 'skip') {
    const skipped = { ...r.skipped, [box]: { by: o.by, at: o.at, message: o.message ?? '' } }
    return done({ ...r, skipped }, { kind: 'skipped', box })
  }
  if (!action.started)
    return refuse(`box ${box} of wave ${place.wave + 1} has not started: it starts when its wave and lane let it`)
  const retries = { ...r.retries, [box]: (r.retries?.[box] ?? 0) + 1 }
  return done({ ...r, retries }, { kind: 'retried', box })
}

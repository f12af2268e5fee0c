// The rules of a staged rollout (design §7.6): waves, lanes, verdicts, the
// events each change leaves, and the intent an open wave stands for. Pure:
// the etcd store keeps the record and advances it by compare-and-swap.
import { Type } from './typebox.js'
import type { Static } from 'typebox'
import type { IntentRecord } from './schemas.js'

export const ROLLOUT_STATES = ['running', 'waiting', 'paused', 'frozen', 'reverted', 'aborted', 'done'] as const
export type RolloutState = (typeof ROLLOUT_STATES)[number]

/** Code decides by this, never by `reason`'s sentence. */
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

export const DEFAULT_PROGRESS_DEADLINE_MS = 10 * 60_000

export const RolloutRecord = Type.Object(
  {
    /** Also the id of the intent its open waves stand for. */
    id: Type.String({ minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9._-]+$' }),
    mode: Type.Union([Type.Literal('nested'), Type.Literal('flat')]),
    force: Type.Boolean(),
    /** Fixed when recorded. */
    waves: Type.Array(Type.Array(Type.String(), { minItems: 1 }), { minItems: 1 }),
    maxParallel: Type.Integer({ minimum: 1 }),
    progressDeadlineMs: Type.Integer({ minimum: 1 }),
    onFailure: Type.Union([Type.Literal('pause'), Type.Literal('revert'), Type.Literal('freeze')]),
    /** A wave passes with at most this many rows not in the layout. */
    maxFailedRows: Type.Integer({ minimum: 0 }),
    state: State,
    wave: Type.Integer({ minimum: 0 }),
    waveOpenedAt: Type.String(),
    /** Empty while it runs. */
    reason: Type.String(),
    cause: Type.Optional(Cause),
    /** The waves that open only on `promote`. */
    gates: Type.Optional(Type.Array(Type.Integer({ minimum: 1 }))),
    retries: Type.Optional(Type.Record(Type.String(), Type.Integer({ minimum: 1 }))),
    /** Left out of verdicts and lanes (`skip`). */
    skipped: Type.Optional(
      Type.Record(
        Type.String(),
        Type.Object({ by: Type.String(), at: Type.String(), message: Type.String() }, { additionalProperties: false }),
      ),
    ),
    recordedAt: Type.String(),
    by: Type.String(),
    message: Type.String(),
    finalIntent: Type.Optional(Type.String()),
  },
  { additionalProperties: false },
)
export type RolloutRecord = Static<typeof RolloutRecord>

/** Cumulative; `gate`: the wave opens on promote. */
export type WaveSpec = { count: number; gate?: true } | { percent: number; gate?: true }

/** `1,10%,pause,50%,100%` as specs; throws naming the bad item. */
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

function reached(specs: readonly WaveSpec[], n: number): number[] {
  let before = 0
  return specs.map((s) => {
    const want = 'count' in s ? s.count : Math.ceil((s.percent * n) / 100)
    before = Math.max(before, Math.min(n, want))
    return before
  })
}

function fnv1a(s: string): number {
  let h = 0x811c9dc5
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i)
    h = Math.imul(h, 0x01000193) >>> 0
  }
  return h
}

/** Ordered by a hash of id and label, so wave 1 is not always the same box. */
export function assignWaves(rolloutId: string, boxes: readonly string[], specs: readonly WaveSpec[]): string[][] {
  return cutWaves(rolloutId, boxes, specs).waves
}

/** A gate before an empty wave moves to the next; none precedes the first. */
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

export function placeOf(r: Pick<RolloutRecord, 'waves'>, box: string): { wave: number; index: number } | undefined {
  for (let wave = 0; wave < r.waves.length; wave++) {
    const index = r.waves[wave]?.indexOf(box) ?? -1
    if (index >= 0) return { wave, index }
  }
  return undefined
}

/** Box i waits for box i - maxParallel, its lane's last; null: start at once. */
export function predecessorOf(r: Pick<RolloutRecord, 'waves' | 'maxParallel'>, box: string): string | null {
  const place = placeOf(r, box)
  if (place === undefined) return null
  const i = place.index - r.maxParallel
  return i < 0 ? null : (r.waves[place.wave]?.[i] ?? null)
}

export function laneOf(r: Pick<RolloutRecord, 'waves' | 'maxParallel'>, box: string): number | undefined {
  const place = placeOf(r, box)
  return place === undefined ? undefined : place.index % r.maxParallel
}

/** rev: '0' when the lane was never taken. */
export interface LaneHolder {
  lane: number
  box: string | null
  rev: string
}

/** A started box's progress; a box with no entry has not started. */
export interface BoxProgress {
  /** Its pass ended on the rollout's intent. */
  done: boolean
  /** Rows not in the layout, deferred ones aside. */
  failedRows: number
  /** Waiting out a wake grace: neither failing nor holding a wave. */
  deferredRows?: number
  /** Retries answered; fewer than asked is not done. */
  retried?: number
}

export type BoxReport = Required<Omit<BoxProgress, 'done'>>

export function isSkipped(r: Pick<RolloutRecord, 'skipped'>, box: string): boolean {
  return r.skipped !== undefined && Object.hasOwn(r.skipped, box)
}

export function retryPending(r: Pick<RolloutRecord, 'retries'>, box: string, p: BoxProgress | undefined): boolean {
  const asked = r.retries !== undefined && Object.hasOwn(r.retries, box) ? (r.retries[box] ?? 0) : 0
  return asked > (p?.retried ?? 0)
}

export function isDone(r: Pick<RolloutRecord, 'retries'>, box: string, p: BoxProgress | undefined): boolean {
  return p?.done === true && !retryPending(r, box, p)
}

/**
 * A lane moves past a box done, skipped, or gone before it started (it moves nothing). A started box that left
 * keeps its lane: a lapsed lease proves no stop, and it may be moving still or come back on the rollout's intent.
 */
function laneFree(
  r: RolloutRecord,
  box: string,
  progress: ReadonlyMap<string, BoxProgress>,
  live: ReadonlySet<string>,
): boolean {
  const p = progress.get(box)
  return p?.done === true || isSkipped(r, box) || (p === undefined && !live.has(box))
}

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
  return pred === null || laneFree(r, pred, progress, live)
}

export type WaveVerdict =
  | { kind: 'under-way'; pending: string[] }
  | { kind: 'passed'; failedRows: number }
  | { kind: 'failed'; why: string; cause: 'failed_rows' | 'box_gone' }

/** The open wave's verdict, skipped boxes aside; deferred rows are not failed ones. */
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

/** The open wave's deadline passed: the rollout pauses. */
export function deadlinePassed(r: RolloutRecord, nowMs: number): boolean {
  return r.state === 'running' && nowMs - Date.parse(r.waveOpenedAt) > r.progressDeadlineMs
}

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

export function running(r: RolloutRecord): RolloutRecord {
  const next = { ...r, reason: '' }
  delete next.cause
  return next
}

/** A failed wave per --on-failure: paused (resumable), frozen (ends where it is) or reverted. */
function failed(r: RolloutRecord, why: string, cause: RolloutCause): RolloutRecord {
  const state: RolloutState = r.onFailure === 'pause' ? 'paused' : r.onFailure === 'freeze' ? 'frozen' : 'reverted'
  return { ...r, state, reason: why, cause }
}

export function isFinal(r: Pick<RolloutRecord, 'state'>): boolean {
  return r.state === 'frozen' || r.state === 'reverted' || r.state === 'aborted' || r.state === 'done'
}

/** Box-addressed, with the rollout's id, so selectIntent weighs it like any record. */
export function rolloutIntent(r: RolloutRecord, box: string): IntentRecord {
  return { id: r.id, mode: r.mode, force: r.force, box, recordedAt: r.recordedAt, by: r.by }
}

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

export interface StoredRollout {
  record: RolloutRecord
  rev: string
}

/** pointerRev: '0' when never set. */
export interface ActiveRollout {
  pointerRev: string
  current: StoredRollout | undefined
}

/** etcd only. */
export interface RolloutPort {
  describe(): string
  readonly closed: AbortSignal
  list(signal: AbortSignal): Promise<StoredRollout[]>
  get(id: string, signal: AbortSignal): Promise<StoredRollout | undefined>
  active(signal: AbortSignal): Promise<ActiveRollout>
  /** event: in the same transaction. */
  create(r: RolloutRecord, seen: ActiveRollout, signal: AbortSignal, event?: RolloutEvent): Promise<boolean>
  /** intent and event: in the same transaction. */
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
  /** Only while the record is at s.rev and the lane at lane.rev: a lane's starts are serialised. */
  start(s: StoredRollout, box: string, wave: number, signal: AbortSignal, lane?: LaneHolder): Promise<boolean>
  laneHolder(id: string, wave: number, lane: number, signal: AbortSignal): Promise<LaneHolder>
  /** A plain put: only that box writes it. */
  putProgress(id: string, box: string, wave: number, report: BoxReport, signal: AbortSignal): Promise<void>
  hasStarted(id: string, box: string, wave: number, signal: AbortSignal): Promise<boolean>
  hasFinished(id: string, box: string, wave: number, signal: AbortSignal): Promise<boolean>
  isLive(box: string, signal: AbortSignal): Promise<boolean>
  progress(id: string, wave: number | undefined, signal: AbortSignal): Promise<Map<string, BoxProgress>>
  doneCount(id: string, wave: number, signal: AbortSignal): Promise<number>
  liveBoxes(signal: AbortSignal): Promise<Set<string>>
  /** Oldest first. */
  events(id: string, signal: AbortSignal): Promise<RolloutEvent[]>
  watch(onChange: () => void, signal: AbortSignal): void
}

/** Every change of a rollout's record leaves one event, in the change's transaction. */
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

/** Admits unnamed fields, so an older build still lists a newer event. */
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

export function eventLine(e: RolloutEvent): string {
  const where = `${e.wave === undefined ? '' : ` wave ${e.wave}`}${e.box === undefined ? '' : ` box ${e.box}`}`
  const why = e.reason === undefined ? '' : `: ${e.reason}${e.cause === undefined ? '' : ` [${e.cause}]`}`
  const message = e.message === undefined ? '' : ` — ${JSON.stringify(e.message)}`
  return `${e.at} ${e.kind}${where} by ${e.by}${why}${message}`
}

export function newestFirst(events: readonly RolloutEvent[]): RolloutEvent[] {
  return [...events].reverse()
}

/** What the fleet view judges each box against. */
export function fleetRecords(
  records: readonly IntentRecord[],
  r: RolloutRecord | undefined,
  progress: ReadonlyMap<string, BoxProgress>,
): IntentRecord[] {
  if (r === undefined || r.state === 'reverted') return [...records]
  const extra = [...progress.keys()].map((box) => rolloutIntent(r, box))
  return [...records, ...extra].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
}

export interface RolloutCounts {
  /** Skipped ones aside. */
  boxes: number
  done: number
  /** Started and not done (or a retry asked). */
  moving: number
  skipped: number
  failedRows: number
  deferredRows: number
}

export function waveState(r: Pick<RolloutRecord, 'wave' | 'state' | 'gates'>, i: number): string {
  if (i < r.wave || r.state === 'done' || (i === r.wave && r.state === 'waiting')) return 'passed'
  if (i === r.wave) return r.state
  return r.gates?.includes(i) === true ? 'gate' : 'not open'
}

export function rolloutCounts(
  r: RolloutRecord,
  progress: ReadonlyMap<string, BoxProgress>,
  wave?: number,
): RolloutCounts {
  const counts: RolloutCounts = { boxes: 0, done: 0, moving: 0, skipped: 0, failedRows: 0, deferredRows: 0 }
  // A reverted rollout's intent stands for no box: none moves toward it.
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

export type OperatorAction =
  { kind: 'pause' | 'resume' | 'abort' | 'promote' } | { kind: 'retry' | 'skip'; box: string; started: boolean }

/** `conflict`: not in a state for it; `box`: in none of its waves. */
export interface Refusal {
  refused: 'conflict' | 'box'
  why: string
}

/** The caller lands the change by compare-and-swap. */
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

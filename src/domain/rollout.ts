// The rules of a staged rollout (design §7.6): the waves an operator asks
// for (`1,10%,50%,100%`), which box is in which wave (fixed when the
// rollout is recorded, by a stable hash of the rollout's id and the label),
// when a box of the open wave may start (never more than maxParallel
// moving), whether a wave has passed, failed or is still under way, what a
// failure or a passed deadline does, and the intent an open wave stands for
// on a box that has started. Pure: the etcd store keeps the record and
// advances it by compare-and-swap.
import { Type } from './typebox.js'
import type { Static } from 'typebox'
import type { IntentRecord } from './schemas.js'

export const ROLLOUT_STATES = ['running', 'paused', 'frozen', 'reverted', 'aborted', 'done'] as const
export type RolloutState = (typeof ROLLOUT_STATES)[number]
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
    state: Type.Union([
      Type.Literal('running'),
      Type.Literal('paused'),
      Type.Literal('frozen'),
      Type.Literal('reverted'),
      Type.Literal('aborted'),
      Type.Literal('done'),
    ]),
    /** The index of the open wave (the last one opened). */
    wave: Type.Integer({ minimum: 0 }),
    waveOpenedAt: Type.String(),
    /** Why the rollout stopped (paused, frozen, reverted, aborted); empty while it runs. */
    reason: Type.String(),
    recordedAt: Type.String(),
    by: Type.String(),
    message: Type.String(),
    /** The intent recorded when the rollout ended by passing or by revert, if any. */
    finalIntent: Type.Optional(Type.String()),
  },
  { additionalProperties: false },
)
export type RolloutRecord = Static<typeof RolloutRecord>

/** One item of `--waves`: a count of boxes, or a percentage of the fleet; cumulative. */
export type WaveSpec = { count: number } | { percent: number }

/** `1,10%,50%,100%` as specs; throws naming the bad item. The last must be 100%: every box is in a wave. */
export function parseWaves(text: string): WaveSpec[] {
  const items = text.split(',').map((s) => s.trim())
  const specs = items.map((item): WaveSpec => {
    const m = /^([0-9]{1,6})(%?)$/.exec(item)
    const n = m === null ? NaN : Number(m[1])
    if (m === null || n === 0 || (m[2] === '%' && n > 100))
      throw new Error(`--waves item ${JSON.stringify(item)}: a count of boxes (like 1) or a percentage (1% to 100%)`)
    return m[2] === '%' ? { percent: n } : { count: n }
  })
  const last = specs.at(-1)
  if (last === undefined || !('percent' in last) || last.percent !== 100)
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
  const unique = [...new Set(boxes)]
  if (unique.length === 0) throw new Error('no live box to roll out to (no summary under the boxes prefix)')
  const order = unique
    .map((box) => ({ box, h: fnv1a(`${rolloutId}/${box}`) }))
    .sort((a, b) => a.h - b.h || (a.box < b.box ? -1 : a.box > b.box ? 1 : 0))
    .map((x) => x.box)
  const waves: string[][] = []
  let from = 0
  for (const to of reached(specs, order.length)) {
    if (to > from) waves.push(order.slice(from, to))
    from = to
  }
  return waves
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

/** Where a started box of the rollout is; a box with no entry has not started. */
export interface BoxProgress {
  /** Its pass ended on the rollout's intent: leg idle, the summary naming the rollout's id. */
  done: boolean
  /** Rows not in the rollout's layout when it was done (held, fenced, refused, failed, foreign). */
  failedRows: number
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
  const pred = predecessorOf(r, box)
  // A lane moves on past a box that has left the fleet: it moves nothing.
  return pred === null || progress.get(pred)?.done === true || !live.has(pred)
}

export type WaveVerdict =
  { kind: 'under-way'; pending: string[] } | { kind: 'passed'; failedRows: number } | { kind: 'failed'; why: string }

/**
 * The open wave's verdict: passed when every box of it is done with at most
 * maxFailedRows rows not in the layout; failed when more, or when a box of
 * it left the fleet (no live summary) before it was done; else under way.
 */
export function waveVerdict(
  r: RolloutRecord,
  progress: ReadonlyMap<string, BoxProgress>,
  live: ReadonlySet<string>,
): WaveVerdict {
  const boxes = r.waves[r.wave] ?? []
  const gone = boxes.filter((b) => progress.get(b)?.done !== true && !live.has(b))
  if (gone.length > 0)
    return { kind: 'failed', why: `box ${gone.join(', ')} of wave ${r.wave + 1} left the fleet before it was done` }
  const pending = boxes.filter((b) => progress.get(b)?.done !== true)
  const failedRows = boxes.reduce((n, b) => n + (progress.get(b)?.failedRows ?? 0), 0)
  if (failedRows > r.maxFailedRows) {
    const worst = boxes.filter((b) => (progress.get(b)?.failedRows ?? 0) > 0)
    return {
      kind: 'failed',
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
  if (verdict.kind === 'passed')
    return r.wave + 1 < r.waves.length
      ? { ...r, wave: r.wave + 1, waveOpenedAt: at }
      : { ...r, state: 'done', reason: '' }
  if (verdict.kind === 'failed') return failed(r, verdict.why)
  if (nowMs - Date.parse(r.waveOpenedAt) > deadlineMs)
    return {
      ...r,
      state: 'paused',
      reason:
        `progress deadline: wave ${r.wave + 1} did not pass within ${Math.round(deadlineMs / 1000)}s ` +
        `(waiting on ${verdict.pending.slice(0, 10).join(', ')}${verdict.pending.length > 10 ? ', …' : ''})`,
    }
  return null
}

/** A failed wave, as --on-failure says: paused (resumable), frozen (ends where it is), or reverted. */
function failed(r: RolloutRecord, why: string): RolloutRecord {
  const state: RolloutState = r.onFailure === 'pause' ? 'paused' : r.onFailure === 'freeze' ? 'frozen' : 'reverted'
  return { ...r, state, reason: why }
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
  create(r: RolloutRecord, seen: ActiveRollout, signal: AbortSignal): Promise<boolean>
  update(s: StoredRollout, next: RolloutRecord, signal: AbortSignal, intent?: IntentRecord): Promise<boolean>
  recordIntentAborting(intent: IntentRecord, running: StoredRollout | undefined, signal: AbortSignal): Promise<boolean>
  start(s: StoredRollout, box: string, wave: number, signal: AbortSignal): Promise<boolean>
  finish(id: string, box: string, wave: number, failedRows: number, signal: AbortSignal): Promise<void>
  hasStarted(id: string, box: string, wave: number, signal: AbortSignal): Promise<boolean>
  hasFinished(id: string, box: string, wave: number, signal: AbortSignal): Promise<boolean>
  isLive(box: string, signal: AbortSignal): Promise<boolean>
  progress(id: string, wave: number | undefined, signal: AbortSignal): Promise<Map<string, BoxProgress>>
  doneCount(id: string, wave: number, signal: AbortSignal): Promise<number>
  liveBoxes(signal: AbortSignal): Promise<Set<string>>
  watch(onChange: () => void, signal: AbortSignal): void
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

/** `2/4 waves, 12/40 boxes done; running`: the line of `rollout status`. */
export function progressLine(r: RolloutRecord, progress: ReadonlyMap<string, BoxProgress>): string {
  const all = r.waves.flat()
  const done = all.filter((b) => progress.get(b)?.done === true).length
  const moving = all.filter((b) => progress.get(b)?.done === false).length
  const open = isFinal(r) && r.state === 'done' ? r.waves.length : r.wave + 1
  return (
    `rollout ${r.id} (${r.mode}): wave ${open}/${r.waves.length}, ${done}/${all.length} boxes done, ` +
    `${moving} moving; ${r.state}${r.reason === '' ? '' : `: ${r.reason}`}`
  )
}

// This box's part in the staged rollouts (design §7.6): it starts the box in its wave and lane, writes its
// progress, and advances the rollout. Every agent does this for its own box: no operator's process need run.
import type { BoxSummary } from '../domain/box-summary.js'
import type { Clock, Logger } from '../domain/ports.js'
import {
  advance,
  changeEvent,
  deadlinePassed,
  isFinal,
  isSkipped,
  laneOf,
  placeOf,
  predecessorOf,
  waveVerdict,
  type BoxReport,
  type RolloutPort,
  type RolloutRecord,
  type StoredRollout,
} from '../domain/rollout.js'
import type { IntentRecord } from '../domain/schemas.js'
import { errorMessage } from '../errors.js'

export const ROLLOUT_TICK_MS = 1_000
/** The backstop: the records' watch says when one changed. */
export const ROLLOUT_IDLE_MS = 30_000
export const ROLLOUT_EVALUATE_MS = 5_000
/** A wave's first boxes guard it, watching for boxes that left early. */
const WARDENS = 2

export interface RolloutFollowerOptions {
  port: RolloutPort
  box: string
  clock: Clock
  logger: Logger
  signal: AbortSignal
  tickMs?: number
  evaluateMs?: number
  onState?: (r: RolloutRecord | undefined) => void
  requestTimeoutMs?: number
  /**
   * For an operator's `retry`; absent, the intent is read again instead. It may resolve with the end
   * (`finishedAt`) of the first run that started after it, or null when it cannot say.
   */
  kickLeg?: () => void | Promise<string | null>
}

interface Kept {
  written: string | undefined
  answered: number
  /** How many retries were asked, the summary's last run at the kick, and the end of the run it made. */
  kicked?: Kicked
}

interface Kicked {
  asked: number
  lastRunAt: string | null
  ranAt?: string
}

export class RolloutFollower {
  readonly #o: RolloutFollowerOptions
  #rollouts: StoredRollout[] = []
  readonly #started = new Set<string>()
  readonly #never = new Set<string>()
  readonly #finished = new Map<string, Kept>()
  readonly #listeners = new Set<() => void>()
  #summary: BoxSummary | undefined
  #stepping = false
  /** Failures are logged once per spell: a look comes every tick. */
  #failing = false
  #again = false
  #lastEvaluate = 0
  #timer: (() => void) | undefined
  /** The watch said the records changed, or a read failed. */
  #dirty = true
  #readAt = 0
  /** This box has a part in a running rollout: looks come every tick. */
  #busy = false

  constructor(opts: RolloutFollowerOptions) {
    this.#o = opts
  }

  start(): void {
    const { port, signal } = this.#o
    if (signal.aborted) return
    port.watch(() => {
      this.#dirty = true
      this.kick()
      // The intent is read again; that read decides.
      for (const l of this.#listeners) l()
    }, signal)
    this.#schedule()
    signal.addEventListener('abort', () => this.#timer?.(), { once: true })
  }

  #schedule(): void {
    if (this.#o.signal.aborted) return
    const ms = this.#busy ? (this.#o.tickMs ?? ROLLOUT_TICK_MS) : ROLLOUT_IDLE_MS
    this.#timer = this.#o.clock.setTimer(ms, () => {
      this.kick()
      this.#schedule()
    })
  }

  onIntentChange(listener: () => void, signal: AbortSignal): void {
    this.#listeners.add(listener)
    signal.addEventListener('abort', () => this.#listeners.delete(listener), { once: true })
  }

  noteSummary(summary: BoxSummary): void {
    this.#summary = summary
    this.kick()
  }

  /** Throws when etcd cannot say: the intent is never read without the rollout. */
  async read(signal: AbortSignal): Promise<{ rollouts: RolloutRecord[]; started: ReadonlySet<string> }> {
    const { port, box, clock } = this.#o
    // The last read stands while the watch is silent, for the idle wait at most.
    if (!this.#dirty && clock.now() - this.#readAt < ROLLOUT_IDLE_MS)
      return { rollouts: this.#rollouts.map((s) => s.record), started: this.#started }
    const all = await port.list(signal)
    for (const s of all) {
      const { id } = s.record
      if (this.#started.has(id) || this.#never.has(id)) continue
      const place = placeOf(s.record, box)
      if (place === undefined) {
        this.#never.add(id)
        continue
      }
      if (await port.hasStarted(id, box, place.wave, signal)) this.#started.add(id)
      else if (isFinal(s.record)) this.#never.add(id)
    }
    this.#rollouts = all
    this.#dirty = false
    this.#readAt = this.#o.clock.now()
    return { rollouts: all.map((s) => s.record), started: this.#started }
  }

  /** One look at a time; a kick during one makes another after it. */
  kick(): void {
    if (this.#o.signal.aborted) return
    if (this.#stepping) {
      this.#again = true
      return
    }
    this.#stepping = true
    void this.#step()
      .then(() => {
        if (this.#failing) this.#o.logger.info({ box: this.#o.box }, 'rollout: the rollouts can be read again')
        this.#failing = false
      })
      .catch((err: unknown) => {
        if (this.#o.signal.aborted || this.#failing) return
        this.#failing = true
        this.#o.logger.warn({ err, box: this.#o.box }, `rollout: could not look at the rollouts: ${errorMessage(err)}`)
      })
      .finally(() => {
        this.#stepping = false
        if (this.#again) {
          this.#again = false
          this.kick()
        }
      })
  }

  #signal(): AbortSignal {
    return AbortSignal.any([this.#o.signal, AbortSignal.timeout(this.#o.requestTimeoutMs ?? 10_000)])
  }

  async #step(): Promise<void> {
    await this.read(this.#signal())
    const running = this.#rollouts.filter((s) => s.record.state === 'running')
    const inPlay = this.#rollouts.at(-1)
    this.#o.onState?.(inPlay?.record)
    const busy = running.some((s) => this.#hasPart(s.record))
    if (busy !== this.#busy) {
      this.#busy = busy
      this.#timer?.()
      this.#schedule()
    }
    // Progress in the rollout in play is kept current: a wave is judged on what the box says now.
    if (inPlay !== undefined && inPlay.record.state !== 'reverted' && this.#started.has(inPlay.record.id)) {
      const place = placeOf(inPlay.record, this.#o.box)
      if (place !== undefined) await this.#keepProgress(inPlay, place.wave)
    }
    for (const s of running) {
      const place = placeOf(s.record, this.#o.box)
      if (place === undefined || place.wave > s.record.wave) {
        if (place !== undefined && this.#evaluateDue(s, place)) await this.#evaluate(s)
        else if (place === undefined && deadlinePassed(s.record, this.#o.clock.now())) await this.#evaluate(s)
        continue
      }
      if (!this.#started.has(s.record.id) && !isSkipped(s.record, this.#o.box)) await this.#maybeStart(s, place.wave)
      if (this.#evaluateDue(s, place)) await this.#evaluate(s)
    }
  }

  #hasPart(r: RolloutRecord): boolean {
    const place = placeOf(r, this.#o.box)
    return place !== undefined && place.wave === r.wave
  }

  /** Starts once the box before it in the wave is done, skipped or gone unstarted, and its lane's holder done. */
  async #maybeStart(s: StoredRollout, wave: number): Promise<void> {
    const { port, box, logger } = this.#o
    const pred = predecessorOf(s.record, box)
    if (pred !== null && !isSkipped(s.record, pred)) {
      const signal = this.#signal()
      const free = (await port.hasFinished(s.record.id, pred, wave, signal)) || !(await port.isLive(pred, signal))
      if (!free) return
    }
    // The start compares on the lane's last holder, which must be done or skipped: no lane is shared. Its
    // leaving frees nothing, since it started: a lapsed lease proves no stop (design §7.6).
    const lane = await port.laneHolder(s.record.id, wave, laneOf(s.record, box) ?? 0, this.#signal())
    if (lane.box !== null && lane.box !== box && !isSkipped(s.record, lane.box)) {
      if (!(await port.hasFinished(s.record.id, lane.box, wave, this.#signal()))) return
    }
    if (!(await port.start(s, box, wave, this.#signal(), lane))) return
    this.#started.add(s.record.id)
    logger.info(
      { box, rollout: s.record.id, wave: wave + 1, mode: s.record.mode },
      `rollout: box ${box} starts in wave ${wave + 1} of rollout ${s.record.id} (toward ${s.record.mode})`,
    )
    for (const l of this.#listeners) l()
  }

  /** Once the pass on the rollout's intent ended, and whenever it changes; true when it wrote. */
  async #keepProgress(s: StoredRollout, wave: number): Promise<boolean> {
    const sum = this.#summary
    const r = s.record
    if (sum === undefined || !passEnded(sum, r.id)) return false
    const kept = this.#finished.get(r.id) ?? { written: undefined, answered: 0 }
    this.#finished.set(r.id, kept)
    if (!this.#retryAnswered(r, kept, sum.leg.lastRunAt)) return false
    const rows = Object.values(sum.counts).reduce((a, b) => a + b, 0)
    const deferredRows = sum.leg.withheld?.deferred ?? 0
    // Rows waiting out their tenant's wake grace are not failed (design §7.6).
    const failedRows = Math.max(0, rows - (sum.counts[r.mode] ?? 0) - deferredRows)
    const report: BoxReport = { failedRows, deferredRows, retried: kept.answered }
    const said = JSON.stringify(report)
    if (said === kept.written) return false
    await this.#o.port.putProgress(r.id, this.#o.box, wave, report, this.#signal())
    const first = kept.written === undefined
    kept.written = said
    this.#lastEvaluate = 0
    this.#o.logger[first ? 'info' : 'debug'](
      { box: this.#o.box, rollout: r.id, wave: wave + 1, failedRows, deferredRows },
      `rollout: box ${this.#o.box} ${first ? 'is done' : 'updates its progress'} in wave ${wave + 1} of rollout ` +
        `${r.id} (${failedRows} rows not ${r.mode}, ${deferredRows} deferred)`,
    )
    return true
  }

  /** Every retry asked was answered by a run that ended after it; an unrun one runs now. */
  #retryAnswered(r: RolloutRecord, kept: Kept, lastRunAt: string | null): boolean {
    const asked = r.retries?.[this.#o.box] ?? 0
    if (asked <= kept.answered || isFinal(r)) return true
    if (kept.kicked?.asked !== asked) {
      kept.kicked = { asked, lastRunAt }
      this.#retry(r, asked, kept.kicked)
      if (this.#o.kickLeg !== undefined) return false
    }
    // Its run has not ended: the summary names the run before the retry. Two runs may end in the same
    // millisecond, the second moving nothing and its summary not new: the leg's word on its run settles it.
    const before = lastRunAt === kept.kicked?.lastRunAt && lastRunAt !== kept.kicked?.ranAt
    if (this.#o.kickLeg !== undefined && before) return false
    kept.answered = asked
    kept.kicked = undefined
    return true
  }

  #retry(r: RolloutRecord, asked: number, kicked: Kicked): void {
    this.#o.logger.info(
      { box: this.#o.box, rollout: r.id, retry: asked },
      `rollout: box ${this.#o.box} runs again on rollout ${r.id} (retry ${asked})`,
    )
    if (this.#o.kickLeg === undefined) {
      for (const l of this.#listeners) l()
      return
    }
    const ran = this.#o.kickLeg()
    if (ran === undefined) return
    void ran.then(
      (at) => {
        if (at === null) return
        kicked.ranAt = at
        this.kick()
      },
      // Unsaid, the summary's next run answers it.
      () => undefined,
    )
  }

  /**
   * Every few seconds for a box done in the wave and for this and the next wave's guards (an all-skipped wave
   * has no one else to ask); always past the deadline.
   */
  #evaluateDue(s: StoredRollout, place: { wave: number; index: number }): boolean {
    const now = this.#o.clock.now()
    if (deadlinePassed(s.record, now)) return true
    const r = s.record
    const done = this.#finished.get(r.id)?.written !== undefined
    const mine =
      (place.wave === r.wave && (done || place.index < WARDENS)) || (place.wave === r.wave + 1 && place.index < WARDENS)
    if (!mine || now - this.#lastEvaluate < (this.#o.evaluateMs ?? ROLLOUT_EVALUATE_MS)) return false
    this.#lastEvaluate = now
    return true
  }

  /**
   * A wave is judged on what its boxes say now: this box's pass that ended while the judge's reads were out is
   * written first, and the next look judges on it (design §7.6).
   */
  async #ownProgressMoved(s: StoredRollout): Promise<boolean> {
    const r = s.record
    if (placeOf(r, this.#o.box)?.wave !== r.wave || !this.#started.has(r.id)) return false
    if (!(await this.#keepProgress(s, r.wave))) return false
    this.kick()
    return true
  }

  /** By compare-and-swap, so one agent's change lands. */
  async #evaluate(s: StoredRollout): Promise<void> {
    const { port, clock, logger, box } = this.#o
    const r = s.record
    const now = clock.now()
    const size = (r.waves[r.wave] ?? []).filter((b) => !isSkipped(r, b)).length
    const signal = this.#signal()
    const guard = (placeOf(r, box)?.index ?? WARDENS) < WARDENS
    if (!deadlinePassed(r, now) && !guard && (await port.doneCount(r.id, r.wave, signal)) < size) return
    const [progress, live] = await Promise.all([port.progress(r.id, r.wave, signal), port.liveBoxes(signal)])
    if (await this.#ownProgressMoved(s)) return
    const next = advance(r, waveVerdict(r, progress, live), now)
    if (next === null) return
    const intent = next.state === 'done' ? finalIntent(next) : undefined
    const event = changeEvent(r, next, new Date(now).toISOString(), `agent ${box}`)
    const written = next.state === 'done' ? { ...next, finalIntent: intent?.id } : next
    if (!(await port.update(s, written, signal, intent, event))) return
    const line =
      next.state === 'running'
        ? `rollout: wave ${next.wave + 1} of rollout ${r.id} opens (wave ${r.wave + 1} passed)`
        : `rollout: rollout ${r.id} is ${next.state}${next.reason === '' ? '' : `: ${next.reason}`}`
    const fields = { rollout: r.id, wave: next.wave + 1, state: next.state, by: box, cause: next.cause }
    if (next.state === 'running' || next.state === 'done' || next.state === 'waiting') logger.info(fields, line)
    else logger.warn({ ...fields, reason: next.reason }, line)
    this.kick()
  }
}

/** Taking an `unreadable` run for an end would fail every row and free the lane early. */
function passEnded(sum: BoxSummary, id: string): boolean {
  return sum.intent === id && !sum.leg.running && !sum.leg.pending && sum.mode !== 'unreadable'
}

/** The fleet-wide intent a passed rollout leaves, just after its id so a later record wins. */
export function finalIntent(r: RolloutRecord): IntentRecord {
  const message = r.message === '' ? {} : { message: r.message }
  return { id: `${r.id}.done`, mode: r.mode, force: r.force, recordedAt: r.recordedAt, by: r.by, ...message }
}

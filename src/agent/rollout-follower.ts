// This box's part in the staged rollouts (design §7.6): it reads the
// rollout records (on their watch and every tick), starts the box when its
// wave is open and its lane is free (a compare-and-swap on the record's
// revision, so a pause or another wave that lands first wins), writes the
// box's end once its summary says its pass ended on the rollout's intent,
// and then advances the rollout itself when the wave passed, failed or
// outlived its deadline. No operator's process has to run: every agent
// does this for its own box, and any of them may open the next wave.
import type { BoxSummary } from '../domain/box-summary.js'
import type { Clock, Logger } from '../domain/ports.js'
import {
  advance,
  deadlinePassed,
  isFinal,
  placeOf,
  predecessorOf,
  waveVerdict,
  type RolloutPort,
  type RolloutRecord,
  type StoredRollout,
} from '../domain/rollout.js'
import type { IntentRecord } from '../domain/schemas.js'
import { errorMessage } from '../errors.js'

/** Between two looks while this box has a part in a running rollout (waits on its lane, or judges its wave). */
export const ROLLOUT_TICK_MS = 1_000
/** Between two looks otherwise: the records' watch says when one changed, so this is only the backstop. */
export const ROLLOUT_IDLE_MS = 30_000
/** How often a box that is done, or guards its wave, asks whether the wave is over. */
export const ROLLOUT_EVALUATE_MS = 5_000
/** The first boxes of a wave guard it: they look for boxes that left it even before they are done. */
const WARDENS = 2

export interface RolloutFollowerOptions {
  port: RolloutPort
  box: string
  clock: Clock
  logger: Logger
  signal: AbortSignal
  tickMs?: number
  evaluateMs?: number
  /** Told of the rollout in play after each look (the metrics' gauge). */
  onState?: (r: RolloutRecord | undefined) => void
  /** A bound on each call to etcd. */
  requestTimeoutMs?: number
}

export class RolloutFollower {
  readonly #o: RolloutFollowerOptions
  #rollouts: StoredRollout[] = []
  /** Rollouts this box has started in (permanent), and those it can no longer start in (final, not started). */
  readonly #started = new Set<string>()
  readonly #never = new Set<string>()
  readonly #finished = new Set<string>()
  readonly #listeners = new Set<() => void>()
  #summary: BoxSummary | undefined
  #stepping = false
  /** The last look failed: the next failure is not logged again. */
  #failing = false
  #again = false
  #lastEvaluate = 0
  #timer: (() => void) | undefined
  /** The records must be read again: the watch said so, or a read failed. */
  #dirty = true
  #readAt = 0
  /** This box has a part in a running rollout: the next look comes after a tick, not the idle wait. */
  #busy = false

  constructor(opts: RolloutFollowerOptions) {
    this.#o = opts
  }

  /** Watches the records and ticks until the signal aborts. */
  start(): void {
    const { port, signal } = this.#o
    if (signal.aborted) return
    port.watch(() => {
      this.#dirty = true
      this.kick()
      // A record changed (a wave opened, a revert): the intent is read again; the read decides.
      for (const l of this.#listeners) l()
    }, signal)
    this.#schedule()
    signal.addEventListener('abort', () => this.#timer?.(), { once: true })
  }

  /** The next look: a tick while this box has a part in a running rollout, else the idle backstop. */
  #schedule(): void {
    if (this.#o.signal.aborted) return
    const ms = this.#busy ? (this.#o.tickMs ?? ROLLOUT_TICK_MS) : ROLLOUT_IDLE_MS
    this.#timer = this.#o.clock.setTimer(ms, () => {
      this.kick()
      this.#schedule()
    })
  }

  /** Told when a rollout starts this box, so that the intent is read again at once. */
  onIntentChange(listener: () => void, signal: AbortSignal): void {
    this.#listeners.add(listener)
    signal.addEventListener('abort', () => this.#listeners.delete(listener), { once: true })
  }

  /** The summary this box published last: whether its pass on a rollout's intent has ended. */
  noteSummary(summary: BoxSummary): void {
    this.#summary = summary
    this.kick()
  }

  /**
   * Reads the records and which of them this box has started in: what the
   * intent read merges (withRolloutIntents). Throws when etcd cannot say:
   * the intent is then unreadable, never read without the rollout.
   */
  async read(signal: AbortSignal): Promise<{ rollouts: RolloutRecord[]; started: ReadonlySet<string> }> {
    const { port, box, clock } = this.#o
    // What the last read found stands while the records' watch has said nothing since, for the idle wait at most.
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
        // Logged once per spell of failures: a look comes every second while the box has a part.
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
    this.#o.onState?.(this.#rollouts.at(-1)?.record)
    const busy = running.some((s) => this.#hasPart(s.record))
    if (busy !== this.#busy) {
      this.#busy = busy
      this.#timer?.()
      this.#schedule()
    }
    for (const s of running) {
      const place = placeOf(s.record, this.#o.box)
      if (place === undefined || place.wave > s.record.wave) {
        if (deadlinePassed(s.record, this.#o.clock.now())) await this.#evaluate(s)
        continue
      }
      const { id } = s.record
      if (!this.#started.has(id)) await this.#maybeStart(s, place.wave)
      else if (!this.#finished.has(id)) await this.#maybeFinish(s, place.wave)
      if (this.#evaluateDue(s, place)) await this.#evaluate(s)
    }
  }

  /** This box waits on its lane, moves, or judges the open wave (it is done in it, or guards it). */
  #hasPart(r: RolloutRecord): boolean {
    const place = placeOf(r, this.#o.box)
    return place !== undefined && place.wave === r.wave
  }

  /** The box's lane is free (the box N before it in the wave is done, or has left): start, once. */
  async #maybeStart(s: StoredRollout, wave: number): Promise<void> {
    const { port, box, logger } = this.#o
    const pred = predecessorOf(s.record, box)
    if (pred !== null) {
      const signal = this.#signal()
      const free = (await port.hasFinished(s.record.id, pred, wave, signal)) || !(await port.isLive(pred, signal))
      if (!free) return
    }
    if (!(await port.start(s, box, wave, this.#signal()))) return
    this.#started.add(s.record.id)
    logger.info(
      { box, rollout: s.record.id, wave: wave + 1, mode: s.record.mode },
      `rollout: box ${box} starts in wave ${wave + 1} of rollout ${s.record.id} (toward ${s.record.mode})`,
    )
    for (const l of this.#listeners) l()
  }

  /** The summary says the pass on the rollout's intent ended: write the box's end and its failed rows. */
  async #maybeFinish(s: StoredRollout, wave: number): Promise<void> {
    const sum = this.#summary
    const r = s.record
    if (sum === undefined || sum.intent !== r.id || sum.leg.running || sum.leg.pending) return
    const rows = Object.values(sum.counts).reduce((a, b) => a + b, 0)
    const failedRows = rows - (sum.counts[r.mode] ?? 0)
    await this.#o.port.finish(r.id, this.#o.box, wave, failedRows, this.#signal())
    this.#finished.add(r.id)
    this.#lastEvaluate = 0
    this.#o.logger.info(
      { box: this.#o.box, rollout: r.id, wave: wave + 1, failedRows },
      `rollout: box ${this.#o.box} is done in wave ${wave + 1} of rollout ${r.id} (${failedRows} rows not ${r.mode})`,
    )
  }

  /** A box that is done, or guards the open wave, asks every few seconds; any box once the deadline passed. */
  #evaluateDue(s: StoredRollout, place: { wave: number; index: number }): boolean {
    const now = this.#o.clock.now()
    if (deadlinePassed(s.record, now)) return true
    const mine = place.wave === s.record.wave && (this.#finished.has(s.record.id) || place.index < WARDENS)
    if (!mine || now - this.#lastEvaluate < (this.#o.evaluateMs ?? ROLLOUT_EVALUATE_MS)) return false
    this.#lastEvaluate = now
    return true
  }

  /** The open wave's verdict, and the change it makes, by compare-and-swap: one agent's change lands. */
  async #evaluate(s: StoredRollout): Promise<void> {
    const { port, clock, logger, box } = this.#o
    const r = s.record
    const now = clock.now()
    const size = r.waves[r.wave]?.length ?? 0
    const signal = this.#signal()
    const guard = (placeOf(r, box)?.index ?? WARDENS) < WARDENS
    if (!deadlinePassed(r, now) && !guard && (await port.doneCount(r.id, r.wave, signal)) < size) return
    const [progress, live] = await Promise.all([port.progress(r.id, r.wave, signal), port.liveBoxes(signal)])
    const next = advance(r, waveVerdict(r, progress, live), now)
    if (next === null) return
    const intent = next.state === 'done' ? finalIntent(next) : undefined
    if (!(await port.update(s, next.state === 'done' ? { ...next, finalIntent: intent?.id } : next, signal, intent)))
      return
    const line =
      next.state === 'running'
        ? `rollout: wave ${next.wave + 1} of rollout ${r.id} opens (wave ${r.wave + 1} passed)`
        : `rollout: rollout ${r.id} is ${next.state}${next.reason === '' ? '' : `: ${next.reason}`}`
    const fields = { rollout: r.id, wave: next.wave + 1, state: next.state, by: box }
    if (next.state === 'running' || next.state === 'done') logger.info(fields, line)
    else logger.warn({ ...fields, reason: next.reason }, line)
    this.kick()
  }
}

/** The fleet-wide intent a passed rollout leaves: its layout, just after its own id (a later record still wins). */
export function finalIntent(r: RolloutRecord): IntentRecord {
  return { id: `${r.id}.done`, mode: r.mode, force: r.force, recordedAt: r.recordedAt, by: r.by }
}

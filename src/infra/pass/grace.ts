// The awake grace (design §3 step 2), `<data>/layout/grace.json`: when each
// awake host was first deferred, and toward which mode. Persisted, so a
// restart grants no fresh hour; within one life it runs on the monotonic
// clock, which a stepped wall clock cannot change.
import path from 'node:path'
import { Type, Value } from '../../domain/typebox.js'
import type { Static } from 'typebox'
import type { Mode } from '../../domain/modes.js'
import type { Dirs } from '../../domain/paths.js'
import type { Clock, Logger } from '../../domain/ports.js'
import { errorMessage } from '../../errors.js'
import { atomicWrite, isNotFound, readNoFollow } from '../fsutil.js'
import { ensureLayoutDir, layoutDir } from './journal.js'

const GraceFile = Type.Object(
  {
    v: Type.Literal(1),
    hosts: Type.Record(
      Type.String(),
      Type.Object(
        {
          mode: Type.Union([Type.Literal('flat'), Type.Literal('nested')], {
            description: 'The mode the host was deferred toward.',
          }),
          since: Type.Integer({ description: 'When it was first deferred (ms since the epoch).' }),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
)
type GraceFile = Static<typeof GraceFile>

export const GRACE_FILE = 'grace.json'

/** A read-back stamp may lie this far in the future and be taken as is. */
export const STAMP_TOLERANCE_MS = 60_000

interface Entry {
  mode: Mode
  /** Wall clock: first deferred (persisted, shown). */
  since: number
  /** Monotonic: when its grace started in this life; set at its first ask. */
  start?: number
}

export class GraceBook {
  readonly #dirs: Dirs
  readonly #hosts: Map<string, Entry>
  readonly #clock: Pick<Clock, 'now' | 'monotonic'>
  #dirty = false

  private constructor(dirs: Dirs, hosts: GraceFile['hosts'], clock: Pick<Clock, 'now' | 'monotonic'>) {
    this.#dirs = dirs
    this.#hosts = new Map(Object.entries(hosts))
    this.#clock = clock
  }

  /** Past the tolerance, a future stamp is clamped to now: a grace restarts, never ends. */
  #clampFuture(file: string, logger: Logger): void {
    const now = this.#clock.now()
    for (const [host, entry] of this.#hosts) {
      if (entry.since <= now + STAMP_TOLERANCE_MS) continue
      logger.warn(
        { file, host, since: new Date(entry.since).toISOString(), now: new Date(now).toISOString() },
        `layout: ${host}'s awake grace started ${Math.round((entry.since - now) / 60_000)}m in the future ` +
          `(the clock stepped back?); it is taken to start now`,
      )
      entry.since = now
      this.#dirty = true
    }
  }

  /** Reads the book; one that cannot be read starts empty, which only ever lengthens a grace. */
  static async load(dirs: Dirs, logger: Logger, clock: Pick<Clock, 'now' | 'monotonic'>): Promise<GraceBook> {
    const file = path.join(layoutDir(dirs), GRACE_FILE)
    let raw: unknown
    try {
      raw = JSON.parse(await readNoFollow(file))
    } catch (err) {
      if (!isNotFound(err)) {
        const msg = errorMessage(err)
        logger.warn(
          { file, err: msg },
          `layout: ${file} cannot be read (${msg}); every awake host's grace starts again`,
        )
      }
      return new GraceBook(dirs, {}, clock)
    }
    if (!Value.Check(GraceFile, raw)) {
      logger.warn({ file }, `layout: ${file} is not a grace book; every awake host's grace starts again`)
      return new GraceBook(dirs, {}, clock)
    }
    const book = new GraceBook(dirs, raw.hosts, clock)
    book.#clampFuture(file, logger)
    return book
  }

  /** The grace host has left toward mode, started now when it has none; time gone is monotonic within a life. */
  left(host: string, mode: Mode, nowMs: number, graceMs: number): number {
    const mono = this.#clock.monotonic?.() ?? nowMs
    let entry = this.#hosts.get(host)
    if (entry === undefined || entry.mode !== mode) {
      entry = { mode, since: nowMs, start: mono }
      this.#hosts.set(host, entry)
      this.#dirty = true
    }
    entry.start ??= mono - Math.max(0, nowMs - entry.since)
    return graceMs - Math.max(0, mono - entry.start)
  }

  end(host: string): void {
    if (this.#hosts.delete(host)) this.#dirty = true
  }

  /** Ends entries toward another mode (the intent changed) or for hosts not in hosts. */
  retain(mode: Mode, hosts: ReadonlySet<string>): void {
    for (const [host, entry] of this.#hosts) if (entry.mode !== mode || !hosts.has(host)) this.end(host)
  }

  since(host: string, mode: Mode): number | undefined {
    const entry = this.#hosts.get(host)
    return entry?.mode === mode ? entry.since : undefined
  }

  async save(): Promise<void> {
    if (!this.#dirty) return
    const dir = await ensureLayoutDir(this.#dirs)
    const hosts = [...this.#hosts]
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([host, { mode, since }]) => [host, { mode, since }] as const)
    const body: GraceFile = { v: 1, hosts: Object.fromEntries(hosts) }
    await atomicWrite(path.join(dir, GRACE_FILE), `${JSON.stringify(body)}\n`)
    this.#dirty = false
  }
}

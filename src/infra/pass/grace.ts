// The awake grace (design §3 step 2), `<data>/layout/grace.json`: when each
// awake host was first deferred, and toward which mode. Persisted so a
// restart does not hand every awake tenant a fresh hour. An entry ends when
// its host reaches that mode or the intent's mode changes.
import path from 'node:path'
import { Type, Value } from '../../domain/typebox.js'
import type { Static } from 'typebox'
import type { Mode } from '../../domain/modes.js'
import type { Dirs } from '../../domain/paths.js'
import type { Logger } from '../../domain/ports.js'
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

export class GraceBook {
  readonly #dirs: Dirs
  readonly #hosts: Map<string, { mode: Mode; since: number }>
  #dirty = false

  private constructor(dirs: Dirs, hosts: GraceFile['hosts']) {
    this.#dirs = dirs
    this.#hosts = new Map(Object.entries(hosts))
  }

  /**
   * Reads the book. One that cannot be read starts empty, which only ever
   * lengthens a grace: every awake host's hour starts again.
   */
  static async load(dirs: Dirs, logger: Logger): Promise<GraceBook> {
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
      return new GraceBook(dirs, {})
    }
    if (!Value.Check(GraceFile, raw)) {
      logger.warn({ file }, `layout: ${file} is not a grace book; every awake host's grace starts again`)
      return new GraceBook(dirs, {})
    }
    return new GraceBook(dirs, raw.hosts)
  }

  /** The grace host has left toward mode, starting its clock now when it has none. */
  left(host: string, mode: Mode, nowMs: number, graceMs: number): number {
    let entry = this.#hosts.get(host)
    if (entry === undefined || entry.mode !== mode) {
      entry = { mode, since: nowMs }
      this.#hosts.set(host, entry)
      this.#dirty = true
    }
    return graceMs - (nowMs - entry.since)
  }

  /** The host reached the mode (or left the registry): its entry ends. */
  end(host: string): void {
    if (this.#hosts.delete(host)) this.#dirty = true
  }

  /** Ends every entry toward another mode (the intent changed) or for a host not in hosts. */
  retain(mode: Mode, hosts: ReadonlySet<string>): void {
    for (const [host, entry] of this.#hosts) if (entry.mode !== mode || !hosts.has(host)) this.end(host)
  }

  /** When host was first deferred toward mode, or undefined. */
  since(host: string, mode: Mode): number | undefined {
    const entry = this.#hosts.get(host)
    return entry?.mode === mode ? entry.since : undefined
  }

  /** Writes the book when it changed. */
  async save(): Promise<void> {
    if (!this.#dirty) return
    const dir = await ensureLayoutDir(this.#dirs)
    const body: GraceFile = { v: 1, hosts: Object.fromEntries([...this.#hosts].sort(([a], [b]) => (a < b ? -1 : 1))) }
    await atomicWrite(path.join(dir, GRACE_FILE), `${JSON.stringify(body)}\n`)
    this.#dirty = false
  }
}

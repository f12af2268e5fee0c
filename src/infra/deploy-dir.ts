// The directory deploy store (design §7): one JSON file per intent under <deploymentDir>/layout/intents/<id>.json.
// Writes are whole or absent: a fleet may share the filesystem. Box summaries (design §7.3) are layout/boxes/*.json.
import { randomBytes } from 'node:crypto'
import fs from 'node:fs/promises'
import path from 'node:path'
import { Value } from '../domain/typebox.js'
import { BoxSummary, type BoxGone, type KeptBox } from '../domain/box-summary.js'
import type { Clock, DeployStore, QuarantinedRecord, StoreContents, UnreadableRecord } from '../domain/ports.js'
import { systemClock } from '../domain/ports.js'
import { IntentRecord } from '../domain/schemas.js'
import { errorMessage, errors } from '../errors.js'
import { schemaErrors } from './schema-errors.js'

/** Anything larger is not a record. */
export const MAX_RECORD_BYTES = 64 * 1024

/** Hides latency, clear of EMFILE. */
const READ_CONCURRENCY = 16

/** Clock skew allowed before a summary is stale. */
export const CLOCK_TOLERANCE_MS = 10_000

/** Its agent stopped cleanly. */
const STOP_MARK = '.stopped'

/** Maybe left by a crash before its rename. */
const TEMP_MARK = '.tmp-'

const errnoCode = (err: unknown): string | undefined => (err as NodeJS.ErrnoException | undefined)?.code

/** Never reads an oversized file whole. */
async function readSmall(file: string, signal: AbortSignal): Promise<{ size: number; text: string; mtimeMs: number }> {
  // O_NONBLOCK: a FIFO planted as a record must not hold a read (and a libuv worker) forever.
  const fh = await fs.open(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK | fs.constants.O_NOFOLLOW)
  try {
    const st = await fh.stat()
    if (!st.isFile()) throw new Error('is not a regular file')
    const { size, mtimeMs } = st
    if (size > MAX_RECORD_BYTES) return { size, text: '', mtimeMs }
    const text = await fh.readFile({ encoding: 'utf8', signal })
    // It may have grown.
    return { size: Math.max(size, Buffer.byteLength(text)), text, mtimeMs }
  } finally {
    await fh.close()
  }
}

async function fsyncDir(dir: string): Promise<void> {
  const fh = await fs.open(dir, 'r')
  try {
    await fh.sync()
  } finally {
    await fh.close()
  }
}

export interface DirStoreOptions {
  boxTtlMs?: number
  clock?: Clock
}

/** A file name, never a path. */
const QUARANTINE_ID = /^(?!\.\.?$)[^/\0]{1,250}$/

export class DirDeployStore implements DeployStore {
  readonly intentsDir: string
  readonly quarantineDir: string
  readonly boxesDir: string
  readonly #ttlMs: number
  readonly #clock: Clock
  #mine: BoxSummary | undefined
  /** Its stop mark is removed: the box is back. */
  #back = false
  #renewal: (() => void) | undefined
  /** A store seen is held to it (list). */
  readonly #seen = { root: false, intents: false, records: false }

  constructor(
    readonly deploymentDir: string,
    opts: DirStoreOptions = {},
  ) {
    this.intentsDir = path.join(deploymentDir, 'layout', 'intents')
    this.boxesDir = path.join(deploymentDir, 'layout', 'boxes')
    this.quarantineDir = path.join(deploymentDir, 'layout', 'quarantine')
    this.#ttlMs = opts.boxTtlMs ?? 30_000
    this.#clock = opts.clock ?? systemClock
  }

  describe(): string {
    return `dir ${this.deploymentDir}`
  }

  identity(): string {
    return `dir ${path.resolve(this.deploymentDir)}`
  }

  async close(): Promise<void> {
    // A clean stop is gone at once; its summary stays beside the mark.
    this.#renewal?.()
    this.#renewal = undefined
    const mine = this.#mine
    this.#mine = undefined
    if (mine !== undefined)
      await fs
        .writeFile(
          this.#stopMark(mine.box),
          `${JSON.stringify({ since: new Date(this.#clock.now()).toISOString() })}\n`,
        )
        .catch(() => undefined)
  }

  #stopMark(box: string): string {
    return path.join(this.boxesDir, `${box}${STOP_MARK}`)
  }

  async publishBox(summary: BoxSummary, signal: AbortSignal): Promise<void> {
    if (!Value.Check(BoxSummary, summary))
      throw new Error(`refusing to publish an invalid box summary: ${schemaErrors(BoxSummary, summary)}`)
    this.#mine = summary
    await this.#writeMine(signal)
    if (!this.#back) {
      await fs.rm(this.#stopMark(summary.box), { force: true })
      this.#back = true
    }
    this.#schedule()
  }

  async #writeMine(signal: AbortSignal): Promise<void> {
    const mine = this.#mine
    if (mine === undefined) return
    const value: BoxSummary = { ...mine, expiresAt: new Date(this.#clock.now() + this.#ttlMs).toISOString() }
    await fs.mkdir(this.boxesDir, { recursive: true })
    const final = path.join(this.boxesDir, `${mine.box}.json`)
    const tmp = `${final}${TEMP_MARK}${process.pid}-${randomBytes(4).toString('hex')}`
    // No fsync: the next renewal rewrites a summary lost to a power cut.
    await fs.writeFile(tmp, `${JSON.stringify(value)}\n`, { signal, mode: 0o644 })
    await fs.rename(tmp, final)
  }

  #schedule(): void {
    if (this.#renewal !== undefined || this.#mine === undefined) return
    this.#renewal = this.#clock.setTimer(Math.max(100, Math.floor(this.#ttlMs / 3)), () => {
      this.#renewal = undefined
      void this.#writeMine(AbortSignal.timeout(this.#ttlMs))
        .catch(() => undefined)
        .finally(() => this.#schedule())
    })
  }

  async listBoxes(signal: AbortSignal): Promise<BoxSummary[]> {
    return (await this.listKnownBoxes(signal)).filter((b) => b.gone === undefined).map((b) => b.summary)
  }

  /** Every summary, by label, a gone one marked since when (design §7.3). */
  async listKnownBoxes(signal: AbortSignal): Promise<KeptBox[]> {
    let names: string[]
    try {
      names = await fs.readdir(this.boxesDir)
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return []
      throw new Error(`deploy store ${this.boxesDir}: cannot list boxes: ${errorMessage(err)}`, { cause: err })
    }
    const stops = new Set(names.filter((n) => n.endsWith(STOP_MARK)))
    const out: KeptBox[] = []
    for (const name of names.filter((n) => n.endsWith('.json') && !n.includes(TEMP_MARK))) {
      const read = await this.#readBox(name, signal)
      if (read === undefined) continue
      const stop = `${read.summary.box}${STOP_MARK}`
      const gone = stops.has(stop) ? await this.#stopped(stop) : this.#expired(read.mtimeMs)
      out.push(gone === undefined ? { summary: read.summary } : { summary: read.summary, gone })
    }
    return out.sort((a, b) => (a.summary.box < b.summary.box ? -1 : a.summary.box > b.summary.box ? 1 : 0))
  }

  async #readBox(name: string, signal: AbortSignal): Promise<{ summary: BoxSummary; mtimeMs: number } | undefined> {
    const file = path.join(this.boxesDir, name)
    const read = await readSmall(file, signal).catch((err: unknown) => {
      // Removed since the listing: forgotten.
      if (errnoCode(err) === 'ENOENT') return undefined
      throw new Error(`box summary ${file}: cannot read: ${errorMessage(err)}`, { cause: err })
    })
    if (read === undefined) return undefined
    let value: unknown
    try {
      value = JSON.parse(read.text)
    } catch (err) {
      throw new Error(`box summary ${file}: not JSON: ${errorMessage(err)}`, { cause: err })
    }
    if (!Value.Check(BoxSummary, value))
      throw new Error(`box summary ${file}: not a box summary: ${schemaErrors(BoxSummary, value)}`)
    if (name !== `${value.box}.json`)
      throw new Error(
        `box summary ${file}: holds box ${JSON.stringify(value.box)}, so it must be named ${value.box}.json`,
      )
    return { summary: value, mtimeMs: read.mtimeMs }
  }

  /** By the file's mtime, never by the agent's stamps, which a clock stepped back writes past (design §7.3). */
  #expired(mtimeMs: number): BoxGone | undefined {
    if (this.#clock.now() - mtimeMs <= this.#ttlMs + CLOCK_TOLERANCE_MS) return undefined
    return { since: new Date(mtimeMs + this.#ttlMs).toISOString(), how: 'expired' }
  }

  async #stopped(name: string): Promise<BoxGone | undefined> {
    const st = await fs.stat(path.join(this.boxesDir, name)).catch(() => undefined)
    // Removed meanwhile: the box came back.
    if (st === undefined) return undefined
    return { since: new Date(st.mtimeMs).toISOString(), how: 'stopped' }
  }

  /** `fleet forget`: refuses a live or unknown box. */
  async forgetBox(box: string, signal: AbortSignal): Promise<KeptBox> {
    const name = `${box}.json`
    if (!QUARANTINE_ID.test(name) || name.includes(TEMP_MARK)) throw errors.unknownBoxToForget(box)
    const known = (await this.listKnownBoxes(signal)).find((b) => b.summary.box === box)
    if (known === undefined) throw errors.unknownBoxToForget(box)
    if (known.gone === undefined) throw errors.boxLive(box)
    await fs.rm(path.join(this.boxesDir, name), { force: true })
    await fs.rm(this.#stopMark(box), { force: true })
    return known
  }

  async remove(ids: readonly string[], signal: AbortSignal): Promise<void> {
    if (ids.length === 0) return
    for (const id of ids) {
      signal.throwIfAborted()
      await fs.rm(path.join(this.intentsDir, `${id}.json`), { force: true })
    }
    await fsyncDir(this.intentsDir)
  }

  /** Every record, by id; a store seen losing its root, intents or every record is lost, not empty (design §7). */
  async list(signal: AbortSignal): Promise<IntentRecord[]> {
    signal.throwIfAborted()
    const names = await this.#names()
    if (names === undefined) return []
    signal.throwIfAborted()
    const records = await this.#readAll(names, signal)
    if (records.length > 0) this.#seen.records = true
    else if (this.#seen.records)
      throw errors.deployStoreLost(
        'deploy_store_emptied',
        this.describe(),
        `${this.intentsDir} holds no record, where this agent read one before`,
      )
    return records
  }

  async #names(): Promise<string[] | undefined> {
    try {
      await fs.stat(this.deploymentDir)
      this.#seen.root = true
    } catch (err) {
      this.#absent(err, this.deploymentDir, 'root')
      return undefined
    }
    try {
      const names = await fs.readdir(this.intentsDir)
      this.#seen.intents = true
      return names
    } catch (err) {
      this.#absent(err, this.intentsDir, 'intents')
      return undefined
    }
  }

  /** Returns only when dir was never seen; a seen dir gone, or any other failure, throws (fail closed). */
  #absent(err: unknown, dir: string, which: 'root' | 'intents'): void {
    if (errnoCode(err) !== 'ENOENT')
      throw new Error(`deploy store ${dir}: cannot list intents: ${errorMessage(err)}`, { cause: err })
    if (this.#seen[which])
      throw errors.deployStoreLost(
        'deploy_store_vanished',
        this.describe(),
        `${dir} is gone, where this agent read it before`,
      )
  }

  async #readAll(names: readonly string[], signal: AbortSignal): Promise<IntentRecord[]> {
    const files = names.filter((n) => n.endsWith('.json') && !n.includes(TEMP_MARK))
    const records: IntentRecord[] = []
    for (let i = 0; i < files.length; i += READ_CONCURRENCY) {
      const batch = files.slice(i, i + READ_CONCURRENCY)
      records.push(...(await Promise.all(batch.map((name) => this.readRecord(name, signal)))))
    }
    // Code-unit order, as newIntentId compares ids.
    return records.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
  }

  private async readRecord(name: string, signal: AbortSignal): Promise<IntentRecord> {
    const file = path.join(this.intentsDir, name)
    const bad = (why: string, cause?: unknown) => new Error(`intent record ${file}: ${why}`, { cause })
    const read = await readSmall(file, signal).catch((err: unknown) => {
      if (signal.aborted) throw err
      throw bad(`cannot read: ${errorMessage(err)}`, err)
    })
    if (read.size > MAX_RECORD_BYTES)
      throw bad(`${read.size} bytes, over the ${MAX_RECORD_BYTES}-byte limit of a record`)
    let value: unknown
    try {
      value = JSON.parse(read.text)
    } catch (err) {
      throw bad(`not JSON: ${errorMessage(err)}`, err)
    }
    if (!Value.Check(IntentRecord, value)) throw bad(`not an intent record: ${schemaErrors(IntentRecord, value)}`)
    // The name is the id, so no two files claim one id and a copy cannot pose as another.
    if (name !== `${value.id}.json`)
      throw bad(`holds id ${JSON.stringify(value.id)}, so it must be named ${value.id}.json`)
    return value
  }

  async record(intent: IntentRecord, signal: AbortSignal): Promise<void> {
    signal.throwIfAborted()
    if (!Value.Check(IntentRecord, intent))
      throw new Error(`refusing to record an invalid intent: ${schemaErrors(IntentRecord, intent)}`)
    // list() skips temp-looking names, so none is written.
    if (intent.id.includes(TEMP_MARK))
      throw new Error(`refusing to record intent ${intent.id}: an id may not contain ${JSON.stringify(TEMP_MARK)}`)
    await this.ensureDir()
    const final = path.join(this.intentsDir, `${intent.id}.json`)
    const tmp = `${final}${TEMP_MARK}${process.pid}-${randomBytes(4).toString('hex')}`
    try {
      const fh = await fs.open(tmp, 'wx', 0o644)
      try {
        await fh.writeFile(`${JSON.stringify(intent, null, 2)}\n`, { signal })
        await fh.sync()
      } finally {
        await fh.close()
      }
      signal.throwIfAborted()
      await placeNoReplace(tmp, final, intent.id)
    } catch (err) {
      await fs.rm(tmp, { force: true }).catch((rmErr: unknown) => {
        throw new Error(
          `${errorMessage(err)} (and the temp file ${tmp} could not be removed: ${errorMessage(rmErr)})`,
          { cause: err },
        )
      })
      throw err
    }
    // The rename is durable once its directory is.
    await fsyncDir(this.intentsDir)
  }

  /** Readable records by id, each unreadable one with why. */
  async inspect(signal: AbortSignal): Promise<StoreContents> {
    let names: string[]
    try {
      names = await fs.readdir(this.intentsDir)
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return { records: [], unreadable: [] }
      throw new Error(`deploy store ${this.intentsDir}: cannot list intents: ${errorMessage(err)}`, { cause: err })
    }
    const records: IntentRecord[] = []
    const unreadable: UnreadableRecord[] = []
    for (const name of names.filter((n) => n.endsWith('.json') && !n.includes(TEMP_MARK)).sort()) {
      try {
        records.push(await this.readRecord(name, signal))
      } catch (err) {
        if (signal.aborted) throw err
        const file = path.join(this.intentsDir, name)
        const why = errorMessage(err).replace(`intent record ${file}: `, '')
        unreadable.push({ id: name.slice(0, -'.json'.length), where: file, why })
      }
    }
    return { records: records.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)), unreadable }
  }

  /** One rename aside, the replacement recorded first: a reader never sees neither (design §7.4). */
  async quarantine(id: string, replacement: IntentRecord | undefined, signal: AbortSignal): Promise<string> {
    if (!QUARANTINE_ID.test(id)) throw new Error(`no record can be named ${JSON.stringify(id)} in ${this.intentsDir}`)
    const from = path.join(this.intentsDir, `${id}.json`)
    const to = path.join(this.quarantineDir, `${id}.json`)
    await fs.lstat(from).catch((err: unknown) => {
      throw new Error(`no record ${id} to quarantine (${from}): ${errorMessage(err)}`, { cause: err })
    })
    const taken = await fs.lstat(to).then(
      () => true,
      () => false,
    )
    if (taken) throw new Error(`a record ${id} is already quarantined at ${to}; move it away first`)
    if (replacement !== undefined) await this.record(replacement, signal)
    signal.throwIfAborted()
    const first = await fs.mkdir(this.quarantineDir, { recursive: true })
    if (first !== undefined) await fsyncDir(path.dirname(this.quarantineDir))
    await fs.rename(from, to)
    await fsyncDir(this.intentsDir)
    await fsyncDir(this.quarantineDir)
    return to
  }

  async listQuarantined(signal: AbortSignal): Promise<QuarantinedRecord[]> {
    let names: string[]
    try {
      names = await fs.readdir(this.quarantineDir)
    } catch (err) {
      if (errnoCode(err) === 'ENOENT') return []
      throw new Error(`deploy store ${this.quarantineDir}: cannot list: ${errorMessage(err)}`, { cause: err })
    }
    const out: QuarantinedRecord[] = []
    for (const name of names.filter((n) => n.endsWith('.json')).sort()) {
      const where = path.join(this.quarantineDir, name)
      const read = await readSmall(where, signal).catch(() => ({ text: '' }))
      out.push({ id: name.slice(0, -'.json'.length), where, text: read.text })
    }
    return out
  }

  /** mkdir -p, each new directory's parent fsynced so the path survives a crash. */
  private async ensureDir(): Promise<void> {
    const first = await fs.mkdir(this.intentsDir, { recursive: true })
    if (first === undefined) return
    for (let d = this.intentsDir; ; d = path.dirname(d)) {
      await fsyncDir(path.dirname(d))
      if (d === first || path.dirname(d) === d) break
    }
  }
}

/** link(2) refuses an existing final atomically; check-then-rename, which races, only without hard links. */
async function placeNoReplace(tmp: string, final: string, id: string): Promise<void> {
  const exists = () => new Error(`intent ${id} is already recorded (${final}); refusing to overwrite it`)
  try {
    await fs.link(tmp, final)
  } catch (err) {
    const code = errnoCode(err)
    if (code === 'EEXIST') throw exists()
    if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP' && code !== 'ENOSYS') throw err
    const taken = await fs.lstat(final).then(
      () => true,
      (statErr: unknown) => {
        if (errnoCode(statErr) === 'ENOENT') return false
        throw statErr
      },
    )
    if (taken) throw exists()
    await fs.rename(tmp, final)
    return
  }
  await fs.unlink(tmp)
}

// The directory deploy store (design §7): one JSON file per intent under
// <deploymentDir>/layout/intents/<id>.json. Every write is whole or absent,
// since a fleet may share the filesystem. A box's summary (design §7.3) is
// layout/boxes/<box>.json with an expiresAt its agent renews in place of a
// lease; it outlives its agent (a clean stop leaves <box>.stopped beside it)
// until the box comes back or `fleet forget` removes it.
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

/** A record is a few hundred bytes; anything this large is not one of ours. */
export const MAX_RECORD_BYTES = 64 * 1024

/** How many records are read at once: enough to hide latency, few enough to stay clear of EMFILE. */
const READ_CONCURRENCY = 16

/** How far this clock and the filesystem's (or another box's) may disagree before a summary is judged stale. */
export const CLOCK_TOLERANCE_MS = 10_000

/** Beside a box's summary, `<box>.stopped`: its agent stopped cleanly (a new agent of the box removes it). */
const STOP_MARK = '.stopped'

/** A writer's temp file, `<id>.json.tmp-<pid>-<rand>`, possibly left by a crash before its rename. */
const TEMP_MARK = '.tmp-'

const errnoCode = (err: unknown): string | undefined => (err as NodeJS.ErrnoException | undefined)?.code

/**
 * The file's text, or only its size when that is over the limit (so a huge file is never read whole), and
 * when it was last written (the filesystem's stamp).
 */
async function readSmall(file: string, signal: AbortSignal): Promise<{ size: number; text: string; mtimeMs: number }> {
  // O_NONBLOCK: a FIFO planted under a record's name must not hold a read
  // (and a libuv worker) forever; it is refused below as not a regular file.
  const fh = await fs.open(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK | fs.constants.O_NOFOLLOW)
  try {
    const st = await fh.stat()
    if (!st.isFile()) throw new Error('is not a regular file')
    const { size, mtimeMs } = st
    if (size > MAX_RECORD_BYTES) return { size, text: '', mtimeMs }
    const text = await fh.readFile({ encoding: 'utf8', signal })
    // The file may have grown between stat and read.
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
  /** How long a published summary counts without being renewed. */
  boxTtlMs?: number
  clock?: Clock
}

/** An id `intent quarantine` may name: a file name in one directory, never a path. */
const QUARANTINE_ID = /^(?!\.\.?$)[^/\0]{1,250}$/

export class DirDeployStore implements DeployStore {
  /** Where the records live: `<deploymentDir>/layout/intents`. */
  readonly intentsDir: string
  /** Where `intent quarantine` moves records aside: `<deploymentDir>/layout/quarantine`. */
  readonly quarantineDir: string
  /** Where the boxes' summaries live: `<deploymentDir>/layout/boxes`. */
  readonly boxesDir: string
  readonly #ttlMs: number
  readonly #clock: Clock
  /** This agent's summary, renewed a third of the TTL apart until close. */
  #mine: BoxSummary | undefined
  /** A stop mark this box's last agent left has been removed: the box is back. */
  #back = false
  #renewal: (() => void) | undefined
  /** What this process's reads have found here: a store seen is held to it (list). */
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
    // Only the summary's renewal is held between calls; a box that stops cleanly is gone at once, its last
    // summary kept beside the mark.
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
    // No fsync: a summary lost to a power cut is written again by the next renewal.
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

  /** The summaries whose time has not run out, sorted by label; a malformed one throws naming its file. */
  async listBoxes(signal: AbortSignal): Promise<BoxSummary[]> {
    return (await this.listKnownBoxes(signal)).filter((b) => b.gone === undefined).map((b) => b.summary)
  }

  /**
   * Every box's summary, sorted by label, each whose agent is gone marked since when (design §7.3): stopped
   * (its mark's time), or expired (when its time ran out). A malformed one throws naming its file.
   */
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

  /** One box's summary and when its file was last written; undefined when it was removed meanwhile. */
  async #readBox(name: string, signal: AbortSignal): Promise<{ summary: BoxSummary; mtimeMs: number } | undefined> {
    const file = path.join(this.boxesDir, name)
    const read = await readSmall(file, signal).catch((err: unknown) => {
      // Removed between the listing and the read: that box was forgotten.
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

  /**
   * Gone when its agent stopped renewing it: judged by when the file was last written, on the filesystem's
   * clock, against this one with a tolerance; never by the stamps the agent's own clock put in it (a box
   * whose clock stepped back writes an expiresAt already past). design §7.3.
   */
  #expired(mtimeMs: number): BoxGone | undefined {
    if (this.#clock.now() - mtimeMs <= this.#ttlMs + CLOCK_TOLERANCE_MS) return undefined
    return { since: new Date(mtimeMs + this.#ttlMs).toISOString(), how: 'expired' }
  }

  /** A clean stop's mark: gone since it was written (the filesystem's clock). */
  async #stopped(name: string): Promise<BoxGone | undefined> {
    const st = await fs.stat(path.join(this.boxesDir, name)).catch(() => undefined)
    // Removed meanwhile: the box came back.
    if (st === undefined) return undefined
    return { since: new Date(st.mtimeMs).toISOString(), how: 'stopped' }
  }

  /** Removes a gone box's summary and its stop mark (`fleet forget`); refuses a live box and an unknown one. */
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

  /** Removes the records of these ids, then fsyncs the directory once. */
  async remove(ids: readonly string[], signal: AbortSignal): Promise<void> {
    if (ids.length === 0) return
    for (const id of ids) {
      signal.throwIfAborted()
      await fs.rm(path.join(this.intentsDir, `${id}.json`), { force: true })
    }
    await fsyncDir(this.intentsDir)
  }

  /**
   * Every record, sorted by id. A store this process has seen is held to it
   * (design §7): its root or its intents directory gone, or every record
   * gone after one was read, is a store lost, not "no intent", and throws.
   */
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

  /** The names under the intents directory; undefined when no store was ever made here. */
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

  /**
   * Returns when dir's absence reads as "nothing was ever recorded": it is
   * missing and this process never saw it. A directory seen and now gone
   * is a store lost, and any other failure (a file in its place, no
   * permission) must not read as "no intent" either: both throw, and the
   * caller fails closed.
   */
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
    // Plain code-unit order, the order newIntentId compares ids in.
    return records.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
  }

  /** Reads one record; any fault of the file throws naming it, so the caller can say what to fix. */
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
    // The name is the id, so two files can never claim one id and a copied
    // file cannot pose as another record.
    if (name !== `${value.id}.json`)
      throw bad(`holds id ${JSON.stringify(value.id)}, so it must be named ${value.id}.json`)
    return value
  }

  async record(intent: IntentRecord, signal: AbortSignal): Promise<void> {
    signal.throwIfAborted()
    if (!Value.Check(IntentRecord, intent))
      throw new Error(`refusing to record an invalid intent: ${schemaErrors(IntentRecord, intent)}`)
    // list() skips temp-looking names; a record it would skip must not be written.
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
    // The rename is durable only once the directory entry is.
    await fsyncDir(this.intentsDir)
  }

  /** Every record, the readable ones sorted by id, each unreadable one named with why (list throws on it). */
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

  /**
   * Moves <id>.json to layout/quarantine/<id>.json, the replacement recorded first (design §7.4): a
   * reader sees the record alone, then both (the replacement is the newer, or the record cannot be read
   * and nothing acts), then the replacement alone; never neither. The move is one rename.
   */
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

  /** The records quarantine moved aside, by id, each as its bytes read (unparsed). */
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

  /** mkdir -p, then fsync the parent of every directory it created so the path itself survives a crash. */
  private async ensureDir(): Promise<void> {
    const first = await fs.mkdir(this.intentsDir, { recursive: true })
    if (first === undefined) return
    for (let d = this.intentsDir; ; d = path.dirname(d)) {
      await fsyncDir(path.dirname(d))
      if (d === first || path.dirname(d) === d) break
    }
  }
}

/**
 * Moves tmp to final unless final exists. link(2) refuses an existing name
 * atomically, where a check before rename(2) would race another recorder;
 * a filesystem without hard links gets the check and the rename.
 */
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

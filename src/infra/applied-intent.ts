// The intent this box keeps, `D/layout/intent.applied`, and the deploy store held to it (design §7.7). Written
// whole, it is what a new process remembers, so a store gone, emptied or replaced between starts reads unreadable.
import path from 'node:path'
import { appliedFrom, AppliedIntent, heldToApplied } from '../domain/applied-intent.js'
import type { Dirs } from '../domain/paths.js'
import type { DeployStore, Logger } from '../domain/ports.js'
import { selectIntent } from '../domain/intent.js'
import type { IntentRecord } from '../domain/schemas.js'
import { Value } from '../domain/typebox.js'
import { errorMessage, errors } from '../errors.js'
import { atomicWrite, isNotFound, readNoFollow, unlinkMany } from './fsutil.js'
import { ensureLayoutDir, layoutDir } from './pass/journal.js'
import { schemaErrors } from './schema-errors.js'

export const APPLIED_FILE = 'intent.applied'

export function appliedIntentPath(dirs: Dirs): string {
  return path.join(layoutDir(dirs), APPLIED_FILE)
}

/** Unreadable throws naming the file (`intent forget-applied` clears it). */
export async function readAppliedIntent(dirs: Dirs): Promise<AppliedIntent | undefined> {
  const file = appliedIntentPath(dirs)
  let text: string
  try {
    text = await readNoFollow(file)
  } catch (err) {
    if (isNotFound(err)) return undefined
    throw new Error(`${file}: cannot read the intent this box applied: ${errorMessage(err)}`, { cause: err })
  }
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (err) {
    throw new Error(`${file}: not JSON: ${errorMessage(err)}`, { cause: err })
  }
  if (!Value.Check(AppliedIntent, value))
    throw new Error(`${file}: not a kept intent: ${schemaErrors(AppliedIntent, value)}`)
  return value
}

export async function writeAppliedIntent(dirs: Dirs, applied: AppliedIntent): Promise<void> {
  await ensureLayoutDir(dirs)
  await atomicWrite(appliedIntentPath(dirs), `${JSON.stringify(applied)}\n`)
}

export async function forgetAppliedIntent(dirs: Dirs): Promise<boolean> {
  const file = appliedIntentPath(dirs)
  const there = await readNoFollow(file).then(
    () => true,
    (err: unknown) => !isNotFound(err),
  )
  if (!there) return false
  await unlinkMany(path.dirname(file), [APPLIED_FILE])
  return true
}

export interface KeptIntentOptions {
  dirs: Dirs
  box: string
  /** Keep each read's selection (the agent); false only holds reads to it (`intent status`). */
  keep: boolean
  logger?: Logger
  now?: () => Date
}

/**
 * A `list` holding neither the kept record nor a newer one for this box throws `applied_intent_missing`. The file
 * is read again before a refusal, so `intent forget-applied` needs no restart.
 */
export class KeptIntentStore implements DeployStore {
  readonly #inner: DeployStore
  readonly #o: KeptIntentOptions
  /** null before the first look. */
  #kept: AppliedIntent | undefined | null = null
  #writing: Promise<void> = Promise.resolve()
  readonly tracksBoxes: boolean | undefined

  constructor(inner: DeployStore, opts: KeptIntentOptions) {
    this.#inner = inner
    this.#o = opts
    this.tracksBoxes = inner.tracksBoxes
    // All but the reads pass through.
    const i = inner
    if (i.watch) this.watch = (onChange, signal) => i.watch?.(onChange, signal)
    if (i.publishBox) this.publishBox = (summary, signal) => i.publishBox?.(summary, signal) ?? Promise.resolve()
    if (i.listBoxes) this.listBoxes = (signal) => i.listBoxes?.(signal) ?? Promise.resolve([])
    if (i.listKnownBoxes) this.listKnownBoxes = (signal) => i.listKnownBoxes?.(signal) ?? Promise.resolve([])
    if (i.remove) this.remove = (ids, signal) => i.remove?.(ids, signal) ?? Promise.resolve()
    if (i.inspect) this.inspect = (signal) => i.inspect!(signal)
    if (i.quarantine) this.quarantine = (id, replacement, signal) => i.quarantine!(id, replacement, signal)
    if (i.listQuarantined) this.listQuarantined = (signal) => i.listQuarantined?.(signal) ?? Promise.resolve([])
    if (i.claimLabel) this.claimLabel = (holder, signal) => i.claimLabel?.(holder, signal) ?? Promise.resolve()
    if (i.rollouts) this.rollouts = () => i.rollouts!()
  }

  watch?: DeployStore['watch']
  publishBox?: DeployStore['publishBox']
  listBoxes?: DeployStore['listBoxes']
  listKnownBoxes?: DeployStore['listKnownBoxes']
  remove?: DeployStore['remove']
  inspect?: DeployStore['inspect']
  quarantine?: DeployStore['quarantine']
  listQuarantined?: DeployStore['listQuarantined']
  claimLabel?: DeployStore['claimLabel']
  rollouts?: DeployStore['rollouts']

  async list(signal: AbortSignal): Promise<IntentRecord[]> {
    const records = await this.#inner.list(signal)
    const store = this.identity()
    const { box } = this.#o
    let kept = this.#kept === null ? await this.#look() : this.#kept
    if (kept !== undefined && heldToApplied(records, kept, box, store) !== null) {
      // An operator may have forgotten it since.
      kept = await this.#look()
      const why = kept === undefined ? null : heldToApplied(records, kept, box, store)
      if (why !== null) throw errors.appliedIntentMissing(store, why)
    }
    if (this.#o.keep) await this.#keep(records, kept, store)
    return records
  }

  async #look(): Promise<AppliedIntent | undefined> {
    const kept = await readAppliedIntent(this.#o.dirs)
    this.#kept = kept
    return kept
  }

  /** Keeps the read's selection when it differs from the kept one. */
  async #keep(records: readonly IntentRecord[], kept: AppliedIntent | undefined, store: string): Promise<void> {
    const read = selectIntent(records, this.#o.box)
    if (!read.found || read.intent.id === kept?.id) return
    const applied = appliedFrom(read.intent, store, (this.#o.now ?? (() => new Date()))())
    if (applied === undefined) return
    const write = this.#writing.then(() => writeAppliedIntent(this.#o.dirs, applied))
    this.#writing = write.catch(() => undefined)
    try {
      await write
    } catch (err) {
      // Acting on a record this box could not remember would lose it to the next store that vanishes.
      throw new Error(`${appliedIntentPath(this.#o.dirs)}: cannot keep intent ${applied.id}: ${errorMessage(err)}`, {
        cause: err,
      })
    }
    this.#kept = applied
    this.#o.logger?.info(
      { intent: applied.id, mode: applied.mode, store },
      `layout: intent ${applied.id} (${applied.mode}) kept as the one this box applied`,
    )
  }

  record(intent: IntentRecord, signal: AbortSignal): Promise<void> {
    return this.#inner.record(intent, signal)
  }

  describe(): string {
    return this.#inner.describe()
  }

  identity(): string {
    return this.#inner.identity?.() ?? this.#inner.describe()
  }

  close(): Promise<void> {
    return this.#inner.close()
  }
}

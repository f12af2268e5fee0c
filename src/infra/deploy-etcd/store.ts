// The etcd deploy store (design §7): the DeployStore port over etcd, one
// key per intent, /carlos/layout/intents/<id>, read by every box of a fleet.
// This file owns what a key holds; gateway.ts, watch.ts and boxes.ts the rest.
import { setTimeout as sleep } from 'node:timers/promises'
import { Value } from '../../domain/typebox.js'
import type { Static } from 'typebox'
import { errorMessage, errors } from '../../errors.js'
import type {
  Clock,
  DeployStore,
  LabelHolder,
  Logger,
  QuarantinedRecord,
  StoreContents,
  UnreadableRecord,
} from '../../domain/ports.js'
import { systemClock } from '../../domain/ports.js'
import { IntentRecord } from '../../domain/schemas.js'
import { MAX_RECORD_BYTES } from '../deploy-dir.js'
import { schemaErrors } from '../schema-errors.js'
import type { BoxSummary, KeptBox } from '../../domain/box-summary.js'
import { BOX_TTL_MS, EtcdBoxes } from './boxes.js'
import { EtcdRollouts, rolloutPrefixFor } from './rollout.js'
import type { EtcdCredentials } from './credentials.js'
import { b64, EtcdGateway, type Gateway, prefixEnd } from './gateway.js'
import { PrefixWatch, WATCH_RETRY_FIRST_MS, WATCH_RETRY_MAX_MS, WATCH_SILENCE_MS, type WatchEvent } from './watch.js'
import { type KeyValue, RangeResponse, TxnResponse } from './wire-schemas.js'

export const INTENT_PREFIX = '/carlos/layout/intents/'
export const BOX_PREFIX = '/carlos/layout/boxes/'

export function boxPrefixFor(prefix: string): string {
  return siblingPrefix(prefix, 'boxes')
}

/** Outside the range of `…/boxes/`, which stays the live set (leased keys only). */
export function keptBoxPrefixFor(prefix: string): string {
  return siblingPrefix(prefix, 'boxes-kept')
}

/** A prefix beside the intents' one: `…/intents/` gives `…/<name>/`, `/test/x/` gives `/test/x-<name>/`. */
export function siblingPrefix(prefix: string, name: string): string {
  return prefix.endsWith('/intents/')
    ? `${prefix.slice(0, -'intents/'.length)}${name}/`
    : `${prefix.slice(0, -1)}-${name}/`
}

export interface EtcdStoreOptions {
  logger?: Logger
  clock?: Clock
  /** Watch backoff jitter, in [0, 1). */
  random?: () => number
  requestTimeoutMs?: number
  connectTimeoutMs?: number
  dialTimeoutMs?: number
  watchRetryFirstMs?: number
  watchRetryMaxMs?: number
  /** Must end in `/`. */
  prefix?: string
  credentials?: EtcdCredentials
  watchSilenceMs?: number
  onWatchEvents?: (events: readonly WatchEvent[]) => void
  boxTtlMs?: number
  /** In place of the endpoints' (the rollout simulation's model of etcd). */
  gateway?: Gateway
}

const utf8 = new TextDecoder('utf-8', { fatal: true })

/** Retries of a read whose revision is behind one read before. */
const BEHIND_RETRIES = 3
const BEHIND_RETRY_MS = 300

export class EtcdDeployStore implements DeployStore {
  readonly tracksBoxes = true
  readonly prefix: string
  /** Where `intent quarantine` moves records aside. */
  readonly quarantinePrefix: string
  readonly #rangeEnd: string
  readonly #gateway: Gateway
  readonly #watch: PrefixWatch
  readonly #boxes: EtcdBoxes
  readonly #rollouts: EtcdRollouts
  /** What this process's reads found: a store seen is held to it. */
  readonly #seen: { records: boolean; cluster: string | undefined; revision: bigint; replaced: string } = {
    records: false,
    cluster: undefined,
    revision: 0n,
    replaced: '',
  }

  constructor(endpoints: readonly string[], opts: EtcdStoreOptions = {}) {
    if (endpoints.length === 0 && opts.gateway === undefined)
      throw new Error('the etcd deploy store needs at least one endpoint')
    this.prefix = opts.prefix ?? INTENT_PREFIX
    if (!this.prefix.endsWith('/')) throw new Error(`etcd key prefix ${JSON.stringify(this.prefix)} must end in "/"`)
    this.#rangeEnd = prefixEnd(this.prefix)
    this.quarantinePrefix = siblingPrefix(this.prefix, 'quarantine')
    const clock = opts.clock ?? systemClock
    this.#gateway =
      opts.gateway ??
      new EtcdGateway(endpoints, {
        requestTimeoutMs: opts.requestTimeoutMs,
        connectTimeoutMs: opts.connectTimeoutMs,
        dialTimeoutMs: opts.dialTimeoutMs,
        credentials: opts.credentials,
      })
    this.#boxes = new EtcdBoxes({
      gateway: this.#gateway,
      prefix: boxPrefixFor(this.prefix),
      keptPrefix: keptBoxPrefixFor(this.prefix),
      labelPrefix: siblingPrefix(this.prefix, 'labels'),
      holderPrefix: siblingPrefix(this.prefix, 'label-holders'),
      ttlMs: opts.boxTtlMs ?? BOX_TTL_MS,
      clock,
      logger: opts.logger,
    })
    this.#rollouts = new EtcdRollouts({
      gateway: this.#gateway,
      prefix: rolloutPrefixFor(this.prefix),
      intentPrefix: this.prefix,
      boxPrefix: boxPrefixFor(this.prefix),
      logger: opts.logger,
      clock,
      random: opts.random,
    })
    this.#watch = new PrefixWatch({
      gateway: this.#gateway,
      prefix: this.prefix,
      rangeEnd: this.#rangeEnd,
      logger: opts.logger,
      clock,
      random: opts.random ?? Math.random,
      retryFirstMs: opts.watchRetryFirstMs ?? WATCH_RETRY_FIRST_MS,
      retryMaxMs: opts.watchRetryMaxMs ?? WATCH_RETRY_MAX_MS,
      silenceMs: opts.watchSilenceMs ?? WATCH_SILENCE_MS,
      onEvents: opts.onWatchEvents,
    })
  }

  describe(): string {
    return this.#gateway.describe()
  }

  /** Never an endpoint: its URL may carry a password. */
  identity(): string {
    return `etcd cluster ${this.#seen.cluster ?? '(not read yet)'} ${this.prefix}`
  }

  async close(): Promise<void> {
    if (!this.#gateway.closed.aborted) await this.#boxes.close(AbortSignal.timeout(this.#gateway.requestTimeoutMs))
    await this.#gateway.close()
  }

  /** Ends every call, watch and renewal, revoking nothing, as a killed agent leaves its keys. */
  async abandon(): Promise<void> {
    await this.#gateway.close()
  }

  publishBox(summary: BoxSummary, signal: AbortSignal): Promise<void> {
    return this.#boxes.publish(summary, signal)
  }

  rollouts(): EtcdRollouts {
    return this.#rollouts
  }

  listBoxes(signal: AbortSignal): Promise<BoxSummary[]> {
    return this.#boxes.list(signal)
  }

  listKnownBoxes(signal: AbortSignal): Promise<KeptBox[]> {
    return this.#boxes.listKnown(signal)
  }

  forgetBox(box: string, signal: AbortSignal): Promise<KeptBox> {
    return this.#boxes.forget(box, signal)
  }

  claimLabel(holder: LabelHolder, signal: AbortSignal): Promise<void> {
    return this.#boxes.claim(holder, signal)
  }

  /** Readable records sorted by id; the others named with why. */
  async inspect(signal: AbortSignal): Promise<StoreContents> {
    const { kvs } = await this.#range(signal)
    const records: IntentRecord[] = []
    const unreadable: UnreadableRecord[] = []
    for (const kv of kvs) {
      try {
        records.push(this.#decode(kv))
      } catch (err) {
        const key = Buffer.from(kv.key, 'base64').toString('utf8')
        const why = errorMessage(err).replace(`intent record etcd ${key}: `, '')
        unreadable.push({ id: key.slice(this.prefix.length), where: `etcd ${key}`, why })
      }
    }
    return { records: records.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)), unreadable }
  }

  /** One guarded txn (design §7.4): set aside and replaced at once, so a box reads the record or its replacement. */
  async quarantine(id: string, replacement: IntentRecord | undefined, signal: AbortSignal): Promise<string> {
    if (replacement !== undefined && !Value.Check(IntentRecord, replacement))
      throw new Error(`refusing to record an invalid intent: ${schemaErrors(IntentRecord, replacement)}`)
    const key = b64(`${this.prefix}${id}`)
    const aside = `${this.quarantinePrefix}${id}`
    const { value: read } = await this.#gateway.call('/v3/kv/range', { key }, RangeResponse, signal)
    const kv = read.kvs?.[0]
    if (kv === undefined) throw new Error(`no record ${id} to quarantine (etcd key ${this.prefix}${id})`)
    const compare: unknown[] = [
      { key, target: 'MOD', result: 'EQUAL', mod_revision: kv.mod_revision ?? '0' },
      { key: b64(aside), target: 'CREATE', result: 'EQUAL', create_revision: '0' },
    ]
    const success: unknown[] = [
      { request_put: { key: b64(aside), value: kv.value ?? '' } },
      { request_delete_range: { key } },
    ]
    if (replacement !== undefined) {
      const rkey = b64(`${this.prefix}${replacement.id}`)
      compare.push({ key: rkey, target: 'CREATE', result: 'EQUAL', create_revision: '0' })
      success.push({ request_put: { key: rkey, value: b64(`${JSON.stringify(replacement, null, 2)}\n`) } })
    }
    const txn = { compare, success, failure: [{ request_range: { key: b64(aside) } }] }
    const { value } = await this.#gateway.call('/v3/kv/txn', txn, TxnResponse, signal)
    if (value.succeeded === true) return `etcd ${aside}`
    if (value.responses?.[0]?.response_range?.kvs?.[0] !== undefined)
      throw new Error(`a record ${id} is already quarantined at etcd ${aside}; move it away first`)
    throw new Error(`record ${id} changed while it was being quarantined (or the new id is taken); run it again`)
  }

  async listQuarantined(signal: AbortSignal): Promise<QuarantinedRecord[]> {
    const p = this.quarantinePrefix
    const { value } = await this.#gateway.call(
      '/v3/kv/range',
      { key: b64(p), range_end: prefixEnd(p) },
      RangeResponse,
      signal,
    )
    return (value.kvs ?? []).map((kv) => {
      const key = Buffer.from(kv.key, 'base64').toString('utf8')
      return { id: key.slice(p.length), where: `etcd ${key}`, text: Buffer.from(kv.value ?? '', 'base64').toString() }
    })
  }

  /** Deletes these intents, 128 to a txn (etcd's --max-txn-ops). */
  async remove(ids: readonly string[], signal: AbortSignal): Promise<void> {
    for (let i = 0; i < ids.length; i += 128) {
      const success = ids.slice(i, i + 128).map((id) => ({ request_delete_range: { key: b64(`${this.prefix}${id}`) } }))
      const { value } = await this.#gateway.call(
        '/v3/kv/txn',
        { compare: [], success, failure: [] },
        TxnResponse,
        signal,
      )
      if (value.succeeded !== true)
        throw new Error(`deploy store ${this.describe()}: the removal of ${success.length} records did not apply`)
    }
  }

  async list(signal: AbortSignal): Promise<IntentRecord[]> {
    const { kvs, url } = await this.#range(signal)
    const records = kvs.map((kv) => this.#decode(kv))
    if (records.length > 0) this.#seen.records = true
    else if (this.#seen.records)
      throw errors.deployStoreLost(
        'deploy_store_emptied',
        `etcd ${url}`,
        `no key under ${this.prefix}, where this agent read a record before`,
      )
    // Plain code-unit order, the order newIntentId compares ids in.
    return records.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
  }

  async #range(signal: AbortSignal): Promise<{ kvs: Array<Static<typeof KeyValue>>; url: string }> {
    // Linearizable: through the leader, so a member cut off from its quorum errs, never answers an old intent.
    const read = () =>
      this.#gateway.call('/v3/kv/range', { key: b64(this.prefix), range_end: this.#rangeEnd }, RangeResponse, signal)
    let { value, url } = await read()
    // A member just caught up with a new leader can be a little behind; asked again it is past. A wiped or
    // restored etcd stays behind.
    for (let again = 0; again < BEHIND_RETRIES && this.#behind(value.header); again++) {
      await sleep(BEHIND_RETRY_MS, undefined, { signal })
      ;({ value, url } = await read())
    }
    if (value.more === true)
      throw new Error(`deploy store etcd ${url}: the range of ${this.prefix} came back incomplete`)
    this.#heldTo(value.header, url)
    return { kvs: value.kvs ?? [], url }
  }

  #behind(header: { revision?: string; cluster_id?: string } | undefined): boolean {
    if (header?.revision === undefined) return false
    if (header.cluster_id !== undefined && this.#seen.cluster !== undefined && header.cluster_id !== this.#seen.cluster)
      return false
    return BigInt(header.revision) < this.#seen.revision
  }

  /** Another cluster or an older revision is a wiped or restored etcd: unreadable until restart (design §7). */
  #heldTo(header: { revision?: string; cluster_id?: string } | undefined, url: string): void {
    const lost = (what: string) => errors.deployStoreLost('deploy_store_replaced', `etcd ${url}`, what)
    if (this.#seen.replaced !== '') throw lost(this.#seen.replaced)
    const cluster = header?.cluster_id
    const revision = header?.revision === undefined ? undefined : BigInt(header.revision)
    if (cluster !== undefined && this.#seen.cluster !== undefined && cluster !== this.#seen.cluster)
      this.#seen.replaced = `cluster ${cluster} answers where this agent read cluster ${this.#seen.cluster}`
    else if (revision !== undefined && revision < this.#seen.revision)
      this.#seen.replaced = `revision ${revision} is behind revision ${this.#seen.revision}, read before`
    if (this.#seen.replaced !== '') throw lost(this.#seen.replaced)
    this.#seen.cluster ??= cluster
    if (revision !== undefined && revision > this.#seen.revision) this.#seen.revision = revision
  }

  /** One key-value as a record; a fault throws naming the key, for the operator to fix. */
  #decode(kv: Static<typeof KeyValue>): IntentRecord {
    const key = Buffer.from(kv.key, 'base64').toString('utf8')
    const bad = (why: string, cause?: unknown) => new Error(`intent record etcd ${key}: ${why}`, { cause })
    const id = key.slice(this.prefix.length)
    if (!Value.Check(IntentRecord.properties.id, id))
      throw bad(`the key is not ${this.prefix}<id> (an id is [A-Za-z0-9._-], 1 to 128 long)`)
    const raw = Buffer.from(kv.value ?? '', 'base64')
    if (raw.length > MAX_RECORD_BYTES)
      throw bad(`${raw.length} bytes, over the ${MAX_RECORD_BYTES}-byte limit of a record`)
    let value: unknown
    try {
      value = JSON.parse(utf8.decode(raw))
    } catch (err) {
      throw bad(`not JSON: ${errorMessage(err)}`, err)
    }
    if (!Value.Check(IntentRecord, value)) throw bad(`not an intent record: ${schemaErrors(IntentRecord, value)}`)
    // The key is the id: two keys never claim one id, nor a copied value another record.
    if (value.id !== id) throw bad(`holds id ${JSON.stringify(value.id)}, so its key must be ${this.prefix}${value.id}`)
    return value
  }

  async record(intent: IntentRecord, signal: AbortSignal): Promise<void> {
    signal.throwIfAborted()
    if (!Value.Check(IntentRecord, intent))
      throw new Error(`refusing to record an invalid intent: ${schemaErrors(IntentRecord, intent)}`)
    const key = b64(`${this.prefix}${intent.id}`)
    const value = b64(`${JSON.stringify(intent, null, 2)}\n`)
    // Put only where the key was never created: a retried txn that landed finds its own value, a success.
    const txn = {
      compare: [{ key, target: 'CREATE', result: 'EQUAL', create_revision: '0' }],
      success: [{ request_put: { key, value } }],
      failure: [{ request_range: { key } }],
    }
    const { value: res, url } = await this.#gateway.call('/v3/kv/txn', txn, TxnResponse, signal)
    if (res.succeeded === true) return
    const existing = res.responses?.[0]?.response_range?.kvs?.[0]?.value
    if (existing === value) return
    throw new Error(
      `intent ${intent.id} is already recorded (etcd ${url} key ${this.prefix}${intent.id}); refusing to overwrite it`,
    )
  }

  watch(onChange: () => void, signal: AbortSignal): void {
    this.#watch.watch(onChange, signal)
  }
}

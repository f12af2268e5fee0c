// The staged rollouts in etcd (design §7.6): the records, the pointer to the
// one in play, each box's progress written by the box itself, and events put
// in the transaction of the change they tell. Every change of a record is a
// compare-and-swap on its mod_revision, so two agents advancing at once open
// one wave, and a box starts only while the record it read still stands.
// The rules are in domain/rollout.ts.
import { Value } from '../../domain/typebox.js'
import { Type } from '../../domain/typebox.js'
import type { Static } from 'typebox'
import type { Clock, Logger } from '../../domain/ports.js'
import {
  RolloutEvent,
  RolloutRecord,
  type ActiveRollout,
  type BoxProgress,
  type LaneHolder,
  type BoxReport,
  type RolloutPort,
  type StoredRollout,
} from '../../domain/rollout.js'
import type { IntentRecord } from '../../domain/schemas.js'
import { errorMessage } from '../../errors.js'
import { schemaErrors } from '../schema-errors.js'
import { b64, type Gateway, prefixEnd } from './gateway.js'
import { PrefixWatch, WATCH_RETRY_FIRST_MS, WATCH_RETRY_MAX_MS, WATCH_SILENCE_MS } from './watch.js'

export function rolloutPrefixFor(prefix: string): string {
  return prefix.endsWith('/intents/')
    ? `${prefix.slice(0, -'intents/'.length)}rollouts/`
    : `${prefix.slice(0, -1)}-rollouts/`
}

const Kv = Type.Object({
  key: Type.String(),
  value: Type.Optional(Type.String()),
  mod_revision: Type.Optional(Type.String()),
})
const Range = Type.Object({
  header: Type.Optional(Type.Object({ revision: Type.Optional(Type.String()) })),
  kvs: Type.Optional(Type.Array(Kv)),
  count: Type.Optional(Type.String()),
  more: Type.Optional(Type.Boolean()),
})
const Txn = Type.Object({
  succeeded: Type.Optional(Type.Boolean()),
  responses: Type.Optional(Type.Array(Type.Object({ response_range: Type.Optional(Range) }))),
})
/** A box's end; deferredRows and retried are absent from older builds' writes. */
const DoneValue = Type.Object({
  failedRows: Type.Integer({ minimum: 0 }),
  deferredRows: Type.Optional(Type.Integer({ minimum: 0 })),
  retried: Type.Optional(Type.Integer({ minimum: 0 })),
  at: Type.String(),
})

/** The changed record's revision, padded, so events sort as they happened. */
function eventSeq(rev: string): string {
  return rev.padStart(20, '0')
}

export interface EtcdRolloutsOptions {
  gateway: Gateway
  prefix: string
  /** A rollout that ends records its intent here. */
  intentPrefix: string
  boxPrefix: string
  logger: Logger | undefined
  clock: Clock
  /** Watch backoff jitter, in [0, 1); Math.random when unset. */
  random?: () => number
}

const utf8 = new TextDecoder('utf-8', { fatal: true })
const text = (s: string | undefined): string => utf8.decode(Buffer.from(s ?? '', 'base64'))

export class EtcdRollouts implements RolloutPort {
  readonly #o: EtcdRolloutsOptions
  readonly #watch: PrefixWatch

  constructor(opts: EtcdRolloutsOptions) {
    this.#o = opts
    const recordPrefix = `${opts.prefix}record/`
    this.#watch = new PrefixWatch({
      gateway: opts.gateway,
      prefix: recordPrefix,
      rangeEnd: prefixEnd(recordPrefix),
      logger: opts.logger,
      clock: opts.clock,
      random: opts.random ?? Math.random,
      retryFirstMs: WATCH_RETRY_FIRST_MS,
      retryMaxMs: WATCH_RETRY_MAX_MS,
      silenceMs: WATCH_SILENCE_MS,
    })
  }

  describe(): string {
    return this.#o.gateway.describe()
  }

  get closed(): AbortSignal {
    return this.#o.gateway.closed
  }

  #key(...parts: string[]): string {
    return `${this.#o.prefix}${parts.join('/')}`
  }

  async #range(key: string, end: string | undefined, signal: AbortSignal, extra: object = {}) {
    const body = { key: b64(key), ...(end === undefined ? {} : { range_end: end }), ...extra }
    const { value } = await this.#o.gateway.call('/v3/kv/range', body, Range, signal)
    if (value.more === true) throw new Error(`etcd: the range of ${key} came back incomplete`)
    return value
  }

  async #txn(compare: unknown[], success: unknown[], signal: AbortSignal): Promise<boolean> {
    const { value } = await this.#o.gateway.call('/v3/kv/txn', { compare, success, failure: [] }, Txn, signal)
    return value.succeeded === true
  }

  #decode(kv: Static<typeof Kv>): StoredRollout {
    const key = Buffer.from(kv.key, 'base64').toString('utf8')
    let parsed: unknown
    try {
      parsed = JSON.parse(text(kv.value))
    } catch (err) {
      throw new Error(`rollout record etcd ${key}: not JSON: ${errorMessage(err)}`, { cause: err })
    }
    if (!Value.Check(RolloutRecord, parsed))
      throw new Error(`rollout record etcd ${key}: not a rollout: ${schemaErrors(RolloutRecord, parsed)}`)
    if (key !== this.#key('record', parsed.id))
      throw new Error(`rollout record etcd ${key}: holds id ${JSON.stringify(parsed.id)}`)
    return { record: parsed, rev: kv.mod_revision ?? '0' }
  }

  /** Every rollout, sorted by id. */
  async list(signal: AbortSignal): Promise<StoredRollout[]> {
    const p = this.#key('record/')
    const value = await this.#range(p, prefixEnd(p), signal)
    return (value.kvs ?? [])
      .map((kv) => this.#decode(kv))
      .sort((a, b) => (a.record.id < b.record.id ? -1 : a.record.id > b.record.id ? 1 : 0))
  }

  async get(id: string, signal: AbortSignal): Promise<StoredRollout | undefined> {
    const kv = (await this.#range(this.#key('record', id), undefined, signal)).kvs?.[0]
    return kv === undefined ? undefined : this.#decode(kv)
  }

  /** The rollout in play and the pointer's revision ('0' when none was ever recorded). */
  async active(signal: AbortSignal): Promise<ActiveRollout> {
    const kv = (await this.#range(this.#key('active'), undefined, signal)).kvs?.[0]
    if (kv === undefined) return { pointerRev: '0', current: undefined }
    return { pointerRev: kv.mod_revision ?? '0', current: await this.get(text(kv.value), signal) }
  }

  /** Makes r the one in play if the pointer and its rollout are as read; false if either moved. */
  async create(r: RolloutRecord, seen: ActiveRollout, signal: AbortSignal, event?: RolloutEvent): Promise<boolean> {
    const pointer = b64(this.#key('active'))
    const compare: unknown[] = [{ key: pointer, target: 'MOD', result: 'EQUAL', mod_revision: seen.pointerRev }]
    if (seen.current !== undefined)
      compare.push({
        key: b64(this.#key('record', seen.current.record.id)),
        target: 'MOD',
        result: 'EQUAL',
        mod_revision: seen.current.rev,
      })
    const success = [
      { request_put: { key: b64(this.#key('record', r.id)), value: b64(`${JSON.stringify(r)}\n`) } },
      { request_put: { key: pointer, value: b64(r.id) } },
      ...this.#eventPut(r.id, '0', event),
    ]
    return this.#txn(compare, success, signal)
  }

  /** Changes a record still at rev (one wave opens, one pause lands), intent in the same txn; false if moved. */
  async update(
    s: StoredRollout,
    next: RolloutRecord,
    signal: AbortSignal,
    intent?: IntentRecord,
    event?: RolloutEvent,
  ): Promise<boolean> {
    const key = b64(this.#key('record', s.record.id))
    const success: unknown[] = [
      { request_put: { key, value: b64(`${JSON.stringify(next)}\n`) } },
      ...this.#eventPut(s.record.id, s.rev, event),
    ]
    const compare: unknown[] = [{ key, target: 'MOD', result: 'EQUAL', mod_revision: s.rev }]
    if (intent !== undefined) {
      const ikey = b64(`${this.#o.intentPrefix}${intent.id}`)
      compare.push({ key: ikey, target: 'CREATE', result: 'EQUAL', create_revision: '0' })
      success.push({ request_put: { key: ikey, value: b64(`${JSON.stringify(intent, null, 2)}\n`) } })
    }
    return this.#txn(compare, success, signal)
  }

  /** Keyed by the revision its change compares against: a change lands once, so the key is new. */
  #eventPut(id: string, rev: string, event: RolloutEvent | undefined): unknown[] {
    if (event === undefined) return []
    return [{ request_put: { key: b64(this.#key('events', id, eventSeq(rev))), value: b64(JSON.stringify(event)) } }]
  }

  /** Records an intent, aborting the rollout in play (`superseded`) in the same txn. */
  async recordIntentAborting(
    intent: IntentRecord,
    running: StoredRollout | undefined,
    signal: AbortSignal,
    event?: RolloutEvent,
  ) {
    const ikey = b64(`${this.#o.intentPrefix}${intent.id}`)
    const compare: unknown[] = [{ key: ikey, target: 'CREATE', result: 'EQUAL', create_revision: '0' }]
    const success: unknown[] = [{ request_put: { key: ikey, value: b64(`${JSON.stringify(intent, null, 2)}\n`) } }]
    if (running !== undefined) {
      const key = b64(this.#key('record', running.record.id))
      const next: RolloutRecord = {
        ...running.record,
        state: 'aborted',
        cause: 'superseded',
        reason: `superseded by intent ${intent.id}`,
      }
      compare.push({ key, target: 'MOD', result: 'EQUAL', mod_revision: running.rev })
      success.push({ request_put: { key, value: b64(`${JSON.stringify(next)}\n`) } })
      success.push(...this.#eventPut(running.record.id, running.rev, event))
    }
    return this.#txn(compare, success, signal)
  }

  /** This box starts: only while the record is at rev (open, not paused), and only once. */
  async start(s: StoredRollout, box: string, wave: number, signal: AbortSignal, lane?: LaneHolder): Promise<boolean> {
    const key = b64(this.#key('started', s.record.id, String(wave), box))
    const at = new Date(this.#o.clock.now()).toISOString()
    const compare: unknown[] = [
      { key: b64(this.#key('record', s.record.id)), target: 'MOD', result: 'EQUAL', mod_revision: s.rev },
      { key, target: 'CREATE', result: 'EQUAL', create_revision: '0' },
    ]
    const success: unknown[] = [{ request_put: { key, value: b64(JSON.stringify({ at })) } }]
    if (lane !== undefined) {
      const lkey = b64(this.#key('lane', s.record.id, String(wave), String(lane.lane)))
      compare.push({ key: lkey, target: 'MOD', result: 'EQUAL', mod_revision: lane.rev })
      success.push({ request_put: { key: lkey, value: b64(box) } })
    }
    return this.#txn(compare, success, signal)
  }

  /** A lane's last box and its key's revision ('0' when none started in it). */
  async laneHolder(id: string, wave: number, lane: number, signal: AbortSignal): Promise<LaneHolder> {
    const kv = (await this.#range(this.#key('lane', id, String(wave), String(lane)), undefined, signal)).kvs?.[0]
    return kv === undefined ? { lane, box: null, rev: '0' } : { lane, box: text(kv.value), rev: kv.mod_revision ?? '0' }
  }

  /** This box's progress as it is now: a plain put, since only this box writes its key. */
  async putProgress(id: string, box: string, wave: number, report: BoxReport, signal: AbortSignal): Promise<void> {
    const key = b64(this.#key('done', id, String(wave), box))
    const at = new Date(this.#o.clock.now()).toISOString()
    const value = { failedRows: report.failedRows, deferredRows: report.deferredRows, retried: report.retried, at }
    await this.#o.gateway.call('/v3/kv/put', { key, value: b64(JSON.stringify(value)) }, Type.Object({}), signal)
  }

  async hasStarted(id: string, box: string, wave: number, signal: AbortSignal): Promise<boolean> {
    const v = await this.#range(this.#key('started', id, String(wave), box), undefined, signal, { count_only: true })
    return Number(v.count ?? '0') > 0
  }

  async hasFinished(id: string, box: string, wave: number, signal: AbortSignal): Promise<boolean> {
    const v = await this.#range(this.#key('done', id, String(wave), box), undefined, signal, { count_only: true })
    return Number(v.count ?? '0') > 0
  }

  /** Live: its summary's lease has not expired. */
  async isLive(box: string, signal: AbortSignal): Promise<boolean> {
    const v = await this.#range(`${this.#o.boxPrefix}${box}`, undefined, signal, { count_only: true })
    return Number(v.count ?? '0') > 0
  }

  /** The progress of a wave's boxes (of all, without a wave). */
  async progress(id: string, wave: number | undefined, signal: AbortSignal): Promise<Map<string, BoxProgress>> {
    const under = (what: string) => this.#key(what, id, wave === undefined ? '' : `${wave}/`)
    const [started, done] = await Promise.all(
      ['started', 'done'].map((w) => this.#range(under(w), prefixEnd(under(w)), signal)),
    )
    const out = new Map<string, BoxProgress>()
    const boxOf = (kv: Static<typeof Kv>) => Buffer.from(kv.key, 'base64').toString('utf8').split('/').at(-1) ?? ''
    for (const kv of started?.kvs ?? []) out.set(boxOf(kv), { done: false, failedRows: 0 })
    for (const kv of done?.kvs ?? []) {
      const v: unknown = JSON.parse(text(kv.value))
      if (!Value.Check(DoneValue, v)) throw new Error(`rollout progress etcd ${boxOf(kv)}: not a box's end`)
      out.set(boxOf(kv), {
        done: true,
        failedRows: v.failedRows,
        deferredRows: v.deferredRows ?? 0,
        retried: v.retried ?? 0,
      })
    }
    return out
  }

  /** Events oldest first. */
  async events(id: string, signal: AbortSignal): Promise<RolloutEvent[]> {
    const p = this.#key('events', id, '')
    const value = await this.#range(p, prefixEnd(p), signal)
    return (value.kvs ?? []).map((kv) => {
      const key = Buffer.from(kv.key, 'base64').toString('utf8')
      let v: unknown
      try {
        v = JSON.parse(text(kv.value))
      } catch (err) {
        throw new Error(`rollout event etcd ${key}: not JSON: ${errorMessage(err)}`, { cause: err })
      }
      if (!Value.Check(RolloutEvent, v))
        throw new Error(`rollout event etcd ${key}: not an event: ${schemaErrors(RolloutEvent, v)}`)
      return v
    })
  }

  async doneCount(id: string, wave: number, signal: AbortSignal): Promise<number> {
    const p = this.#key('done', id, `${wave}/`)
    return Number((await this.#range(p, prefixEnd(p), signal, { count_only: true })).count ?? '0')
  }

  async liveBoxes(signal: AbortSignal): Promise<Set<string>> {
    const p = this.#o.boxPrefix
    const v = await this.#range(p, prefixEnd(p), signal, { keys_only: true })
    return new Set((v.kvs ?? []).map((kv) => Buffer.from(kv.key, 'base64').toString('utf8').slice(p.length)))
  }

  watch(onChange: () => void, signal: AbortSignal): void {
    this.#watch.watch(onChange, signal)
  }
}

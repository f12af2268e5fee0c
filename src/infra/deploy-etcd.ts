// The etcd deploy store (DESIGN §7): one key per intent,
// /carlos/layout/intents/<id>, over etcd's v3 JSON gateway (POST /v3/...),
// so a box needs undici and no gRPC client. It serves a fleet: every box
// reads the same records and picks the newest addressing it with the
// selection the directory store shares (domain/intent.ts).
//
// The gateway's JSON is protobuf's: keys and values are base64, int64s are
// strings, and a field at its default is left out (an empty range has no
// `kvs`, a failed txn no `succeeded`).
import type { Dispatcher } from 'undici'
import { Pool } from 'undici'
import Type, { type Static, type TSchema } from 'typebox'
import Value from 'typebox/value'
import type { Clock, DeployStore, Logger } from '../domain/ports.js'
import { systemClock } from '../domain/ports.js'
import { IntentRecord } from '../domain/schemas.js'
import { MAX_RECORD_BYTES } from './deploy-dir.js'
import { schemaErrors } from './schema-errors.js'

export const INTENT_PREFIX = '/carlos/layout/intents/'

/**
 * One request to one endpoint gets this long before the next endpoint is
 * asked (etcdctl's --command-timeout). The caller's signal (the 30 s intent
 * timeout) bounds the whole call; this bound is what leaves time in it for
 * a second endpoint when the first is stopped or cut off rather than dead.
 */
export const REQUEST_TIMEOUT_MS = 5_000

/** A dead host should cost a connect, not the whole budget (etcdctl's --dial-timeout). */
export const CONNECT_TIMEOUT_MS = 2_000

/** Watch re-establishment backoff: first delay, and the ceiling it doubles up to. */
export const WATCH_RETRY_FIRST_MS = 250
export const WATCH_RETRY_MAX_MS = 10_000

/** Far more than every record there will ever be; a guard against an endpoint that is not etcd. */
const MAX_RESPONSE_BYTES = 64 * 1024 * 1024

/** One line of the watch stream carries at most a few events of records. */
const MAX_WATCH_LINE_BYTES = 4 * 1024 * 1024

const Header = Type.Object({ revision: Type.Optional(Type.String()) })

const KeyValue = Type.Object({
  key: Type.String(),
  // Absent when the value is empty.
  value: Type.Optional(Type.String()),
  create_revision: Type.Optional(Type.String()),
  mod_revision: Type.Optional(Type.String()),
})

const RangeResponse = Type.Object({
  header: Type.Optional(Header),
  kvs: Type.Optional(Type.Array(KeyValue)),
  more: Type.Optional(Type.Boolean()),
})

const TxnResponse = Type.Object({
  header: Type.Optional(Header),
  succeeded: Type.Optional(Type.Boolean()),
  responses: Type.Optional(Type.Array(Type.Object({ response_range: Type.Optional(RangeResponse) }))),
})

const WatchLine = Type.Object({
  result: Type.Optional(
    Type.Object({
      header: Type.Optional(Header),
      created: Type.Optional(Type.Boolean()),
      canceled: Type.Optional(Type.Boolean()),
      cancel_reason: Type.Optional(Type.String()),
      events: Type.Optional(Type.Array(Type.Unknown())),
    }),
  ),
  error: Type.Optional(Type.Object({ message: Type.Optional(Type.String()) })),
})

export interface EtcdStoreOptions {
  /** Where watch breaks are logged. */
  logger?: Logger
  /** The watch's backoff timers. */
  clock?: Clock
  /** Jitter for the watch's backoff, in [0, 1). */
  random?: () => number
  requestTimeoutMs?: number
  connectTimeoutMs?: number
  watchRetryFirstMs?: number
  watchRetryMaxMs?: number
  /** The key prefix; tests give each their own. Must end in `/`. */
  prefix?: string
}

/**
 * Sent with every request: the gateway passes `Grpc-Metadata-*` headers on
 * as gRPC metadata, and this one (etcd's require-leader key) makes a member
 * that has lost its leader, one cut off from its quorum, answer "no leader"
 * at once rather than time out, and end a watch rather than hold it open
 * silently, so the call or the watch moves to another endpoint.
 */
const REQUIRE_LEADER = { 'content-type': 'application/json', 'grpc-metadata-hasleader': 'true' }

interface Endpoint {
  url: string
  /** The endpoint's path, without a trailing slash, before /v3/... (a gateway behind a proxy path). */
  base: string
  pool: Pool
}

const messageOf = (err: unknown): string => (err instanceof Error ? err.message : String(err))

const b64 = (s: string | Buffer): string => Buffer.from(s).toString('base64')

/** The key after every key that starts with prefix: the prefix with its last byte bumped. */
function prefixEnd(prefix: string): string {
  const b = Buffer.from(prefix)
  const last = b.at(-1)
  if (last === undefined || last === 0xff) throw new Error(`etcd key prefix ${JSON.stringify(prefix)} has no simple range end`)
  b[b.length - 1] = last + 1
  return b.toString('base64')
}

/** The body as text, refusing one larger than max without holding it. */
async function readCapped(body: Dispatcher.ResponseData['body'], max: number): Promise<string> {
  const chunks: Buffer[] = []
  let n = 0
  for await (const chunk of body as AsyncIterable<Buffer>) {
    n += chunk.length
    if (n > max) {
      body.destroy()
      throw new Error(`answered more than ${max} bytes`)
    }
    chunks.push(chunk)
  }
  return Buffer.concat(chunks).toString('utf8')
}

/** The gateway's error message from an error body (`{"error", "message", "code"}`), or the body's start. */
function gatewayMessage(text: string): string {
  try {
    const v = JSON.parse(text) as { message?: unknown; error?: unknown }
    if (typeof v.message === 'string' && v.message !== '') return v.message
    if (typeof v.error === 'string' && v.error !== '') return v.error
  } catch {
    // Not JSON (a proxy's page, "Not Found"): the text itself says what answered.
  }
  return JSON.stringify(text.trim().slice(0, 200))
}

const utf8 = new TextDecoder('utf-8', { fatal: true })

export class EtcdDeployStore implements DeployStore {
  readonly prefix: string
  readonly #endpoints: Endpoint[]
  readonly #rangeEnd: string
  readonly #logger: Logger | undefined
  readonly #clock: Clock
  readonly #random: () => number
  readonly #requestTimeoutMs: number
  readonly #retryFirstMs: number
  readonly #retryMaxMs: number
  /** Aborted by close(): ends every watch and wait. */
  readonly #closing = new AbortController()
  /** The requests under way, which close() aborts. */
  readonly #inflight = new Set<AbortController>()
  /** The endpoint that answered last; every call starts there, so a dead one costs one failover, not one per call. */
  #preferred = 0

  constructor(endpoints: readonly string[], opts: EtcdStoreOptions = {}) {
    if (endpoints.length === 0) throw new Error('the etcd deploy store needs at least one endpoint')
    this.prefix = opts.prefix ?? INTENT_PREFIX
    if (!this.prefix.endsWith('/')) throw new Error(`etcd key prefix ${JSON.stringify(this.prefix)} must end in "/"`)
    this.#rangeEnd = prefixEnd(this.prefix)
    this.#logger = opts.logger
    this.#clock = opts.clock ?? systemClock
    this.#random = opts.random ?? Math.random
    this.#requestTimeoutMs = opts.requestTimeoutMs ?? REQUEST_TIMEOUT_MS
    this.#retryFirstMs = opts.watchRetryFirstMs ?? WATCH_RETRY_FIRST_MS
    this.#retryMaxMs = opts.watchRetryMaxMs ?? WATCH_RETRY_MAX_MS
    const connectTimeout = opts.connectTimeoutMs ?? CONNECT_TIMEOUT_MS
    this.#endpoints = endpoints.map((url) => {
      const u = new URL(url)
      if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error(`etcd endpoint ${JSON.stringify(url)} is not http(s)`)
      // A watch holds one connection for as long as it lasts; reads take the others.
      const pool = new Pool(u.origin, { connections: 4, connect: { timeout: connectTimeout } })
      return { url, base: u.pathname.replace(/\/+$/, ''), pool }
    })
  }

  describe(): string {
    return `etcd ${this.#endpoints.map((e) => e.url).join(',')}`
  }

  async close(): Promise<void> {
    if (this.#closing.signal.aborted) return
    const closed = new Error('the etcd deploy store is closed')
    this.#closing.abort(closed)
    for (const ac of this.#inflight) ac.abort(closed)
    await Promise.all(this.#endpoints.map((e) => e.pool.close()))
  }

  async list(signal: AbortSignal): Promise<IntentRecord[]> {
    // Linearizable (the default): the read goes through the leader, so a
    // member cut off from its quorum answers an error, never an old intent.
    const { value, url } = await this.#call('/v3/kv/range', { key: b64(this.prefix), range_end: this.#rangeEnd }, RangeResponse, signal)
    if (value.more === true) throw new Error(`deploy store etcd ${url}: the range of ${this.prefix} came back incomplete`)
    const records = (value.kvs ?? []).map((kv) => this.#decode(kv))
    // Plain code-unit order, the order newIntentId compares ids in.
    return records.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
  }

  /** One key-value as a record; any fault of it throws naming the key, so the operator can say what to fix. */
  #decode(kv: Static<typeof KeyValue>): IntentRecord {
    const key = Buffer.from(kv.key, 'base64').toString('utf8')
    const bad = (why: string, cause?: unknown) => new Error(`intent record etcd ${key}: ${why}`, { cause })
    const id = key.slice(this.prefix.length)
    if (!Value.Check(IntentRecord.properties.id, id)) throw bad(`the key is not ${this.prefix}<id> (an id is [A-Za-z0-9._-], 1 to 128 long)`)
    const raw = Buffer.from(kv.value ?? '', 'base64')
    if (raw.length > MAX_RECORD_BYTES) throw bad(`${raw.length} bytes, over the ${MAX_RECORD_BYTES}-byte limit of a record`)
    let value: unknown
    try {
      value = JSON.parse(utf8.decode(raw))
    } catch (err) {
      throw bad(`not JSON: ${messageOf(err)}`, err)
    }
    if (!Value.Check(IntentRecord, value)) throw bad(`not an intent record: ${schemaErrors(IntentRecord, value)}`)
    // The key is the id, so two keys can never claim one id and a copied
    // value cannot pose as another record.
    if (value.id !== id) throw bad(`holds id ${JSON.stringify(value.id)}, so its key must be ${this.prefix}${value.id}`)
    return value
  }

  async record(intent: IntentRecord, signal: AbortSignal): Promise<void> {
    signal.throwIfAborted()
    if (!Value.Check(IntentRecord, intent)) throw new Error(`refusing to record an invalid intent: ${schemaErrors(IntentRecord, intent)}`)
    const key = b64(`${this.prefix}${intent.id}`)
    const value = b64(`${JSON.stringify(intent, null, 2)}\n`)
    // Put only where the key was never created; otherwise read what is
    // there. A txn that landed but whose answer was lost is asked again on
    // the next endpoint, and then finds its own value: that is a success,
    // not another recorder's intent.
    const txn = {
      compare: [{ key, target: 'CREATE', result: 'EQUAL', create_revision: '0' }],
      success: [{ request_put: { key, value } }],
      failure: [{ request_range: { key } }],
    }
    const { value: res, url } = await this.#call('/v3/kv/txn', txn, TxnResponse, signal)
    if (res.succeeded === true) return
    const existing = res.responses?.[0]?.response_range?.kvs?.[0]?.value
    if (existing === value) return
    throw new Error(`intent ${intent.id} is already recorded (etcd ${url} key ${this.prefix}${intent.id}); refusing to overwrite it`)
  }

  /**
   * Asks each endpoint in turn, from the one that answered last, until one
   * answers: a dead, stopped or cut-off endpoint moves the call to the next.
   * Throws naming every endpoint's failure when none answers, or the
   * caller's reason when its signal ends the call.
   */
  async #call<S extends TSchema>(path: string, body: unknown, schema: S, signal: AbortSignal): Promise<{ value: Static<S>; url: string }> {
    signal.throwIfAborted()
    this.#closing.signal.throwIfAborted()
    const json = JSON.stringify(body)
    const failures: string[] = []
    const n = this.#endpoints.length
    const first = this.#preferred
    for (let k = 0; k < n; k++) {
      const i = (first + k) % n
      const ep = this.#endpoints[i]
      if (ep === undefined) continue
      const attempt = this.#attempt(signal)
      try {
        const res = await ep.pool.request({
          method: 'POST',
          path: `${ep.base}${path}`,
          headers: REQUIRE_LEADER,
          body: json,
          signal: attempt.signal,
        })
        const text = await readCapped(res.body, MAX_RESPONSE_BYTES)
        if (res.statusCode !== 200) throw new Error(`answered HTTP ${res.statusCode} to ${path}: ${gatewayMessage(text)}`)
        let value: unknown
        try {
          value = JSON.parse(text)
        } catch (err) {
          throw new Error(`answered ${path} with something that is not JSON: ${messageOf(err)}`, { cause: err })
        }
        if (!Value.Check(schema, value)) throw new Error(`answered ${path} with something that is not etcd's: ${schemaErrors(schema, value)}`)
        this.#preferred = i
        return { value, url: ep.url }
      } catch (err) {
        if (signal.aborted) throw signal.reason
        this.#closing.signal.throwIfAborted()
        failures.push(`${ep.url}: ${attempt.signal.aborted ? `no answer within ${this.#requestTimeoutMs} ms` : messageOf(err)}`)
      } finally {
        attempt.done()
      }
    }
    throw new Error(`deploy store etcd: no endpoint answered: ${failures.join('; ')}`)
  }

  /**
   * The signal of one request to one endpoint: aborted by the caller's
   * signal, by close(), or after the request bound. Built by hand and undone
   * when the request ends, rather than with AbortSignal.any over the store's
   * long-lived close signal, which would keep every request's signal alive
   * as long as the store.
   */
  #attempt(caller: AbortSignal): { signal: AbortSignal; done: () => void } {
    const ac = new AbortController()
    const onAbort = () => ac.abort(caller.reason)
    caller.addEventListener('abort', onAbort, { once: true })
    const timer = setTimeout(() => ac.abort(new Error(`no answer within ${this.#requestTimeoutMs} ms`)), this.#requestTimeoutMs)
    timer.unref()
    this.#inflight.add(ac)
    return {
      signal: ac.signal,
      done: () => {
        clearTimeout(timer)
        caller.removeEventListener('abort', onAbort)
        this.#inflight.delete(ac)
      },
    }
  }

  /**
   * Watches the prefix from the endpoint that answered last. onChange is
   * called on every event, and also when a watch is (re)established or
   * breaks: what changed while no watch was up is then read at once, by
   * the poll the agent runs anyway. A broken watch is re-established with
   * backoff on the next endpoint until signal aborts or the store closes.
   */
  watch(onChange: () => void, signal: AbortSignal): void {
    const stop = AbortSignal.any([signal, this.#closing.signal])
    const notify = (): void => {
      try {
        onChange()
      } catch (err) {
        this.#logger?.error({ err, store: this.describe() }, 'etcd deploy store: the watch callback threw')
      }
    }
    this.#watchLoop(notify, stop).catch((err: unknown) => {
      this.#logger?.error({ err, store: this.describe() }, 'etcd deploy store: the watch stopped; the agent polls only')
    })
  }

  async #watchLoop(notify: () => void, stop: AbortSignal): Promise<void> {
    let failures = 0
    let lastLogged = ''
    let i = this.#preferred
    while (!stop.aborted) {
      const ep = this.#endpoints[i % this.#endpoints.length]
      if (ep === undefined) return
      const r = await this.#watchOnce(ep, notify, stop)
      if (stop.aborted) return
      if (r.created) {
        failures = 0
        lastLogged = ''
        // The watch was up and is gone: what lands before the next one is
        // up is found by reading now, and by the polls meanwhile.
        notify()
      }
      failures++
      const cap = Math.min(this.#retryMaxMs, this.#retryFirstMs * 2 ** Math.min(failures - 1, 30))
      // Half fixed, half random: a fleet that lost its etcd at once does not come back in step.
      const wait = Math.round(cap / 2 + (this.#random() * cap) / 2)
      const why = `${ep.url}: ${r.why}`
      if (r.created || why !== lastLogged) {
        this.#logger?.warn(
          { store: this.describe(), endpoint: ep.url, err: r.why, retryMs: wait, failures },
          `etcd deploy store: watch ${r.created ? 'broke' : 'not established'} on ${why}; polling until it is re-established (next try in ${wait} ms)`,
        )
        lastLogged = why
      }
      i = (i + 1) % this.#endpoints.length
      await this.#sleep(wait, stop)
    }
  }

  /** One watch stream, to its end; answers whether it was established and why it ended. */
  async #watchOnce(ep: Endpoint, notify: () => void, stop: AbortSignal): Promise<{ created: boolean; why: string }> {
    const ac = new AbortController()
    const onStop = () => ac.abort(stop.reason)
    stop.addEventListener('abort', onStop, { once: true })
    // Until etcd says the watch is created, the attempt has the request bound.
    const notCreated = this.#clock.setTimer(this.#requestTimeoutMs, () => ac.abort(new Error(`no watch within ${this.#requestTimeoutMs} ms`)))
    let created = false
    try {
      const res = await ep.pool.request({
        method: 'POST',
        path: `${ep.base}/v3/watch`,
        headers: REQUIRE_LEADER,
        body: JSON.stringify({ create_request: { key: b64(this.prefix), range_end: this.#rangeEnd } }),
        signal: ac.signal,
        // The stream is quiet for as long as nobody records an intent.
        bodyTimeout: 0,
      })
      if (res.statusCode !== 200) {
        const text = await readCapped(res.body, MAX_RESPONSE_BYTES)
        return { created, why: `answered HTTP ${res.statusCode} to /v3/watch: ${gatewayMessage(text)}` }
      }
      /** Acts on one message; answers why the watch ended, if it did. */
      const onLine = (line: string): string | undefined => {
        const said = this.#watchLine(line)
        if (said.created && !created) {
          created = true
          notCreated()
          this.#preferred = this.#endpoints.indexOf(ep)
          this.#logger?.info({ store: this.describe(), endpoint: ep.url }, `etcd deploy store: watching ${this.prefix} on ${ep.url}`)
          // Whatever landed before the watch began is found by reading now.
          notify()
        }
        if (said.events) {
          // Records are an operator's act, rare enough to log each one seen.
          this.#logger?.info(
            { store: this.describe(), endpoint: ep.url, revision: said.revision },
            `etcd deploy store: a record changed under ${this.prefix} (revision ${said.revision ?? '?'}); reading the intent now`,
          )
          notify()
        }
        return said.why
      }
      let buf = ''
      for await (const chunk of res.body.setEncoding('utf8') as AsyncIterable<string>) {
        buf += chunk
        let nl: number
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl).trim()
          buf = buf.slice(nl + 1)
          const why = line === '' ? undefined : onLine(line)
          if (why !== undefined) {
            res.body.destroy()
            return { created, why }
          }
        }
        if (buf.length > MAX_WATCH_LINE_BYTES) {
          res.body.destroy()
          return { created, why: `a watch message over ${MAX_WATCH_LINE_BYTES} bytes` }
        }
      }
      // The gateway writes its last message, the error that ends a stream, without a newline.
      const last = buf.trim()
      return { created, why: (last === '' ? undefined : onLine(last)) ?? 'the stream ended' }
    } catch (err) {
      return { created, why: ac.signal.aborted && !stop.aborted ? messageOf(ac.signal.reason) : messageOf(err) }
    } finally {
      notCreated()
      stop.removeEventListener('abort', onStop)
      ac.abort()
    }
  }

  /** What one line of the watch stream says: created, events, or why the watch ended. */
  #watchLine(line: string): { created: boolean; events: boolean; revision?: string; why?: string } {
    let v: unknown
    try {
      v = JSON.parse(line)
    } catch (err) {
      return { created: false, events: false, why: `a watch message that is not JSON: ${messageOf(err)}` }
    }
    if (!Value.Check(WatchLine, v)) return { created: false, events: false, why: `a watch message that is not etcd's: ${schemaErrors(WatchLine, v)}` }
    if (v.error !== undefined) return { created: false, events: false, why: `etcd: ${v.error.message ?? 'an error without a message'}` }
    const r = v.result
    if (r === undefined) return { created: false, events: false }
    const events = (r.events?.length ?? 0) > 0
    const revision = r.header?.revision
    if (r.canceled === true) return { created: r.created === true, events, revision, why: `etcd canceled the watch${r.cancel_reason ? `: ${r.cancel_reason}` : ''}` }
    return { created: r.created === true, events, revision }
  }

  /** Waits ms on the store's clock, or until stop aborts. */
  #sleep(ms: number, stop: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (stop.aborted) return resolve()
      let cancel = (): void => undefined
      const done = () => {
        cancel()
        stop.removeEventListener('abort', done)
        resolve()
      }
      stop.addEventListener('abort', done, { once: true })
      cancel = this.#clock.setTimer(ms, done)
    })
  }
}

// An in-memory etcd for the rollout simulation, answering what the store's
// code asks its JSON gateway (src/infra/deploy-etcd/gateway.ts): one global
// revision, create/mod revisions and versions per key, ranges (prefix,
// count_only, keys_only), transactions with MOD/CREATE/VERSION/VALUE/LEASE
// compares, leases that expire on the virtual clock and take their keys, and
// watch streams from a revision. SimGateway is one process's connection to
// it, with the faults a seed draws: a request refused, answered late, or
// applied with its answer lost; a watch that drops.
import type { TSchema, Static } from 'typebox'
import { EtcdCredentials } from '../../src/infra/deploy-etcd/credentials.js'
import type { Endpoint, Gateway } from '../../src/infra/deploy-etcd/gateway.js'
import type { Dispatcher } from 'undici'
import type { ProcessClock, Rng, Scheduler } from './scheduler.js'

interface Kv {
  value: string
  create: number
  mod: number
  version: number
  lease: string
}

/** One change etcd made, as a watch and the invariants see it. */
export interface ModelEvent {
  rev: number
  type: 'PUT' | 'DELETE'
  key: string
  /** The value put, decoded (PUT only). */
  value: string
  /** The key's version after the put (1: created). */
  version: number
}

interface Lease {
  ttlMs: number
  expiresAt: number
  keys: Set<string>
}

interface Watcher {
  from: string
  to: string | undefined
  send: (line: string) => void
}

type Body = Record<string, unknown>

/** A field of a request as text: etcd's JSON gives ids and revisions as strings. */
const str = (v: unknown): string => (typeof v === 'string' || typeof v === 'number' ? String(v) : '')
const dec = (b64: unknown): string => Buffer.from(typeof b64 === 'string' ? b64 : '', 'base64').toString('utf8')
const enc = (s: string): string => Buffer.from(s).toString('base64')

/** An error etcd answers (HTTP 400 with its message), as the gateway throws it. */
class EtcdError extends Error {}

export class EtcdModel {
  rev = 1
  readonly #kvs = new Map<string, Kv>()
  readonly #leases = new Map<string, Lease>()
  #nextLease = 0x1000
  readonly history: ModelEvent[] = []
  readonly #watchers = new Set<Watcher>()
  /** Told each transaction's changes, synchronously, as they land. */
  readonly observers: Array<(events: readonly ModelEvent[]) => void> = []
  readonly #s: Scheduler

  constructor(s: Scheduler) {
    this.#s = s
  }

  get(key: string): { value: string; create: number; mod: number; version: number } | undefined {
    const kv = this.#kvs.get(key)
    return kv === undefined ? undefined : { value: dec(kv.value), create: kv.create, mod: kv.mod, version: kv.version }
  }

  /** The keys under prefix, sorted. */
  keys(prefix: string): string[] {
    return [...this.#kvs.keys()].filter((k) => k.startsWith(prefix)).sort()
  }

  #header() {
    return { revision: String(this.rev), cluster_id: '7' }
  }

  /** What one request to /v3/... answers; throws what etcd would refuse with. */
  serve(path: string, body: Body): unknown {
    switch (path) {
      case '/v3/kv/range':
        return this.#range(body)
      case '/v3/kv/txn':
        return this.#txn(body)
      case '/v3/kv/put':
        return { header: this.#header(), ...this.#apply([{ request_put: body }]) }
      case '/v3/kv/deleterange':
        return { header: this.#header(), ...this.#apply([{ request_delete_range: body }]) }
      case '/v3/lease/grant':
        return this.#grant(body)
      case '/v3/lease/keepalive':
        return this.#keepalive(body)
      case '/v3/lease/revoke':
        return this.#revoke(body)
      default:
        throw new EtcdError(`Not Implemented: ${path}`)
    }
  }

  #inRange(k: string, from: string, to: string | undefined): boolean {
    return to === undefined ? k === from : to === '\0' ? k >= from : k >= from && k < to
  }

  #rangeKvs(body: Body) {
    const from = dec(body.key)
    const to = body.range_end === undefined ? undefined : dec(body.range_end)
    if (to === undefined) {
      const kv = this.#kvs.get(from)
      return kv === undefined ? [] : [[from, kv] as const]
    }
    return [...this.#kvs].filter(([k]) => this.#inRange(k, from, to)).sort(([a], [b]) => (a < b ? -1 : 1))
  }

  #range(body: Body) {
    const found = this.#rangeKvs(body)
    const count = found.length
    if (body.count_only === true) return { header: this.#header(), ...(count > 0 ? { count: String(count) } : {}) }
    const kvs = found.map(([k, kv]) => ({
      key: enc(k),
      create_revision: String(kv.create),
      mod_revision: String(kv.mod),
      version: String(kv.version),
      ...(body.keys_only === true || kv.value === '' ? {} : { value: kv.value }),
      ...(kv.lease === '0' ? {} : { lease: kv.lease }),
    }))
    return { header: this.#header(), ...(count > 0 ? { kvs, count: String(count) } : {}) }
  }

  #compare(c: Body): boolean {
    const kv = this.#kvs.get(dec(c.key))
    const target = c.target ?? 'VERSION'
    const result = c.result ?? 'EQUAL'
    let have: number | string
    let want: number | string
    if (target === 'VALUE') {
      if (kv === undefined) return false
      have = kv.value
      want = typeof c.value === 'string' ? c.value : ''
    } else {
      const field = { MOD: 'mod_revision', CREATE: 'create_revision', VERSION: 'version', LEASE: 'lease' }[
        target as string
      ]
      if (field === undefined) throw new EtcdError(`etcdserver: unknown compare target ${str(target)}`)
      have =
        kv === undefined
          ? 0
          : ({ MOD: kv.mod, CREATE: kv.create, VERSION: kv.version, LEASE: Number(kv.lease) }[target as string] ?? 0)
      want = Number(c[field] ?? 0)
    }
    if (result === 'EQUAL') return have === want
    if (result === 'NOT_EQUAL') return have !== want
    if (result === 'GREATER') return have > want
    if (result === 'LESS') return have < want
    throw new EtcdError(`etcdserver: unknown compare result ${str(result)}`)
  }

  #txn(body: Body) {
    const compare = (body.compare ?? []) as Body[]
    const ok = compare.every((c) => this.#compare(c))
    const ops = ((ok ? body.success : body.failure) ?? []) as Body[]
    const applied = this.#apply(ops)
    return { header: this.#header(), ...(ok ? { succeeded: true } : {}), ...applied }
  }

  /** The ops of one transaction at one revision (a write bumps it once); a put on an unknown lease refuses all. */
  #apply(ops: Body[]): { responses: unknown[] } {
    for (const op of ops) {
      const put = op.request_put as Body | undefined
      if (put?.lease !== undefined && put.lease !== '0' && !this.#leases.has(str(put.lease)))
        throw new EtcdError('etcdserver: requested lease not found')
    }
    const writes = ops.some((op) => op.request_put !== undefined || op.request_delete_range !== undefined)
    const rev = writes ? this.rev + 1 : this.rev
    const events: ModelEvent[] = []
    const responses = ops.map((op) => {
      if (op.request_range !== undefined) return { response_range: this.#range(op.request_range as Body) }
      if (op.request_put !== undefined) {
        events.push(this.#put(op.request_put as Body, rev))
        return { response_put: {} }
      }
      if (op.request_delete_range !== undefined) {
        const gone = this.#rangeKvs(op.request_delete_range as Body).map(([k]) => k)
        for (const k of gone) events.push(this.#delete(k, rev))
        return { response_delete_range: gone.length > 0 ? { deleted: String(gone.length) } : {} }
      }
      throw new EtcdError('etcdserver: an empty op')
    })
    if (writes) this.rev = rev
    this.#told(events)
    return { responses }
  }

  #put(p: Body, rev: number): ModelEvent {
    const key = dec(p.key)
    const before = this.#kvs.get(key)
    const lease = p.lease === undefined ? '0' : str(p.lease)
    if (before !== undefined && before.lease !== '0') this.#leases.get(before.lease)?.keys.delete(key)
    const kv: Kv = {
      value: typeof p.value === 'string' ? p.value : '',
      create: before?.create ?? rev,
      mod: rev,
      version: (before?.version ?? 0) + 1,
      lease,
    }
    this.#kvs.set(key, kv)
    if (lease !== '0') this.#leases.get(lease)?.keys.add(key)
    return { rev, type: 'PUT', key, value: dec(kv.value), version: kv.version }
  }

  #delete(key: string, rev: number): ModelEvent {
    const kv = this.#kvs.get(key)
    if (kv !== undefined && kv.lease !== '0') this.#leases.get(kv.lease)?.keys.delete(key)
    this.#kvs.delete(key)
    return { rev, type: 'DELETE', key, value: '', version: 0 }
  }

  #told(events: ModelEvent[]): void {
    if (events.length === 0) return
    this.history.push(...events)
    for (const o of this.observers) o(events)
    for (const w of this.#watchers) {
      const mine = events.filter((e) => this.#inRange(e.key, w.from, w.to))
      if (mine.length > 0) w.send(eventsLine(mine, this.rev))
    }
  }

  #grant(body: Body) {
    const ttlS = Number(body.TTL ?? 0)
    const id = String(this.#nextLease++)
    const lease: Lease = { ttlMs: ttlS * 1000, expiresAt: this.#s.now + ttlS * 1000, keys: new Set() }
    this.#leases.set(id, lease)
    this.#expireAt(id, lease)
    return { header: this.#header(), ID: id, TTL: String(ttlS) }
  }

  #expireAt(id: string, lease: Lease): void {
    this.#s.setTimer(
      lease.expiresAt - this.#s.now,
      () => {
        if (this.#leases.get(id) !== lease) return
        if (lease.expiresAt > this.#s.now) return this.#expireAt(id, lease)
        this.#end(id)
      },
      `etcd: lease ${id} due`,
    )
  }

  #end(id: string): void {
    const lease = this.#leases.get(id)
    if (lease === undefined) return
    this.#leases.delete(id)
    const keys = [...lease.keys].sort()
    if (keys.length === 0) return
    const rev = this.rev + 1
    const events = keys.map((k) => this.#delete(k, rev))
    this.rev = rev
    this.#told(events)
  }

  #keepalive(body: Body) {
    const id = String(body.ID)
    const lease = this.#leases.get(id)
    if (lease === undefined) return { result: { header: this.#header(), ID: id } }
    lease.expiresAt = this.#s.now + lease.ttlMs
    return { result: { header: this.#header(), ID: id, TTL: String(lease.ttlMs / 1000) } }
  }

  #revoke(body: Body) {
    const id = String(body.ID)
    if (!this.#leases.has(id)) throw new EtcdError('etcdserver: requested lease not found')
    this.#end(id)
    return { header: this.#header() }
  }

  /**
   * A watch of [from, to) from start (a revision, or now when undefined):
   * the created line, what landed since start, then each change as it lands.
   * Answers the stop.
   */
  watch(from: string, to: string | undefined, start: number | undefined, send: (line: string) => void): () => void {
    send(JSON.stringify({ result: { header: this.#header(), created: true } }))
    if (start !== undefined) {
      const since = this.history.filter((e) => e.rev >= start && this.#inRange(e.key, from, to))
      for (const e of since) send(eventsLine([e], e.rev))
    }
    const w: Watcher = { from, to, send }
    this.#watchers.add(w)
    return () => this.#watchers.delete(w)
  }
}

function eventsLine(events: readonly ModelEvent[], rev: number): string {
  return JSON.stringify({
    result: {
      header: { revision: String(rev) },
      events: events.map((e) => ({
        ...(e.type === 'DELETE' ? { type: 'DELETE' } : {}),
        kv: { key: enc(e.key), mod_revision: String(e.rev) },
      })),
    },
  })
}

/** How often a seed's network misbehaves, per request; all zero is a quiet network. */
export interface NetFaults {
  /** Refused before etcd saw it (a member down, a connection reset). */
  fail: number
  /** Applied, but the answer never came: the caller's request bound ends it. */
  lost: number
  /** Answered after a delay (up to lateMs). */
  late: number
  lateMs: number
  /** A watch stream ends, per line sent. */
  watchDrop: number
}

export const QUIET_NET: NetFaults = { fail: 0, lost: 0, late: 0, lateMs: 0, watchDrop: 0 }

/**
 * One process's gateway to the model: the store's code calls it as it calls
 * EtcdGateway. Answers come on the process's clock (a killed process hears
 * nothing more and writes nothing more); a quiet request is answered in the
 * same step.
 */
export class SimGateway implements Gateway {
  readonly endpoints: readonly Endpoint[]
  readonly requestTimeoutMs = 5_000
  readonly credentials = EtcdCredentials.none()
  readonly preferred = 0
  readonly #closing = new AbortController()
  readonly #model: EtcdModel
  readonly #clock: ProcessClock
  readonly #rng: Rng
  /** The seed's faults, read at each request (the world turns them off once every fault is fixed). */
  readonly net: () => NetFaults
  /** Told each request (the trace). */
  trace: ((line: string) => void) | undefined

  constructor(model: EtcdModel, clock: ProcessClock, rng: Rng, net: () => NetFaults, name: string) {
    this.#model = model
    this.#clock = clock
    this.#rng = rng
    this.net = net
    this.endpoints = [{ url: `http://${name}.etcd.sim:2379`, base: '', pool: undefined as never }]
  }

  describe(): string {
    return 'etcd (simulated)'
  }

  get closed(): AbortSignal {
    return this.#closing.signal
  }

  prefer(): void {}

  close(): Promise<void> {
    this.#closing.abort(new Error('the etcd deploy store is closed'))
    return Promise.resolve()
  }

  headers(): Promise<{ headers: Record<string, string>; token: string | undefined }> {
    return Promise.resolve({ headers: {}, token: undefined })
  }

  refusedToken(): void {}

  /** After ms on this process's clock, or at once; rejects when signal aborts first. */
  #after<T>(ms: number, signal: AbortSignal, what: string, fn: () => T): Promise<T> {
    if (this.#clock.dead) return new Promise(() => undefined)
    if (ms <= 0 && !signal.aborted) {
      try {
        return Promise.resolve(fn())
      } catch (err) {
        return Promise.reject(err instanceof Error ? err : new Error(String(err)))
      }
    }
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => {
        cancel()
        reject(signal.reason instanceof Error ? signal.reason : new Error('aborted'))
      }
      const cancel = this.#clock.setTimer(
        ms,
        () => {
          signal.removeEventListener('abort', onAbort)
          try {
            resolve(fn())
          } catch (err) {
            reject(err instanceof Error ? err : new Error(String(err)))
          }
        },
        what,
      )
      if (signal.aborted) return onAbort()
      signal.addEventListener('abort', onAbort, { once: true })
    })
  }

  async call<S extends TSchema>(
    path: string,
    body: unknown,
    _schema: S,
    signal: AbortSignal,
  ): Promise<{ value: Static<S>; url: string }> {
    signal.throwIfAborted()
    this.#closing.signal.throwIfAborted()
    const url = this.endpoints[0]?.url ?? ''
    const net = this.net()
    const r = this.#rng.next()
    const answer = () => ({ value: this.#model.serve(path, body as Body) as Static<S>, url })
    const refuse = (why: string) => new Error(`deploy store etcd: no endpoint answered: ${url}: ${why}`)
    this.trace?.(`${path} ${JSON.stringify(body).slice(0, 160)}`)
    if (r < net.fail) return this.#after(0, signal, `${path} refused`, () => Promise.reject(refuse('ECONNRESET')))
    if (r < net.fail + net.lost) {
      // etcd applies it; the answer is lost and the request bound ends the wait.
      const applied = (() => {
        try {
          this.#model.serve(path, body as Body)
        } catch {
          // Refused by etcd: lost all the same.
        }
      })()
      void applied
      return this.#after(this.requestTimeoutMs, signal, `${path} lost`, () =>
        Promise.reject(refuse(`no answer within ${this.requestTimeoutMs} ms`)),
      )
    }
    const late = r < net.fail + net.lost + net.late ? this.#rng.int(1, Math.max(1, net.lateMs)) : 0
    return this.#after(late, signal, `${path} answered`, () => {
      try {
        return answer()
      } catch (err) {
        throw err instanceof EtcdError ? refuse(`answered HTTP 400 to ${path}: ${err.message}`) : err
      }
    })
  }

  probe(_ep: Endpoint, signal: AbortSignal): Promise<void> {
    return this.#after(0, signal, 'probe', () => undefined)
  }

  /** The watch stream: lines come on this process's clock; a drop ends it as a gateway's stream ends. */
  stream(_ep: Endpoint, path: string, body: unknown, signal: AbortSignal): Promise<Dispatcher.ResponseData> {
    if (path !== '/v3/watch') return Promise.reject(new Error(`no stream ${path}`))
    const stream = new LineStream(signal)
    const create = (body as { create_request: Body }).create_request
    return this.#after(0, signal, 'watch', () => {
      const start = create.start_revision === undefined ? undefined : Number(create.start_revision)
      const from = dec(create.key)
      const to = create.range_end === undefined ? undefined : dec(create.range_end)
      let stop = (): void => undefined
      // Lines go out in order (timers of one instant run in the order set), each as its own step.
      const send = (line: string) => {
        if (stream.ended) return
        this.#clock.setTimer(
          0,
          () => {
            if (stream.ended) return
            if (this.#rng.chance(this.net().watchDrop)) {
              stop()
              stream.end()
              return
            }
            stream.push(`${line}\n`)
          },
          'watch line',
        )
      }
      stop = this.#model.watch(from, to, start, send)
      stream.onEnd(() => stop())
      return { statusCode: 200, body: stream } as unknown as Dispatcher.ResponseData
    })
  }
}

/** A stream body the watch reads with for await: lines pushed, ended by a drop or by its signal. */
class LineStream {
  #queue: string[] = []
  #wake: (() => void) | undefined
  #ended = false
  #error: Error | undefined
  #onEnd: Array<() => void> = []

  constructor(signal: AbortSignal) {
    const abort = () => {
      this.#error = signal.reason instanceof Error ? signal.reason : new Error('aborted')
      this.end()
    }
    if (signal.aborted) abort()
    else signal.addEventListener('abort', abort, { once: true })
  }

  get ended(): boolean {
    return this.#ended
  }

  onEnd(fn: () => void): void {
    if (this.#ended) fn()
    else this.#onEnd.push(fn)
  }

  push(s: string): void {
    if (this.#ended) return
    this.#queue.push(s)
    this.#wake?.()
  }

  end(): void {
    if (this.#ended) return
    this.#ended = true
    for (const f of this.#onEnd) f()
    this.#onEnd = []
    this.#wake?.()
  }

  destroy(): void {
    this.end()
  }

  setEncoding(): this {
    return this
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<string> {
    for (;;) {
      const next = this.#queue.shift()
      if (next !== undefined) {
        yield next
        continue
      }
      if (this.#ended) {
        if (this.#error !== undefined) throw this.#error
        return
      }
      await new Promise<void>((r) => (this.#wake = r))
      this.#wake = undefined
    }
  }
}

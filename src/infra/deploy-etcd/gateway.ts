// The client of etcd's v3 JSON gateway (design §7) over undici, so a box
// needs no gRPC client: a pool per endpoint, every call a POST with base64
// keys, failing over from the endpoint that answered last.
import type { Dispatcher } from 'undici'
import { Pool } from 'undici'
import type { Static, TSchema } from 'typebox'
import { Value } from '../../domain/typebox.js'
import { errorMessage } from '../../errors.js'
import { schemaErrors } from '../schema-errors.js'
import { EtcdCredentials, isStaleTokenAnswer } from './credentials.js'
import { AuthenticateResponse } from './wire-schemas.js'

/** One request's bound on one endpoint (etcdctl's --command-timeout), short enough to leave time for a second. */
export const REQUEST_TIMEOUT_MS = 5_000

/** A dead host should cost a connect, not the whole budget (etcdctl's --dial-timeout). */
export const CONNECT_TIMEOUT_MS = 2_000

/** A first answer's bound: a stopped member still accepts TCP; a slow one is asked last. */
export const DIAL_TIMEOUT_MS = 1_000

/** Any member answers it, without a token or a leader. */
const DIAL_PATH = '/v3/maintenance/status'

/** A guard against an endpoint that is not etcd. */
export const MAX_RESPONSE_BYTES = 64 * 1024 * 1024

/**
 * etcd's require-leader key, as gRPC metadata: a member cut off from its quorum fails a call or ends a
 * watch at once, so it moves to another endpoint.
 */
const REQUIRE_LEADER = { 'content-type': 'application/json', 'grpc-metadata-hasleader': 'true' }

export interface Endpoint {
  url: string
  /** Before /v3/..., no trailing slash (a gateway behind a proxy path). */
  base: string
  pool: Pool
}

export interface GatewayOptions {
  requestTimeoutMs?: number
  connectTimeoutMs?: number
  dialTimeoutMs?: number
  credentials?: EtcdCredentials
}

class NoEndpointAnswered extends Error {
  stale = false
}

export const b64 = (s: string | Buffer): string => Buffer.from(s).toString('base64')

/** The base64 range end of prefix: its last byte bumped. */
export function prefixEnd(prefix: string): string {
  const bytes = Buffer.from(prefix)
  const last = bytes.at(-1)
  if (last === undefined || last === 0xff)
    throw new Error(`etcd key prefix ${JSON.stringify(prefix)} has no simple range end`)
  bytes[bytes.length - 1] = last + 1
  return bytes.toString('base64')
}

export async function readCapped(body: Dispatcher.ResponseData['body'], max: number): Promise<string> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of body as AsyncIterable<Buffer>) {
    size += chunk.length
    if (size > max) {
      body.destroy()
      throw new Error(`answered more than ${max} bytes`)
    }
    chunks.push(chunk)
  }
  return Buffer.concat(chunks).toString('utf8')
}

export function gatewayMessage(text: string): string {
  try {
    const body = JSON.parse(text) as { message?: unknown; error?: unknown }
    if (typeof body.message === 'string' && body.message !== '') return body.message
    if (typeof body.error === 'string' && body.error !== '') return body.error
  } catch {
    // Not JSON (a proxy's page): the text says what answered.
  }
  return JSON.stringify(text.trim().slice(0, 200))
}

/** EtcdGateway, or the rollout simulation's model of etcd. */
export type Gateway = Pick<
  EtcdGateway,
  | 'endpoints'
  | 'requestTimeoutMs'
  | 'credentials'
  | 'describe'
  | 'closed'
  | 'preferred'
  | 'prefer'
  | 'close'
  | 'call'
  | 'headers'
  | 'refusedToken'
  | 'stream'
  | 'probe'
>

export class EtcdGateway {
  readonly endpoints: readonly Endpoint[]
  readonly requestTimeoutMs: number
  readonly #closing = new AbortController()
  readonly #inflight = new Set<AbortController>()
  /** Where every call starts, so a dead endpoint costs one failover, not one per call. */
  #preferred = 0
  readonly dialTimeoutMs: number
  /** Answered, not failed since: asked without a dial. */
  readonly #heard = new Set<number>()
  /** Failed, not answered since: asked after every other. */
  readonly #silent = new Set<number>()
  readonly credentials: EtcdCredentials
  /** The probe under way to each member, which every stream on it shares. */
  readonly #probing = new Map<Endpoint, Promise<void>>()
  /** When each member last answered a probe (performance.now()). */
  readonly #probedAt = new Map<Endpoint, number>()

  constructor(urls: readonly string[], opts: GatewayOptions = {}) {
    this.requestTimeoutMs = opts.requestTimeoutMs ?? REQUEST_TIMEOUT_MS
    this.dialTimeoutMs = Math.min(opts.dialTimeoutMs ?? DIAL_TIMEOUT_MS, this.requestTimeoutMs)
    const connectTimeout = opts.connectTimeoutMs ?? CONNECT_TIMEOUT_MS
    const credentials = (this.credentials = opts.credentials ?? EtcdCredentials.none())
    this.endpoints = urls.map((url) => {
      const u = new URL(url)
      if (u.protocol !== 'http:' && u.protocol !== 'https:')
        throw new Error(`etcd endpoint ${JSON.stringify(url)} is not http(s)`)
      credentials.checkEndpoint(u)
      // A watch holds one connection for as long as it lasts; reads take the others.
      const pool = new Pool(u.origin, { connections: 4, connect: { timeout: connectTimeout, ...credentials.tls } })
      return { url, base: u.pathname.replace(/\/+$/, ''), pool }
    })
  }

  describe(): string {
    return `etcd ${this.endpoints.map((e) => e.url).join(',')}`
  }

  get closed(): AbortSignal {
    return this.#closing.signal
  }

  get preferred(): number {
    return this.#preferred
  }

  prefer(ep: Endpoint): void {
    this.#answered(this.endpoints.indexOf(ep))
  }

  #answered(i: number): void {
    this.#preferred = i
    this.#heard.add(i)
    this.#silent.delete(i)
  }

  #failed(i: number): void {
    this.#heard.delete(i)
    this.#silent.add(i)
  }

  #order(): number[] {
    const count = this.endpoints.length
    const round = Array.from({ length: count }, (_, k) => (this.#preferred + k) % count)
    return [...round.filter((i) => !this.#silent.has(i)), ...round.filter((i) => this.#silent.has(i))]
  }

  async close(): Promise<void> {
    if (this.#closing.signal.aborted) return
    const closed = new Error('the etcd deploy store is closed')
    this.#closing.abort(closed)
    for (const ac of this.#inflight) ac.abort(closed)
    await Promise.all(this.endpoints.map((e) => e.pool.close()))
  }

  /** Asks each endpoint in turn until one answers; throws naming every failure. */
  async call<S extends TSchema>(
    path: string,
    body: unknown,
    schema: S,
    signal: AbortSignal,
  ): Promise<{ value: Static<S>; url: string }> {
    const token = await this.#token(signal)
    try {
      return await this.#callWith(path, body, schema, signal, token)
    } catch (err) {
      // A token etcd forgot (expired, member restarted) is traded again once; a second refusal is real.
      if (!(err instanceof NoEndpointAnswered) || !err.stale || token === undefined) throw err
      this.credentials.forget(token)
      return await this.#callWith(path, body, schema, signal, await this.#token(signal))
    }
  }

  async headers(signal: AbortSignal): Promise<{ headers: Record<string, string>; token: string | undefined }> {
    const token = await this.#token(signal)
    return { headers: token === undefined ? REQUIRE_LEADER : { ...REQUIRE_LEADER, authorization: token }, token }
  }

  /** Forgets a token a stream was refused with, when etcd says it is stale. */
  refusedToken(token: string | undefined, why: string): void {
    if (isStaleTokenAnswer(why)) this.credentials.forget(token)
  }

  #token(signal: AbortSignal): Promise<string | undefined> {
    return this.credentials.token(async (body) => {
      const { value } = await this.#callWith('/v3/auth/authenticate', body, AuthenticateResponse, signal, undefined)
      if (value.token === undefined || value.token === '')
        throw new Error('etcd authenticated the user but gave no token: is auth enabled on the cluster?')
      return value.token
    })
  }

  async #callWith<S extends TSchema>(
    path: string,
    body: unknown,
    schema: S,
    signal: AbortSignal,
    token: string | undefined,
  ): Promise<{ value: Static<S>; url: string }> {
    signal.throwIfAborted()
    this.#closing.signal.throwIfAborted()
    const json = JSON.stringify(body)
    const failures: string[] = []
    const headers = token === undefined ? REQUIRE_LEADER : { ...REQUIRE_LEADER, authorization: token }
    let stale = false
    // A failed dial sends the endpoint to the back of the queue, asked without a dial once all others were.
    const queue = this.#order()
    for (let i = queue.shift(); i !== undefined; i = queue.shift()) {
      const ep = this.endpoints[i]
      if (ep === undefined) continue
      try {
        if (!this.#heard.has(i) && !this.#silent.has(i)) {
          const dialled = await this.#dial(ep, signal)
          if (dialled !== undefined) {
            failures.push(`${ep.url}: ${dialled} (asked again last)`)
            this.#failed(i)
            queue.push(i)
            continue
          }
        }
        const value = await this.#ask(ep, path, json, headers, schema, signal)
        this.#answered(i)
        return { value, url: ep.url }
      } catch (err) {
        if (signal.aborted) throw signal.reason
        this.#closing.signal.throwIfAborted()
        this.#failed(i)
        const said = errorMessage(err)
        if (isStaleTokenAnswer(said)) stale = true
        failures.push(`${ep.url}: ${this.credentials.explain(err, ep.url.startsWith('https:')) ?? said}`)
      }
    }
    throw Object.assign(new NoEndpointAnswered(`deploy store etcd: no endpoint answered: ${failures.join('; ')}`), {
      stale,
    })
  }

  /** A first call answered within the dial bound; answers why not, or undefined. */
  async #dial(ep: Endpoint, signal: AbortSignal): Promise<string | undefined> {
    const attempt = this.#attempt(signal, this.dialTimeoutMs)
    try {
      const res = await ep.pool.request({
        method: 'POST',
        path: `${ep.base}${DIAL_PATH}`,
        headers: REQUIRE_LEADER,
        body: '{}',
        signal: attempt.signal,
      })
      await res.body.dump()
      return undefined
    } catch (err) {
      if (signal.aborted) throw signal.reason
      this.#closing.signal.throwIfAborted()
      if (attempt.signal.aborted) return `no answer to a first call within ${this.dialTimeoutMs} ms`
      return this.credentials.explain(err, ep.url.startsWith('https:')) ?? errorMessage(err)
    } finally {
      attempt.done()
    }
  }

  async #ask<S extends TSchema>(
    ep: Endpoint,
    path: string,
    json: string,
    headers: Record<string, string>,
    schema: S,
    signal: AbortSignal,
  ): Promise<Static<S>> {
    const attempt = this.#attempt(signal, this.requestTimeoutMs)
    try {
      const res = await ep.pool.request({
        method: 'POST',
        path: `${ep.base}${path}`,
        headers,
        body: json,
        signal: attempt.signal,
      })
      const text = await readCapped(res.body, MAX_RESPONSE_BYTES)
      if (res.statusCode !== 200) throw new Error(`answered HTTP ${res.statusCode} to ${path}: ${gatewayMessage(text)}`)
      let value: unknown
      try {
        value = JSON.parse(text)
      } catch (err) {
        throw new Error(`answered ${path} with something that is not JSON: ${errorMessage(err)}`, { cause: err })
      }
      if (!Value.Check(schema, value))
        throw new Error(`answered ${path} with something that is not etcd's: ${schemaErrors(schema, value)}`)
      return value
    } catch (err) {
      if (attempt.signal.aborted && !signal.aborted && !this.#closing.signal.aborted)
        throw new Error(`no answer within ${this.requestTimeoutMs} ms`, { cause: err })
      throw err
    } finally {
      attempt.done()
    }
  }

  /** No body timeout: the watch is quiet while nobody records. */
  stream(
    ep: Endpoint,
    path: string,
    body: unknown,
    signal: AbortSignal,
    headers: Record<string, string>,
  ): Promise<Dispatcher.ResponseData> {
    return ep.pool.request({
      method: 'POST',
      path: `${ep.base}${path}`,
      headers,
      body: JSON.stringify(body),
      signal,
      bodyTimeout: 0,
    })
  }

  /**
   * A cheap linearizable read within ms: the watch's check on a quiet member. A box's streams on one member
   * share it: one probe at a time per member, and an answer stands for a third of ms. Every quiet stream of
   * every box asks one each third of its silence bound, so unshared, a fleet's idle watches alone would be
   * a steady load of reads through etcd's leader.
   */
  probe(ep: Endpoint, signal: AbortSignal, ms: number, key = '/'): Promise<void> {
    const answeredAt = this.#probedAt.get(ep)
    if (answeredAt !== undefined && performance.now() - answeredAt < ms / 3) return Promise.resolve()
    let probing = this.#probing.get(ep)
    if (probing === undefined) {
      probing = this.#probeNow(ep, ms, key)
        .then(() => void this.#probedAt.set(ep, performance.now()))
        .finally(() => this.#probing.delete(ep))
      this.#probing.set(ep, probing)
    }
    if (signal.aborted) return Promise.reject(signal.reason as Error)
    const shared = probing
    return new Promise((resolve, reject) => {
      const onAbort = () => reject(signal.reason as Error)
      signal.addEventListener('abort', onAbort, { once: true })
      shared.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort))
    })
  }

  async #probeNow(ep: Endpoint, ms: number, key: string): Promise<void> {
    const { signal, done } = this.#attempt(this.#closing.signal, ms)
    try {
      const { headers } = await this.headers(signal)
      const res = await ep.pool.request({
        method: 'POST',
        path: `${ep.base}/v3/kv/range`,
        headers,
        body: JSON.stringify({ key: b64(key), count_only: true }),
        signal,
      })
      const text = await readCapped(res.body, MAX_RESPONSE_BYTES)
      if (res.statusCode !== 200) throw new Error(`answered HTTP ${res.statusCode}: ${gatewayMessage(text)}`)
    } finally {
      done()
    }
  }

  /**
   * A request's signal, built by hand: AbortSignal.any over the gateway's close signal would keep every
   * request's signal alive as long as the gateway.
   */
  #attempt(caller: AbortSignal, ms: number): { signal: AbortSignal; done: () => void } {
    const ac = new AbortController()
    const onAbort = () => ac.abort(caller.reason)
    caller.addEventListener('abort', onAbort, { once: true })
    const timer = setTimeout(() => ac.abort(new Error(`no answer within ${ms} ms`)), ms)
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
}

// The client of etcd's v3 JSON gateway (design §7) over undici, so a box
// needs no gRPC client: a pool per endpoint, every call a POST /v3/... with
// base64 keys, failover from the endpoint that answered last (one that failed
// is asked last). What the calls mean is the store's and the watch's.
import type { Dispatcher } from 'undici'
import { Pool } from 'undici'
import type { Static, TSchema } from 'typebox'
import { Value } from '../../domain/typebox.js'
import { errorMessage } from '../../errors.js'
import { schemaErrors } from '../schema-errors.js'
import { EtcdCredentials, isStaleTokenAnswer } from './credentials.js'
import { AuthenticateResponse } from './wire-schemas.js'

/**
 * One request to one endpoint gets this long before the next endpoint is
 * asked (etcdctl's --command-timeout). The caller's signal (the 30 s intent
 * timeout) bounds the whole call; this bound is what leaves time in it for
 * a second endpoint when the first is stopped or cut off rather than dead.
 */
export const REQUEST_TIMEOUT_MS = 5_000

/** A dead host should cost a connect, not the whole budget (etcdctl's --dial-timeout). */
export const CONNECT_TIMEOUT_MS = 2_000

/**
 * How long an endpoint not yet heard from (or failed since) has to answer a
 * first call before a request goes to it: a stopped member still completes a
 * TCP connect, so only this keeps a short CLI command from waiting a whole
 * request bound on it. A slower one is asked last, never dropped.
 */
export const DIAL_TIMEOUT_MS = 1_000

/** The dial: a call any member answers without a token or a leader; any HTTP answer is one. */
const DIAL_PATH = '/v3/maintenance/status'

/** Far more than every record there will ever be; a guard against an endpoint that is not etcd. */
export const MAX_RESPONSE_BYTES = 64 * 1024 * 1024

/**
 * Sent with every request: the gateway passes `Grpc-Metadata-*` headers on
 * as gRPC metadata, and this one (etcd's require-leader key) makes a member
 * that has lost its leader, one cut off from its quorum, answer "no leader"
 * at once rather than time out, and end a watch rather than hold it open
 * silently, so the call or the watch moves to another endpoint.
 */
const REQUIRE_LEADER = { 'content-type': 'application/json', 'grpc-metadata-hasleader': 'true' }

export interface Endpoint {
  url: string
  /** The endpoint's path, without a trailing slash, before /v3/... (a gateway behind a proxy path). */
  base: string
  pool: Pool
}

export interface GatewayOptions {
  requestTimeoutMs?: number
  connectTimeoutMs?: number
  dialTimeoutMs?: number
  /** TLS files and user; default none (plain http, no token). */
  credentials?: EtcdCredentials
}

/** Why no endpoint answered; stale says etcd refused the token the call carried. */
class NoEndpointAnswered extends Error {
  stale = false
}

/** A key or value as the gateway takes it. */
export const b64 = (s: string | Buffer): string => Buffer.from(s).toString('base64')

/** The key after every key that starts with prefix, in base64: the prefix with its last byte bumped. */
export function prefixEnd(prefix: string): string {
  const bytes = Buffer.from(prefix)
  const last = bytes.at(-1)
  if (last === undefined || last === 0xff)
    throw new Error(`etcd key prefix ${JSON.stringify(prefix)} has no simple range end`)
  bytes[bytes.length - 1] = last + 1
  return bytes.toString('base64')
}

/** The body as text, refusing one larger than max without holding it. */
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

/** The gateway's error message from an error body (`{"error", "message", "code"}`), or the body's start. */
export function gatewayMessage(text: string): string {
  try {
    const body = JSON.parse(text) as { message?: unknown; error?: unknown }
    if (typeof body.message === 'string' && body.message !== '') return body.message
    if (typeof body.error === 'string' && body.error !== '') return body.error
  } catch {
    // Not JSON (a proxy's page, "Not Found"): the text itself says what answered.
  }
  return JSON.stringify(text.trim().slice(0, 200))
}

/**
 * What the store, the boxes, the rollouts and the watch use of a gateway: the
 * EtcdGateway below, or a stand-in that answers from a model of etcd (the
 * deterministic simulation of the rollout protocol).
 */
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
  /** Aborted by close(): ends every watch and wait. */
  readonly #closing = new AbortController()
  /** The requests under way, which close() aborts. */
  readonly #inflight = new Set<AbortController>()
  /** The endpoint that answered last; every call starts there, so a dead one costs one failover, not one per call. */
  #preferred = 0
  readonly dialTimeoutMs: number
  /** Endpoints that answered and have not failed since: asked without a dial. */
  readonly #heard = new Set<number>()
  /** Endpoints that failed a dial or a request and have not answered since: asked after every other. */
  readonly #silent = new Set<number>()
  readonly credentials: EtcdCredentials

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

  /** Aborted once the gateway is closed. */
  get closed(): AbortSignal {
    return this.#closing.signal
  }

  /** The index of the endpoint that answered last: where a call or a watch starts. */
  get preferred(): number {
    return this.#preferred
  }

  /** Makes ep the endpoint every next call starts at (it has just answered). */
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

  /** The endpoints in the order a call asks them: from the preferred one round, the silent ones last. */
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

  /**
   * Asks each endpoint in turn, from the one that answered last, until one
   * answers: a dead, stopped or cut-off endpoint moves the call to the next.
   * Throws naming every endpoint's failure when none answers, or the
   * caller's reason when its signal ends the call.
   */
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
      // A token etcd no longer knows (expired, or its member restarted) is
      // traded again, once: a second refusal is a real one.
      if (!(err instanceof NoEndpointAnswered) || !err.stale || token === undefined) throw err
      this.credentials.forget(token)
      return await this.#callWith(path, body, schema, signal, await this.#token(signal))
    }
  }

  /** The headers of a call or a stream: the token's when the credentials name a user. */
  async headers(signal: AbortSignal): Promise<{ headers: Record<string, string>; token: string | undefined }> {
    const token = await this.#token(signal)
    return { headers: token === undefined ? REQUIRE_LEADER : { ...REQUIRE_LEADER, authorization: token }, token }
  }

  /** Forgets a token a stream was refused with, when etcd's words say it is stale. */
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
    // An endpoint that fails its dial goes to the back of this call's queue, now silent: asked, without a
    // dial, once every other endpoint has been.
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

  /**
   * The dial of an endpoint not heard from: a first call answered (with any
   * status) within the dial bound. Answers why it was not, or undefined;
   * throws the caller's reason when its signal ends it.
   */
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

  /** One request to one endpoint within the request bound: its checked answer, or why not. */
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

  /**
   * Opens a stream on one endpoint (the watch), with no body timeout: the
   * stream is quiet for as long as nobody records an intent. The caller
   * reads the status and the body, and its signal ends the stream.
   */
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
   * One cheap linearizable read on one endpoint (a count of the key), within
   * ms: how the watch asks a quiet stream's member whether it still answers.
   */
  async probe(ep: Endpoint, signal: AbortSignal, ms: number, key = '/'): Promise<void> {
    const { headers } = await this.headers(signal)
    const res = await ep.pool.request({
      method: 'POST',
      path: `${ep.base}/v3/kv/range`,
      headers,
      body: JSON.stringify({ key: b64(key), count_only: true }),
      signal: AbortSignal.any([signal, AbortSignal.timeout(ms)]),
    })
    const text = await readCapped(res.body, MAX_RESPONSE_BYTES)
    if (res.statusCode !== 200) throw new Error(`answered HTTP ${res.statusCode}: ${gatewayMessage(text)}`)
  }

  /**
   * The signal of one request to one endpoint: aborted by the caller's
   * signal, by close(), or after ms (the dial or the request bound). Built by hand and undone
   * when the request ends, rather than with AbortSignal.any over the
   * gateway's long-lived close signal, which would keep every request's
   * signal alive as long as the gateway.
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

// A reference activator for the end-to-end tests: a small real HTTP server
// that keeps layoutd's side of the contract (design §6) the way a real
// activator would. It claims every wake (`POST /wakes/:host`) before it
// "starts" an instance, releases the claim when the instance sleeps, sends
// its whole awake set at its start (`PUT /wakes`), and honours layoutd's
// stop requests (`POST /instances/:host/stop`) by stopping the instance
// and releasing its claim.
//
// Everything it does to one host happens in that host's own queue, as in
// a real activator, where one instance is never started and stopped at
// once: a stop that arrives while an instance is starting waits for it to
// be up, then stops it.
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { Pool } from 'undici'
import type { WakeGrant, WakeRefusal, WakeSet } from '../../src/agent-api.js'

export type Claim = { status: 200; grant: WakeGrant } | { status: 409; refusal: WakeRefusal }

export interface StopRequest {
  host: string
  /** Date.now() when it arrived. */
  at: number
}

export class ReferenceActivator {
  readonly url: string
  /** The instances it runs, with the paths each woke at. */
  readonly running = new Map<string, WakeGrant>()
  /** Every stop request layoutd sent, in order. */
  readonly stops: StopRequest[] = []
  /** Answers other than 200/204/409 from layoutd, or requests that failed: none is expected. */
  readonly errors: string[] = []
  readonly #server: http.Server
  readonly #queues = new Map<string, Promise<void>>()
  readonly #stopWaiters = new Map<string, Array<(s: StopRequest) => void>>()
  #agent: Pool | undefined
  /** The header every claim, release and set carries: layoutd's bearer token. */
  #auth: { authorization: string } | Record<string, never> = {}

  private constructor(server: http.Server) {
    this.#server = server
    const addr = server.address() as AddressInfo
    this.url = `http://127.0.0.1:${addr.port}`
  }

  /** Listens on a free loopback port. Point it at layoutd with `connect` once layoutd listens. */
  static async start(): Promise<ReferenceActivator> {
    const server = http.createServer()
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(0, '127.0.0.1', () => resolve())
    })
    const self = new ReferenceActivator(server)
    server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => self.#handle(req, res))
    return self
  }

  /** The layoutd it claims from, and the token it was given (the agent's D/agent.token, as a real activator reads it). */
  connect(agent: { url: string; token: string }, connections = 4): void {
    this.#auth = { authorization: `Bearer ${agent.token}` }
    this.#agent = new Pool(agent.url, { connections, headersTimeout: 30_000, bodyTimeout: 30_000 })
  }

  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()))
    // layoutd's keep-alive connection would hold the close until it idles out.
    this.#server.closeAllConnections()
    await closed
    await this.#agent?.close()
  }

  #handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const m = /^\/instances\/([^/]+)\/stop$/.exec(req.url ?? '')
    if (req.method !== 'POST' || m?.[1] === undefined) {
      res.writeHead(404).end()
      return
    }
    const host = decodeURIComponent(m[1])
    const stop = { host, at: Date.now() }
    this.stops.push(stop)
    for (const w of this.#stopWaiters.get(host) ?? []) w(stop)
    this.#stopWaiters.delete(host)
    // Accepted at once; the instance stops in its queue, and layoutd waits
    // for the claim's release, not for this answer.
    req.resume()
    res.writeHead(202).end()
    this.#inQueue(host, () => this.#release(host)).catch((err: unknown) => {
      this.errors.push(`stopping ${host}: ${(err as Error).message}`)
    })
  }

  /** Resolves with the next stop request for host. */
  stopAsked(host: string): Promise<StopRequest> {
    return new Promise((resolve) => {
      const list = this.#stopWaiters.get(host) ?? []
      list.push(resolve)
      this.#stopWaiters.set(host, list)
    })
  }

  /**
   * Wakes host: claims it, and on a grant "starts" it, running `started`
   * (what the instance does as it comes up: a test checks its files there)
   * before the instance counts as up. The instance runs until it sleeps or
   * layoutd has it stopped.
   */
  wake(host: string, started?: (g: WakeGrant) => Promise<void>): Promise<Claim> {
    return this.#inQueue(host, async () => {
      const c = await this.#claim(host)
      if (c.status === 200) {
        this.running.set(host, c.grant)
        await started?.(c.grant)
      }
      return c
    })
  }

  /** The instance fell asleep: its claim is released. */
  sleep(host: string): Promise<void> {
    return this.#inQueue(host, () => this.#release(host))
  }

  /** One short life: wake, run `started`, sleep. Answers the claim. */
  cycle(host: string, started: (g: WakeGrant) => Promise<void>): Promise<Claim> {
    return this.#inQueue(host, async () => {
      const c = await this.#claim(host)
      if (c.status !== 200) return c
      this.running.set(host, c.grant)
      try {
        await started(c.grant)
      } finally {
        await this.#release(host)
      }
      return c
    })
  }

  /** What an activator sends at its own start: the whole awake set. */
  async announce(): Promise<WakeSet> {
    const res = await this.#pool().request({
      method: 'PUT',
      path: '/wakes',
      headers: { 'content-type': 'application/json', ...this.#auth },
      body: JSON.stringify({ awake: [...this.running.keys()] }),
    })
    const body = (await res.body.json()) as WakeSet
    if (res.statusCode !== 200) throw new Error(`PUT /wakes answered ${res.statusCode}: ${JSON.stringify(body)}`)
    return body
  }

  async #claim(host: string): Promise<Claim> {
    const res = await this.#pool().request({
      method: 'POST',
      path: `/wakes/${encodeURIComponent(host)}`,
      headers: this.#auth,
    })
    const body = (await res.body.json()) as WakeGrant & WakeRefusal
    if (res.statusCode === 200) return { status: 200, grant: body }
    if (res.statusCode === 409) return { status: 409, refusal: body }
    const msg = `POST /wakes/${host} answered ${res.statusCode}: ${JSON.stringify(body)}`
    this.errors.push(msg)
    throw new Error(msg)
  }

  async #release(host: string): Promise<void> {
    if (!this.running.has(host)) return
    const res = await this.#pool().request({
      method: 'DELETE',
      path: `/wakes/${encodeURIComponent(host)}`,
      headers: this.#auth,
    })
    await res.body.dump()
    if (res.statusCode !== 204) {
      this.errors.push(`DELETE /wakes/${host} answered ${res.statusCode}`)
      return
    }
    this.running.delete(host)
  }

  #pool(): Pool {
    if (this.#agent === undefined) throw new Error('the reference activator is not connected to layoutd')
    return this.#agent
  }

  /** Runs fn after everything queued for host before it. */
  #inQueue<T>(host: string, fn: () => Promise<T>): Promise<T> {
    const before = this.#queues.get(host) ?? Promise.resolve()
    const run = before.then(fn)
    const tail = run.then(
      () => undefined,
      () => undefined,
    )
    this.#queues.set(host, tail)
    void tail.then(() => {
      if (this.#queues.get(host) === tail) this.#queues.delete(host)
    })
    return run
  }
}

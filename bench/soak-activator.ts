// The soak's activator (design §6.1): claimers that wake random sleeping
// tenants through the agent's HTTP API, let each "run" for a short random
// time and release it, and a small HTTP server that honours the agent's
// stop requests. Unlike test/helpers/reference-activator.ts it outlives the
// agent it talks to: the soak kills the agent with SIGKILL at random
// moments, so a claim or a release in flight then has an unknown outcome.
// The activator keeps no guess about it; once the next agent is ready it
// sends its whole awake set (`PUT /wakes`), which ends every claim it did
// not name, and only then claims again.
//
// Every grant is handed to a check while its claim stands (the files must
// be where the grant says, and only there), and checked again just before
// its release (the pass never moves a claimed host's files).
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { setTimeout as delay } from 'node:timers/promises'
import { Pool } from 'undici'
import type { WakeGrant, WakeRefusal, WakeSet } from '../src/agent-api.js'
import { errorMessage } from '../src/errors.js'

/** Answers why a grant is wrong, or undefined when it is right. */
export type GrantCheck = (host: string, grant: WakeGrant) => string | undefined

export interface SoakActivatorOptions {
  hosts: readonly string[]
  /** The activator's own random source (seeded by the soak). */
  random: () => number
  /** How many tenants may be waking or running at once. */
  claimers: number
  /** How long a granted tenant runs, uniformly between the two, in ms. */
  runMs: readonly [number, number]
  /** The share of runs that last longer, uniformly within longRunMs: past the agent's awake grace, so it asks for their stop. */
  longRuns: number
  longRunMs: readonly [number, number]
  /** Checked at grant time. */
  atGrant: GrantCheck
  /** Checked just before the release: the files must not have moved while claimed. */
  atRelease: GrantCheck
  /** The agent's bearer token, read at each request (a restarted agent may have made it anew). */
  token?: () => string | undefined
}

export interface ActivatorCounts {
  claims: number
  grants: number
  /** Refusals by the reason's code (`in_flight`, `second_name`, `not_ready`, ...). */
  refused: Record<string, number>
  releases: number
  /** Requests cut short by a kill of the agent: their outcome is settled by the next `PUT /wakes`. */
  interrupted: number
  /** `PUT /wakes` sent after each start of the agent. */
  awakeSets: number
  /** Stop requests the agent sent (a host awake past its grace, or for its move). */
  stopsAsked: number
  /** Grants whose check failed, one line each. */
  wrongGrants: string[]
  /** Answers the contract does not allow (a status other than 200/409, 204, 200), one line each. */
  errors: string[]
}

/** The refusal a claim's answer carries, or undefined for any other body (an error envelope). */
function refusalOf(text: string): WakeRefusal | undefined {
  try {
    const body = JSON.parse(text) as Partial<WakeRefusal>
    return typeof body.code === 'string' && typeof body.host === 'string' ? (body as WakeRefusal) : undefined
  } catch {
    return undefined
  }
}

/** A promise the claimers wait on, and whether it has been let go. */
interface Latch {
  promise: Promise<void>
  open: () => void
  opened: boolean
}

function latch(): Latch {
  const l: Latch = { promise: Promise.resolve(), open: () => undefined, opened: false }
  l.promise = new Promise<void>((resolve) => {
    l.open = () => {
      l.opened = true
      resolve()
    }
  })
  return l
}

/** One tenant the activator is waking or running. */
interface Life {
  phase: 'claiming' | 'running' | 'releasing'
  grant?: WakeGrant
  /** The agent asked for a stop: the run ends at once. */
  stopAsked: boolean
  /** Ends the run early. */
  wake?: () => void
}

export class SoakActivator {
  readonly url: string
  readonly counts: ActivatorCounts = {
    claims: 0,
    grants: 0,
    refused: {},
    releases: 0,
    interrupted: 0,
    awakeSets: 0,
    stopsAsked: 0,
    wrongGrants: [],
    errors: [],
  }
  readonly #opts: SoakActivatorOptions
  readonly #server: http.Server
  readonly #lives = new Map<string, Life>()
  /** Hosts a stop request is being answered for with a release, outside any life. */
  readonly #releasing = new Set<string>()
  #pool: Pool | undefined
  /** Claims may be sent: the agent is ready and has the awake set. */
  #serving = false
  #draining = false
  #closed = false
  #workers: Promise<void>[] = []
  #resume = latch()

  private constructor(server: http.Server, opts: SoakActivatorOptions) {
    this.#server = server
    this.#opts = opts
    const addr = server.address() as AddressInfo
    this.url = `http://127.0.0.1:${addr.port}`
    server.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => this.#handleStop(req, res))
  }

  /** Listens for stop requests on a free loopback port and starts the claimers, idle until `attach`. */
  static async start(opts: SoakActivatorOptions): Promise<SoakActivator> {
    const server = http.createServer()
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(0, '127.0.0.1', () => resolve())
    })
    const self = new SoakActivator(server, opts)
    self.#workers = Array.from({ length: opts.claimers }, () => self.#claimer())
    return self
  }

  /**
   * A new agent is ready at url: send it the awake set (every claim the
   * activator is not sure of ends), stop what it says to stop, then claim
   * again. Throws when the agent does not take the set (killed meanwhile).
   */
  async attach(url: string): Promise<void> {
    const pool = new Pool(url, { connections: this.#opts.claimers + 2, headersTimeout: 30_000, bodyTimeout: 30_000 })
    this.#pool = pool
    const set = await this.#sendAwakeSet()
    // Answered just before a kill, and the kill's detach came first: this agent is gone.
    if (this.#pool !== pool) throw new Error(`the agent at ${url} went away as it took the awake set`)
    for (const s of set.stop) this.#askStop(s.host)
    this.#serving = true
    this.#resume.open()
  }

  /**
   * The agent is about to be killed: no new claim starts, and a request in
   * flight that the kill cuts short counts as interrupted, not as an error.
   */
  losing(): void {
    this.#serving = false
    // Shut the latch the claimers wait on (unless two kills came before an
    // attach and it is shut already): an open one would spin them.
    if (this.#resume.opened) this.#resume = latch()
  }

  /** The agent is gone (killed): nothing more is sent to it; requests in flight fail and count as interrupted. */
  async detach(): Promise<void> {
    this.losing()
    const pool = this.#pool
    this.#pool = undefined
    await pool?.destroy()
  }

  /**
   * Claims nothing more, ends every run now, waits for the releases, and
   * sends an empty awake set: the agent is left with no claim at all.
   */
  async drain(): Promise<void> {
    this.#draining = true
    this.#resume.open()
    for (const life of this.#lives.values()) life.wake?.()
    await Promise.all(this.#workers)
    await this.#sendAwakeSet()
  }

  /** Stops everything; a second call does nothing. */
  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    this.#draining = true
    this.#resume.open()
    for (const life of this.#lives.values()) life.wake?.()
    await Promise.all(this.#workers)
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()))
    // The agent's keep-alive connection would hold the close until it idles out.
    this.#server.closeAllConnections()
    await closed
    await this.#pool?.destroy()
  }

  /** The Authorization header of every mutation, where the agent wants a token. */
  #auth(): Record<string, string> {
    const token = this.#opts.token?.()
    return token === undefined ? {} : { authorization: `Bearer ${token}` }
  }

  async #sendAwakeSet(): Promise<WakeSet> {
    const awake = [...this.#lives].filter(([, life]) => life.phase === 'running').map(([host]) => host)
    const res = await this.#agent().request({
      method: 'PUT',
      path: '/wakes',
      headers: { 'content-type': 'application/json', ...this.#auth() },
      body: JSON.stringify({ awake }),
    })
    const text = await res.body.text()
    if (res.statusCode !== 200) throw new Error(`PUT /wakes answered ${res.statusCode}: ${text}`)
    this.counts.awakeSets++
    return JSON.parse(text) as WakeSet
  }

  #agent(): Pool {
    if (this.#pool === undefined) throw new Error('no agent attached')
    return this.#pool
  }

  /** A random host no life holds; undefined after a few tries on a busy box. */
  #pick(): string | undefined {
    const hosts = this.#opts.hosts
    for (let i = 0; i < 20; i++) {
      const h = hosts[Math.floor(this.#opts.random() * hosts.length)]
      if (h !== undefined && !this.#lives.has(h) && !this.#releasing.has(h)) return h
    }
    return undefined
  }

  #between(lo: number, hi: number): number {
    return lo + this.#opts.random() * (hi - lo)
  }

  async #claimer(): Promise<void> {
    while (!this.#draining) {
      if (!this.#serving) {
        // Never a bare await of an open latch here: that loop would starve the event loop.
        await (this.#resume.opened ? delay(50) : this.#resume.promise)
        continue
      }
      const host = this.#pick()
      if (host !== undefined) await this.#cycle(host)
      // Think time: claimers do not hammer the agent between cycles.
      await delay(this.#between(0, 200))
    }
  }

  /** One tenant's life: claim, check, run, check, release. */
  async #cycle(host: string): Promise<void> {
    const life: Life = { phase: 'claiming', stopAsked: false }
    this.#lives.set(host, life)
    try {
      let grant: WakeGrant
      try {
        const c = await this.#claim(host)
        if (c === undefined) return
        grant = c
      } catch (err) {
        this.#interrupted(`claiming ${host}`, err)
        return
      }
      life.phase = 'running'
      life.grant = grant
      const [lo, hi] = this.#opts.random() < this.#opts.longRuns ? this.#opts.longRunMs : this.#opts.runMs
      const ms = life.stopAsked || this.#draining ? 0 : this.#between(lo, hi)
      if (ms > 0) {
        const ac = new AbortController()
        life.wake = () => ac.abort()
        await delay(ms, undefined, { signal: ac.signal }).catch(() => undefined)
      }
      life.phase = 'releasing'
      const moved = this.#opts.atRelease(host, grant)
      if (moved !== undefined) this.counts.wrongGrants.push(`${host}: while claimed: ${moved}`)
      await this.#release(host)
    } finally {
      this.#lives.delete(host)
    }
  }

  /** The grant, checked; undefined when refused. Throws when the request did not complete. */
  async #claim(host: string): Promise<WakeGrant | undefined> {
    this.counts.claims++
    const res = await this.#agent().request({
      method: 'POST',
      path: `/wakes/${encodeURIComponent(host)}`,
      headers: this.#auth(),
    })
    const text = await res.body.text()
    // A refusal: 409 for good, or 503 with Retry-After while the host is not yet judged (design §6).
    const refusal = res.statusCode === 409 || res.statusCode === 503 ? refusalOf(text) : undefined
    if (refusal !== undefined) {
      this.counts.refused[refusal.code] = (this.counts.refused[refusal.code] ?? 0) + 1
      return undefined
    }
    if (res.statusCode !== 200) {
      this.counts.errors.push(`POST /wakes/${host} answered ${res.statusCode}: ${text}`)
      return undefined
    }
    const grant = JSON.parse(text) as WakeGrant
    this.counts.grants++
    const wrong = this.#opts.atGrant(host, grant)
    if (wrong !== undefined) this.counts.wrongGrants.push(`${host}: at grant: ${wrong}`)
    return grant
  }

  /**
   * DELETE /wakes/:host. With no agent attached, or when the request does
   * not complete, the release is left to the next awake set, which does
   * not name the host.
   */
  async #release(host: string): Promise<void> {
    if (this.#pool === undefined) {
      this.counts.interrupted++
      return
    }
    try {
      const res = await this.#pool.request({
        method: 'DELETE',
        path: `/wakes/${encodeURIComponent(host)}`,
        headers: this.#auth(),
      })
      const text = await res.body.text()
      if (res.statusCode === 204) this.counts.releases++
      else this.counts.errors.push(`DELETE /wakes/${host} answered ${res.statusCode}: ${text}`)
    } catch (err) {
      this.#interrupted(`releasing ${host}`, err)
    }
  }

  #interrupted(what: string, err: unknown): void {
    // Expected only around a kill: with the agent attached and serving, a
    // request that fails is a fault of its own.
    if (this.#serving && this.#pool !== undefined && !this.#closed) {
      this.counts.errors.push(`${what}: the request failed while the agent was serving: ${errorMessage(err)}`)
    }
    this.counts.interrupted++
  }

  /** A stop the agent asked for, or `PUT /wakes` named: a running tenant ends now; an unknown one is released. */
  #askStop(host: string): void {
    const life = this.#lives.get(host)
    if (life !== undefined) {
      life.stopAsked = true
      life.wake?.()
      return
    }
    if (this.#releasing.has(host) || this.#pool === undefined) return
    this.#releasing.add(host)
    void this.#release(host).finally(() => this.#releasing.delete(host))
  }

  #handleStop(req: http.IncomingMessage, res: http.ServerResponse): void {
    const m = /^\/instances\/([^/]+)\/stop$/.exec(req.url ?? '')
    req.resume()
    if (req.method !== 'POST' || m?.[1] === undefined) {
      res.writeHead(404).end()
      return
    }
    this.counts.stopsAsked++
    // Accepted at once; the agent waits for the claim's release, not for this answer.
    res.writeHead(202).end()
    this.#askStop(decodeURIComponent(m[1]))
  }
}

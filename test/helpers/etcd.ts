// A real etcd (Debian's etcd-server) for the tests: one member, or a small
// cluster, on free loopback ports and a temp data dir. A member can be
// SIGKILLed and started again on the same data dir and ports (the records
// survive, the clients' URLs stay right), and stopped with SIGSTOP to stand
// for a slow one, the pause ending only once the kernel says it is stopped;
// killing one of two leaves the other cut off from its quorum, as a
// partition does. Start-up waits for etcd's own "ready to serve" line and
// then for an answer, never on a blind sleep. No etcd on the machine is a
// failure that says how to get one: the suite never skips these tests. With
// certificates (etcd-tls.ts) a member serves https only, with
// --client-cert-auth when asked, and the helper's own requests show an
// admin client certificate; enableAuth adds users and roles and switches
// etcd's auth on, after which the helper's requests are root's, by token.
import { Agent } from 'undici'
import type { EtcdCerts, Pair } from './etcd-tls.js'
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { readFileSync } from 'node:fs'
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import type { TestContext } from 'node:test'
import { request } from 'undici'
import { errorMessage } from '../../src/errors.js'
import { freePort } from './agent-process.js'
import { trackGroup } from './child.js'
import { until } from './until.js'

/** What etcd 3.4 says once it serves clients: zap's line, or capnslog's. */
const READY_LINES = ['serving client traffic', 'ready to serve client requests']
/** A bound on giving up on a start, generous: a busy machine may take many seconds for what is quick alone. */
const START_TIMEOUT_MS = 60_000
const START_ATTEMPTS = 4
const TAIL_LINES = 40

/** The etcd binary: $ETCD_BIN, else `etcd` on PATH. Throws, saying how to install it, when there is none. */
export function etcdBinary(): string {
  const bin = process.env.ETCD_BIN ?? 'etcd'
  const r = spawnSync(bin, ['--version'], { encoding: 'utf8', timeout: 60_000, killSignal: 'SIGKILL' })
  if (r.error !== undefined || r.status !== 0) {
    throw new Error(
      `no etcd to test against (${bin}: ${r.error?.message ?? `exit ${String(r.status)}: ${r.stderr}`}); ` +
        "install Debian's etcd-server (apt-get install -y etcd-server, as root; scripts/test.sh does it) or set ETCD_BIN",
    )
  }
  return bin
}

const b64 = (s: string | Buffer): string => Buffer.from(s).toString('base64')

/** How a member is secured: its certificates, whether it asks for a client certificate, and more flags. */
export interface EtcdSecurity {
  certs: EtcdCerts
  clientCertAuth?: boolean
  /** The client certificate of the helper's own requests (no CN). */
  admin: Pair
  /** More etcd flags (`--auth-token-ttl 1`). */
  args?: string[]
}

/** A user of enableAuth: its password, and the prefixes it may read (and write, with readwrite). */
export interface EtcdUser {
  name: string
  password: string
  read?: string[]
  readwrite?: string[]
}

/** The key after every key starting with prefix, in base64. */
const endOf = (prefix: string): string => {
  const end = Buffer.from(prefix)
  end[end.length - 1] = (end.at(-1) ?? 0) + 1
  return end.toString('base64')
}

/** etcd's raft timings, in ms. */
export interface EtcdTiming {
  heartbeatMs: number
  electionMs: number
}

/** The tests' timings: a member elects after 100 ms, so a start or a restart is quick. */
const FAST_ELECTIONS: EtcdTiming = { heartbeatMs: 10, electionMs: 100 }

/**
 * For a cluster on a loaded, shared machine (a benchmark): etcd's tuning
 * guide sets the heartbeat near the members' round trip and the election
 * timeout at ten times it or more; a member starved of CPU for a second
 * must not lose its leader (etcd's defaults are 100 and 1000 ms).
 */
export const LOADED_MACHINE_TIMING: EtcdTiming = { heartbeatMs: 250, electionMs: 5000 }

export class EtcdServer {
  readonly url: string
  readonly peerUrl: string
  readonly dataDir: string
  #child: ChildProcess | undefined
  #exited: Promise<void> = Promise.resolve()
  #tail: string[] = []

  /** The raft timings: the tests' short ones unless startCluster was given others. */
  #timing: EtcdTiming = FAST_ELECTIONS
  /** `name=peerUrl,...` of every member, set once the cluster's members are made. */
  #initialCluster = ''
  readonly #dispatcher: Agent | undefined
  /** root's password, once enableAuth switched auth on: each helper request then carries a fresh token. */
  #rootPassword: string | undefined

  private constructor(
    readonly bin: string,
    dir: string,
    readonly name: string,
    readonly clientPort: number,
    readonly peerPort: number,
    readonly security?: EtcdSecurity,
  ) {
    this.url = `${security === undefined ? 'http' : 'https'}://127.0.0.1:${clientPort}`
    if (security !== undefined) {
      this.#dispatcher = new Agent({
        connect: {
          ca: readFileSync(security.certs.ca),
          cert: readFileSync(security.admin.cert),
          key: readFileSync(security.admin.key),
        },
      })
    }
    this.peerUrl = `http://127.0.0.1:${peerPort}`
    this.dataDir = path.join(dir, `etcd-${name}`)
  }

  /** Starts one member under dir (which the caller removes). */
  static async start(dir: string, security?: EtcdSecurity): Promise<EtcdServer> {
    const [e] = await EtcdServer.startCluster(dir, 1, security)
    if (e === undefined) throw new Error('no member started')
    return e
  }

  /**
   * Starts a cluster of n members under dir, all at once (a member answers
   * only once the cluster has its quorum). A port lost to a race is retried
   * on new ones.
   */
  static async startCluster(
    dir: string,
    n: number,
    security?: EtcdSecurity,
    timing?: EtcdTiming,
  ): Promise<EtcdServer[]> {
    const bin = etcdBinary()
    for (let attempt = 1; ; attempt++) {
      const members: EtcdServer[] = []
      for (let i = 0; i < n; i++)
        members.push(
          new EtcdServer(bin, path.join(dir, `try-${attempt}`), `m${i}`, await freePort(), await freePort(), security),
        )
      const initial = members.map((m) => `${m.name}=${m.peerUrl}`).join(',')
      for (const m of members) {
        m.#initialCluster = initial
        m.#timing = timing ?? FAST_ELECTIONS
      }
      await fs.mkdir(path.join(dir, `try-${attempt}`), { recursive: true })
      const started = await Promise.allSettled(members.map((m) => m.#run()))
      const failed = started.find((r): r is PromiseRejectedResult => r.status === 'rejected')
      if (failed === undefined) return members
      await Promise.all(members.map((m) => m.kill()))
      if (attempt < START_ATTEMPTS && members.some((m) => m.tail().includes('address already in use'))) continue
      throw failed.reason
    }
  }

  /** A member for one test, on a temp dir, killed when the test ends. */
  static async forTest(t: TestContext, security?: EtcdSecurity): Promise<EtcdServer> {
    const [e] = await EtcdServer.clusterForTest(t, 1, security)
    if (e === undefined) throw new Error('no member started')
    return e
  }

  /** A cluster of n members for one test, on a temp dir, killed when the test ends. */
  static async clusterForTest(t: TestContext, n: number, security?: EtcdSecurity): Promise<EtcdServer[]> {
    // Killed before their directory goes (after-hooks run in the order they are added).
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'layoutd-etcd-'))
    const held: { members: EtcdServer[] } = { members: [] }
    t.after(async () => {
      await Promise.all(held.members.map((m) => m.kill()))
      await fs.rm(dir, { recursive: true, force: true })
    })
    held.members = await EtcdServer.startCluster(dir, n, security)
    return held.members
  }

  get pid(): number {
    return this.#child?.pid ?? -1
  }

  tail(): string {
    return this.#tail.join('\n')
  }

  async #run(): Promise<void> {
    const child = spawn(
      this.bin,
      [
        '--name',
        this.name,
        '--data-dir',
        this.dataDir,
        '--listen-client-urls',
        this.url,
        '--advertise-client-urls',
        this.url,
        '--listen-peer-urls',
        this.peerUrl,
        '--initial-advertise-peer-urls',
        this.peerUrl,
        '--initial-cluster',
        this.#initialCluster,
        '--logger',
        'zap',
        // A member elects after one election timeout: keep it short, so a start or restart is quick.
        '--heartbeat-interval',
        String(this.#timing.heartbeatMs),
        '--election-timeout',
        String(this.#timing.electionMs),
        ...this.#securityArgs(),
      ],
      // A group of its own, killed when the test's process exits should the test not have ended it.
      { stdio: ['ignore', 'pipe', 'pipe'], detached: true },
    )
    trackGroup(child)
    this.#child = child
    let ready: () => void = () => undefined
    const readyLine = new Promise<void>((resolve) => (ready = resolve))
    const exited = new Promise<string>((resolve) =>
      child.once('exit', (code, sig) => resolve(`exit ${String(code)}, signal ${String(sig)}`)),
    )
    this.#exited = exited.then(() => undefined)
    let partial = ''
    const onData = (s: string): void => {
      const lines = (partial + s).split('\n')
      partial = lines.pop() ?? ''
      for (const line of lines) {
        this.#tail.push(line)
        if (this.#tail.length > TAIL_LINES) this.#tail.shift()
        if (READY_LINES.some((l) => line.includes(l))) ready()
      }
    }
    child.stdout?.setEncoding('utf8').on('data', onData)
    child.stderr?.setEncoding('utf8').on('data', onData)
    const timeout = new AbortController()
    try {
      const r = await Promise.race([
        readyLine.then(() => 'ready' as const),
        exited,
        delay(START_TIMEOUT_MS, 'timeout' as const, { signal: timeout.signal }),
      ])
      if (r !== 'ready') throw new Error(`etcd did not start (${r}); its last output:\n${this.tail()}`)
    } finally {
      timeout.abort()
    }
    // Serving is not yet answering: ask until a read comes back.
    let lastError = ''
    const answered = async (): Promise<boolean> => {
      try {
        await this.range('/')
        return true
      } catch (err) {
        lastError = errorMessage(err)
        return false
      }
    }
    await until('etcd to answer', answered, START_TIMEOUT_MS).catch(() => {
      throw new Error(`etcd started but does not answer: ${lastError}\n${this.tail()}`)
    })
  }

  #securityArgs(): string[] {
    const sec = this.security
    if (sec === undefined) return []
    return [
      '--cert-file',
      sec.certs.server.cert,
      '--key-file',
      sec.certs.server.key,
      '--trusted-ca-file',
      sec.certs.ca,
      ...(sec.clientCertAuth === true ? ['--client-cert-auth'] : []),
      ...(sec.args ?? []),
    ]
  }

  /**
   * Adds the root user (the admin certificate's CN) and each user with a
   * role of its own granting its prefixes, then switches auth on.
   */
  async enableAuth(users: readonly EtcdUser[]): Promise<void> {
    await this.#post('/v3/auth/role/add', { name: 'root' })
    await this.#post('/v3/auth/user/add', { name: 'root', password: 'root-password' })
    await this.#post('/v3/auth/user/grant', { user: 'root', role: 'root' })
    for (const u of users) {
      const role = `${u.name}-role`
      await this.#post('/v3/auth/role/add', { name: role })
      const grants = [...(u.read ?? []).map((p) => ['READ', p]), ...(u.readwrite ?? []).map((p) => ['READWRITE', p])]
      for (const [permType, prefix] of grants) {
        await this.#post('/v3/auth/role/grant', {
          name: role,
          perm: { permType, key: b64(prefix ?? ''), range_end: endOf(prefix ?? '') },
        })
      }
      await this.#post('/v3/auth/user/add', { name: u.name, password: u.password })
      await this.#post('/v3/auth/user/grant', { user: u.name, role })
    }
    await this.#post('/v3/auth/enable', {})
    this.#rootPassword = 'root-password'
  }

  /** SIGKILL, and the exit. */
  async kill(): Promise<void> {
    this.#child?.kill('SIGKILL')
    await this.#exited
  }

  /** Starts the member again on the same data dir and ports (after kill). */
  async restart(): Promise<void> {
    await this.kill()
    await this.#run()
  }

  /**
   * SIGSTOP: the member holds its connections and answers nothing, as a slow
   * or cut-off one does. Resolves once the kernel has stopped it (its state
   * is `T`): a signal is delivered when the process is next scheduled, and
   * on a loaded machine a read sent before that would still be answered.
   */
  async pause(): Promise<void> {
    this.#child?.kill('SIGSTOP')
    await until(`etcd ${this.name} (pid ${this.pid}) stopped`, async () => (await this.#state()) === 'T')
  }

  /** SIGCONT, resolving once the member runs again (its state is no longer `T`). */
  async resume(): Promise<void> {
    this.#child?.kill('SIGCONT')
    await until(`etcd ${this.name} (pid ${this.pid}) running again`, async () => (await this.#state()) !== 'T')
  }

  /** The process state of /proc/<pid>/stat (R, S, T, ...): the field after the command, which is in parentheses and may hold any byte. */
  async #state(): Promise<string> {
    const stat = await fs.readFile(`/proc/${this.pid}/stat`, 'utf8')
    const state = stat
      .slice(stat.lastIndexOf(')') + 1)
      .trim()
      .charAt(0)
    if (state === '') throw new Error(`/proc/${this.pid}/stat has no state: ${JSON.stringify(stat)}`)
    return state
  }

  async #post(pathname: string, body: unknown, authenticate = true): Promise<unknown> {
    const headers: Record<string, string> = { 'content-type': 'application/json' }
    if (authenticate && this.#rootPassword !== undefined) {
      // A token per request: the tests may give tokens a second to live.
      const { token } = (await this.#post(
        '/v3/auth/authenticate',
        { name: 'root', password: this.#rootPassword },
        false,
      )) as { token: string }
      headers.authorization = token
    }
    const res = await request(`${this.url}${pathname}`, {
      ...(this.#dispatcher === undefined ? {} : { dispatcher: this.#dispatcher }),
      method: 'POST',
      body: JSON.stringify(body),
      headers,
      signal: AbortSignal.timeout(5000),
    })
    const text = await res.body.text()
    if (res.statusCode !== 200) throw new Error(`etcd ${pathname}: HTTP ${res.statusCode}: ${text}`)
    return JSON.parse(text) as unknown
  }

  /** Writes any bytes at key, bypassing the store: how a garbage record gets there. */
  async put(key: string, value: string | Buffer): Promise<void> {
    await this.#post('/v3/kv/put', { key: b64(key), value: b64(value) })
  }

  async del(key: string): Promise<void> {
    await this.#post('/v3/kv/deleterange', { key: b64(key) })
  }

  /** Every key under prefix with its value, as text. */
  async range(prefix: string): Promise<Map<string, string>> {
    const end = Buffer.from(prefix)
    end[end.length - 1] = (end.at(-1) ?? 0) + 1
    const r = (await this.#post('/v3/kv/range', { key: b64(prefix), range_end: end.toString('base64') })) as {
      kvs?: Array<{ key: string; value?: string }>
    }
    return new Map(
      (r.kvs ?? []).map((kv) => [
        Buffer.from(kv.key, 'base64').toString(),
        Buffer.from(kv.value ?? '', 'base64').toString(),
      ]),
    )
  }
}

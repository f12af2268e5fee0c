// The real agent as a child process (`node src/main.js serve`) on a temp
// data dir and a free loopback port: what the crash suite kills with
// SIGKILL and starts again. Nothing here sleeps blindly: start-up waits for
// the agent's own "listening" log line, readiness and convergence are
// polled with a bounded deadline, and every wait also ends when the child
// exits, so a child that dies is reported at once with its last output.
import { spawn, type ChildProcess } from 'node:child_process'
import { createWriteStream, readFileSync } from 'node:fs'
import fs from 'node:fs/promises'
import net from 'node:net'
import path from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import { PassThrough } from 'node:stream'
import { fileURLToPath } from 'node:url'
import { Client } from 'undici'
import { intentCommand } from '../../src/cli/commands/intent.js'
import { loadConfig } from '../../src/config.js'
import { errorMessage } from '../../src/errors.js'
import { ended, spawnGroup, trackGroup } from './child.js'
import type { Mode } from '../../src/domain/modes.js'
import { AGENT_TOKEN_FILE } from '../../src/infra/agent-token.js'
import { openDeployStore } from '../../src/infra/deploy-store.js'
import { SYNC_CONCURRENCY } from '../../src/infra/fsutil.js'
import type { LayoutReport } from '../../src/domain/schemas.js'

/** The compiled CLI beside this compiled file, wherever the build was written. */
export const MAIN_JS = fileURLToPath(new URL('../../src/main.js', import.meta.url))

/** How often a wait asks the agent again. Short: it is a loopback request. */
const POLL_MS = 25
/** Lines of the child's output kept for a failure's message. */
const TAIL_LINES = 60
const START_ATTEMPTS = 5
/**
 * How long start-up may take to listen unless the test says: generous, a bound on giving up, not a measure (a
 * start under a load average near 20 took over 20 s).
 */
const LISTEN_MS = 60_000

/** Where one agent keeps its things: the data dir, the deploy store, the probe verdict, its own fallback address. */
export interface Sandbox {
  root: string
  dataDir: string
  deployDir: string
  probeFile: string
  /** An empty mount table: the gate reads nothing of the machine's. */
  mountinfo: string
  /**
   * CARLOS_AGENT_LISTEN for the sandbox's commands: a loopback port of its
   * own, never the default 127.0.0.1:9740, where another agent of the
   * machine may answer. The agent itself listens where AgentProcess
   * chooses, and the CLI finds it through D/agent.json.
   */
  listen: string
  box: string
}

/** Makes a sandbox under root: an empty data dir, and a probe that says the isolation is ready. */
export async function makeSandbox(root: string, box = 'crash-box'): Promise<Sandbox> {
  const sb = {
    root,
    dataDir: path.join(root, 'data'),
    deployDir: path.join(root, 'deploy'),
    probeFile: path.join(root, 'probe.out'),
    mountinfo: path.join(root, 'mountinfo'),
    listen: `127.0.0.1:${await freePort()}`,
    box,
  }
  await fs.mkdir(sb.dataDir, { recursive: true })
  await fs.mkdir(sb.deployDir, { recursive: true })
  await fs.writeFile(sb.probeFile, 'ready: true\n')
  await fs.writeFile(sb.mountinfo, '')
  return sb
}

/**
 * The environment every command of the sandbox runs with. No mount is
 * required (CARLOS_NESTED_MOUNTS=none): a temp dir is not a nosymfollow
 * mount, and the gate's other checks still run. Every path and the listen
 * address are the sandbox's own, so nothing of the machine's (its
 * CARLOS_* variables, an agent on the default port, ./data) reaches in.
 */
export function sandboxEnv(sb: Sandbox, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {}
  // Only what a process needs to run; no CARLOS_* leaks in from the caller.
  for (const k of ['PATH', 'HOME', 'TMPDIR', 'LANG']) if (process.env[k] !== undefined) env[k] = process.env[k]
  return {
    ...env,
    CARLOS_DATA_DIR: sb.dataDir,
    CARLOS_RUN_DIR: path.join(sb.dataDir, 'run'),
    CARLOS_DEPLOYMENT_DIR: sb.deployDir,
    CARLOS_AGENT_LISTEN: sb.listen,
    CARLOS_BOX: sb.box,
    CARLOS_NESTED_MOUNTS: 'none',
    CARLOS_MOUNTINFO: sb.mountinfo,
    CARLOS_PROBE_FILE: sb.probeFile,
    CARLOS_LAYOUT_POLL: '200ms',
    CARLOS_ACTIVATOR_URL: '',
    CARLOS_LOG_LEVEL: 'info',
    // As contrib/layoutd.service, the image and npm start give it (design §3.3).
    UV_THREADPOOL_SIZE: String(SYNC_CONCURRENCY),
    ...extra,
  }
}

/**
 * The bearer token the sandbox's agent requires: the one it made at its
 * first start in D/agent.token (the sandbox gives none of its own), read as
 * the activator would read it. Empty before the agent's first start.
 */
export function sandboxToken(sb: Pick<Sandbox, 'dataDir'>): string {
  try {
    return readFileSync(path.join(sb.dataDir, AGENT_TOKEN_FILE), 'utf8').trim()
  } catch {
    // No agent has started here yet: no token to send.
    return ''
  }
}

/** A loopback port nobody listens on right now (the agent may still lose it to a race; start retries). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer()
    srv.once('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address()
      const port = typeof addr === 'object' && addr !== null ? addr.port : 0
      srv.close(() => (port > 0 ? resolve(port) : reject(new Error('no port assigned'))))
    })
  })
}

export interface Exit {
  code: number | null
  signal: NodeJS.Signals | null
}

/** Runs a CLI command of the sandbox (`intent migrate`, `routes add ...`) to its end. */
export async function runCli(
  sb: Sandbox,
  args: readonly string[],
): Promise<{ exit: Exit; stdout: string; stderr: string }> {
  const child = spawnGroup(process.execPath, [MAIN_JS, ...args], {
    env: sandboxEnv(sb),
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout?.setEncoding('utf8').on('data', (s: string) => (stdout += s))
  child.stderr?.setEncoding('utf8').on('data', (s: string) => (stderr += s))
  const exit = await ended(child, `layoutd ${args.join(' ')}`).catch((err: unknown) => {
    throw new Error(`${(err as Error).message}; stderr: ${stderr}`)
  })
  return { exit, stdout, stderr }
}

/**
 * Records a layout intent for the whole fleet with the CLI's own command
 * (`layoutd intent migrate|revert`), run in this process: a node start per
 * record would cost the crash harness seconds for nothing it tests.
 * Throws with the command's stderr when it refuses.
 */
export async function recordIntent(sb: Sandbox, mode: Mode, opts: { force?: boolean } = {}): Promise<void> {
  const config = loadConfig(sandboxEnv(sb))
  const store = await openDeployStore(config)
  const out = new PassThrough()
  let err = ''
  const errs = new PassThrough().setEncoding('utf8')
  errs.on('data', (s: string) => (err += s))
  out.resume()
  try {
    const argv = [mode === 'nested' ? 'migrate' : 'revert', '--fleet', ...(opts.force === true ? ['--force'] : [])]
    const code = await intentCommand(argv, { config, store, stdout: out, stderr: errs })
    if (code !== 0) throw new Error(`layoutd intent ${mode}: exit ${code}: ${err}`)
  } finally {
    await store.close()
  }
}

export interface StartOptions {
  /** CARLOS_FAILPOINT: where the agent kills itself. */
  failpoint?: string
  /** More environment (CARLOS_ACTIVATOR_URL, ...). */
  env?: Record<string, string>
  /** Every line of the child's output is appended here too, when set. */
  logFile?: string
  /** How long start-up may take to listen. */
  listenTimeoutMs?: number
  /** Node's own flags, before the script (`--max-semi-space-size=4`, as `npm start` passes them). */
  nodeArgs?: readonly string[]
  /** A command the agent is started through (`chrt …`, as the unit schedules it: bench/scheduling.ts). */
  launcher?: readonly string[]
}

/**
 * The program and arguments that run node with args through launcher (a
 * command such as `chrt …` that execs what follows it), or node itself
 * when there is none: the agent and the servers the benches start beside it.
 */
export function throughLauncher(launcher: readonly string[], args: readonly string[]): [string, string[]] {
  const [program, ...rest] = [...launcher, process.execPath, ...args]
  return [program ?? process.execPath, rest]
}

export class AgentTimeout extends Error {
  override name = 'AgentTimeout'
}

export class AgentExited extends Error {
  override name = 'AgentExited'
  constructor(
    readonly exit: Exit,
    tail: string,
  ) {
    super(`the agent exited (code ${String(exit.code)}, signal ${String(exit.signal)}); its last output:\n${tail}`)
  }
}

/** One run of the real agent. */
export class AgentProcess {
  readonly url: string
  readonly child: ChildProcess
  /** Resolves when the child has exited, with how. */
  readonly exited: Promise<Exit>
  readonly startedAt: number
  #exit: Exit | undefined
  readonly #tail: string[] = []
  readonly #client: Client
  #listening: (() => void) | undefined
  readonly #sandbox: Sandbox
  readonly #givenToken: string | undefined

  private constructor(sb: Sandbox, port: number, opts: StartOptions) {
    this.url = `http://127.0.0.1:${port}`
    this.startedAt = performance.now()
    this.#sandbox = sb
    this.#givenToken = opts.env?.CARLOS_AGENT_TOKEN
    const env = sandboxEnv(sb, {
      CARLOS_AGENT_LISTEN: `127.0.0.1:${port}`,
      CARLOS_FAILPOINT: opts.failpoint ?? '',
      ...opts.env,
    })
    const [program, args] = throughLauncher(opts.launcher ?? [], [...(opts.nodeArgs ?? []), MAIN_JS, 'serve'])
    // A group of its own, killed when the test's process exits should the test not have ended it.
    this.child = spawn(program, args, {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    })
    trackGroup(this.child)
    this.exited = new Promise((resolve) => {
      this.child.once('exit', (code, signal) => {
        this.#exit = { code, signal }
        resolve(this.#exit)
      })
    })
    const log = opts.logFile === undefined ? undefined : createWriteStream(opts.logFile, { flags: 'a' })
    log?.on('error', (err) => this.#keep(`(log file not written: ${err.message})`))
    this.child.once('close', () => log?.end())
    const lines = (stream: NodeJS.ReadableStream | null): void => {
      let partial = ''
      stream?.setEncoding('utf8')
      stream?.on('data', (s: string) => {
        log?.write(s)
        const got = (partial + s).split('\n')
        partial = got.pop() ?? ''
        for (const line of got) {
          this.#keep(line)
          if (line.includes('Server listening at')) this.#listening?.()
        }
      })
    }
    lines(this.child.stdout)
    lines(this.child.stderr)
    // Few connections, short requests; the client is closed with the child.
    this.#client = new Client(this.url, { connect: { timeout: 10_000 }, headersTimeout: 30_000, bodyTimeout: 30_000 })
  }

  #keep(line: string): void {
    this.#tail.push(line)
    if (this.#tail.length > TAIL_LINES) this.#tail.shift()
  }

  /** The bearer token this agent requires: the one the test gave it, else the one it made in D/agent.token. */
  get token(): string {
    return this.#givenToken ?? sandboxToken(this.#sandbox)
  }

  /** The header a change (POST, PUT, DELETE) carries: the activator's credential. */
  authorization(): { authorization: string } {
    return { authorization: `Bearer ${this.token}` }
  }

  /** The child's last lines of output. */
  tail(): string {
    return this.#tail.join('\n')
  }

  get exit(): Exit | undefined {
    return this.#exit
  }

  get pid(): number {
    return this.child.pid ?? -1
  }

  /**
   * Spawns the agent on a free port and waits until it listens. A port
   * lost to someone else between the probe and the agent's bind is retried
   * on a new one.
   */
  static async start(sb: Sandbox, opts: StartOptions = {}): Promise<AgentProcess> {
    for (let attempt = 1; ; attempt++) {
      const a = new AgentProcess(sb, await freePort(), opts)
      const listening = new Promise<void>((resolve) => (a.#listening = resolve))
      let r: 'done' | Exit
      try {
        r = await a.#until(listening, opts.listenTimeoutMs ?? LISTEN_MS, 'listen')
      } catch (err) {
        // An agent that never listened is still running: end it, or it
        // outlives the test and writes into the next one's machine.
        await a.kill()
        throw err
      }
      if (r === 'done') return a
      await a.#closeClient()
      if (attempt < START_ATTEMPTS && a.tail().includes('EADDRINUSE')) continue
      throw new AgentExited(r, a.tail())
    }
  }

  /** Waits for p, the child's exit or the deadline, whichever comes first. */
  async #until<T>(p: Promise<T>, ms: number, what: string): Promise<'done' | Exit> {
    const ac = new AbortController()
    try {
      return await Promise.race([
        p.then(() => 'done' as const),
        this.exited,
        delay(ms, undefined, { signal: ac.signal }).then(() => {
          throw new AgentTimeout(`the agent did not ${what} within ${ms} ms; its last output:\n${this.tail()}`)
        }),
      ])
    } finally {
      ac.abort()
    }
  }

  async #get<T>(pathname: string): Promise<{ status: number; body: T }> {
    const res = await this.#client.request({ method: 'GET', path: pathname })
    const text = await res.body.text()
    return { status: res.statusCode, body: JSON.parse(text) as T }
  }

  /** GET /ready's body: the phase, the checks. */
  async readiness(): Promise<{ ready: boolean; phase: string }> {
    return (await this.#get<{ ready: boolean; phase: string }>('/ready')).body
  }

  /** GET /ready: whether start-up recovery is done. */
  async ready(): Promise<boolean> {
    return (await this.#get<unknown>('/ready')).status === 200
  }

  /** GET /layout/status. */
  async status(): Promise<LayoutReport> {
    const r = await this.#get<LayoutReport>('/layout/status')
    if (r.status !== 200) throw new Error(`GET /layout/status answered ${r.status}: ${JSON.stringify(r.body)}`)
    return r.body
  }

  /** The value of one Prometheus sample in GET /metrics (`name` with its labels, as written), or undefined when absent. */
  async metric(name: string): Promise<number | undefined> {
    const res = await this.#client.request({ method: 'GET', path: '/metrics' })
    const text = await res.body.text()
    if (res.statusCode !== 200) throw new Error(`GET /metrics answered ${res.statusCode}`)
    const line = text.split('\n').find((l) => l.startsWith(`${name} `))
    return line === undefined ? undefined : Number(line.slice(name.length + 1))
  }

  /** POST /layout/converge?wait=1: kicks the leg and answers the run's results. */
  async converge(timeoutS = 60): Promise<unknown> {
    const res = await this.#client.request({
      method: 'POST',
      path: `/layout/converge?wait=1&timeout=${timeoutS}`,
      headers: this.authorization(),
    })
    const body: unknown = await res.body.json()
    if (res.statusCode !== 200)
      throw new Error(`POST /layout/converge answered ${res.statusCode}: ${JSON.stringify(body)}`)
    return body
  }

  /**
   * Polls check until it answers a value, the child exits (AgentExited) or
   * the deadline passes (AgentTimeout). A request the agent could not
   * answer yet counts as "not yet".
   */
  async waitFor<T>(what: string, check: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
    const deadline = performance.now() + timeoutMs
    let lastErr = ''
    for (;;) {
      if (this.#exit !== undefined) throw new AgentExited(this.#exit, this.tail())
      try {
        const v = await check()
        if (v !== undefined) return v
      } catch (err) {
        lastErr = ` (last error: ${errorMessage(err)})`
      }
      if (performance.now() > deadline)
        throw new AgentTimeout(
          `${what}: not within ${timeoutMs} ms${lastErr}; the agent's last output:\n${this.tail()}`,
        )
      const r = await this.#until(delay(POLL_MS), POLL_MS * 10, what)
      if (r !== 'done') throw new AgentExited(r, this.tail())
    }
  }

  /** Waits until /ready answers 200. */
  async waitReady(timeoutMs = 30_000): Promise<void> {
    await this.waitFor('ready', async () => ((await this.ready()) ? true : undefined), timeoutMs)
  }

  /**
   * Waits until /ready says nested instances may wake: the isolation gate's
   * first evaluation ends after /ready turns 200, and a nested wake asked in
   * between is refused `isolation not ready`, as it should be.
   */
  async waitNestedAllowed(timeoutMs = 30_000): Promise<void> {
    await this.waitFor(
      'the isolation gate open',
      async () =>
        (await this.#get<{ nested?: { allowed?: boolean } }>('/ready')).body.nested?.allowed === true
          ? true
          : undefined,
      timeoutMs,
    )
  }

  /**
   * Waits until the report shows every listed host with the layout word
   * wanted and the leg idle (nothing running, nothing pending); answers that
   * report. Polled at most every `everyMs`, so a large report does not keep
   * the agent busy answering instead of moving.
   */
  async waitConverged(
    hosts: readonly string[],
    word: string,
    timeoutMs: number,
    everyMs = POLL_MS,
  ): Promise<LayoutReport> {
    return this.waitFor(
      `every host ${word}`,
      async () => {
        const r = await this.status()
        const done = !r.leg.running && !r.leg.pending && hosts.every((h) => r.rows[h]?.layout === word)
        if (!done && everyMs > POLL_MS) await delay(everyMs - POLL_MS)
        return done ? r : undefined
      },
      timeoutMs,
    )
  }

  /** SIGKILL, and the exit. */
  async kill(): Promise<Exit> {
    if (this.#exit === undefined) this.child.kill('SIGKILL')
    const exit = await this.exited
    await this.#closeClient()
    return exit
  }

  async #closeClient(): Promise<void> {
    if (this.#client.destroyed) return
    await this.#client.destroy()
  }

  /** SIGTERM (graceful: the leg finishes its current host), SIGKILL after timeoutMs; the exit. */
  async stop(timeoutMs = 30_000): Promise<Exit> {
    if (this.#exit === undefined) {
      this.child.kill('SIGTERM')
      const r = await this.#until(new Promise<never>(() => undefined), timeoutMs, 'stop').catch((err: unknown) => {
        if (err instanceof AgentTimeout) return undefined
        throw err
      })
      if (r === undefined) this.child.kill('SIGKILL')
    }
    const exit = await this.exited
    await this.#closeClient()
    return exit
  }
}

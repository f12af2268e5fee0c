// Whether the activator is kept waiting while the box converges (issue:
// "GET /ready/:host at 100 req/s while all 10,000 tenants converge: p99 <=
// 25 ms; event-loop lag p99 <= 50 ms"). The real agent serves N flat
// tenants (default 10,000); GET /ready/:host is sent at a steady rate for a
// few seconds while nothing moves (idle), then through a whole converge to
// nested that POST /layout/converge?wait=1 kicks and waits for. The load
// is open-loop: each request is due at its own tick, whatever the earlier
// ones are doing, and its latency counts from that tick, so a stalled
// agent shows as the wait the activator would have seen. The agent's own
// event-loop lag over the converge comes from lag-probe.ts. Prints JSON.
//
// With --claims C, POST /wakes/:host is sent at C per second through the
// same converge too (each granted claim released at once): the claim rate
// an activator sees while the box converges.
//
// With --console, an operator's console page is open through the converge:
// every 2 s it asks GET /layout/status with the ETag it holds, and on a
// 200 fetches the page (GET /) again, as console.js does; its answers'
// times are counted apart.
//
// With --bare, a server that does nothing but answer (bare-ready.ts, a
// process of its own) is asked at the same rate through the same converge:
// the machine's own floor for the agent's figure, measured in the same run.
//
// The agent (and the bare server) run as contrib/layoutd.service schedules
// the agent, the loop's thread real-time (bench/scheduling.ts), and this
// bench's own loop, which sends the requests and reads the answers, runs
// one real-time priority below it while it measures; with --ordinary, all
// three run ordinary, as `npm start` does. Where chrt is refused, they run
// ordinary and say so.
//
//   node dist/bench/ready-during-converge.js [--hosts 10000] [--rate 100] [--idle 5] [--claims 0] [--console] [--bare] [--ordinary] [--dir D] [--keep]
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import { pathToFileURL } from 'node:url'
import { spawn, spawnSync } from 'node:child_process'
import { parseArgs } from 'node:util'
import { Pool, request } from 'undici'
import { AgentProcess, recordIntent, throughLauncher } from '../test/helpers/agent-process.js'
import { makeWorld } from './crash.js'
import { scheduleThisLoop, unitNodeArgs, unitScheduling, type Scheduling } from './scheduling.js'
import { LagProbe, type LoopLag } from './lag-probe.js'

export interface Latencies {
  requests: number
  /** Answers other than 200 (a fenced host's /ready/:host is still an answer: counted apart, timed alike). */
  non200: number
  errors: number
  p50Ms: number
  p99Ms: number
  maxMs: number
  /** How late the load generator itself sent (send less due tick), its p99: the part of each latency that is the client's own. */
  clientLateP99Ms: number
}

export interface ReadyDuringConverge {
  hosts: number
  rate: number
  idle: Latencies
  during: Latencies
  /** POST /wakes/:host at claimRate per second through the same converge (each granted claim released at once); absent at rate 0. */
  claimsDuring?: Latencies & { rate: number }
  /** With --console: the console page's polls through the converge, each a status ask and, when it changed, the page. */
  consoleDuring?: ConsolePolls
  /** With --bare: a server that only answers (bare-ready.ts), asked at the same rate through the same converge. */
  bareDuring?: Latencies
  lagDuringConverge: LoopLag
  /** How the agent and the bare server were started, and how this bench's own loop ran through the converge. */
  scheduling: { agent: string; loadGenerator: string }
  converge: { seconds: number; movesPerSecond: number }
  /** CPU the agent used through the converge: its loop's thread, all its threads, each kind of thread (threadCpu). */
  agentCpu: AgentCpu
  machine: { cpus: number; loadavg: number[] }
}

/** CPU an agent used: its loop's thread, all its threads, and each kind of thread by its name (threadCpu). */
export interface AgentCpu {
  loopSeconds: number
  /** How long the loop's thread waited runnable for a core (its schedstat). */
  loopWaitSeconds: number
  processSeconds: number
  /** CPU seconds by thread name (`layoutd-walk`, `libuv-worker`, …), threads of one name summed; a thread that ended since is left out. */
  threads: Record<string, number>
}

/** One thread's CPU seconds (user + system) from its stat. */
function statSeconds(stat: string): number {
  const fields = stat.split(') ')[1]?.split(' ') ?? []
  return (Number(fields[11]) + Number(fields[12])) / 100
}

/** A thread's stat, or undefined when it has ended (it can, between the listing and the read). */
function readTask(pid: number, tid: string, file: string): string | undefined {
  try {
    return fs.readFileSync(`/proc/${pid}/task/${tid}/${file}`, 'utf8')
  } catch {
    return undefined
  }
}

/** What threadCpu reads: the totals, and each thread's name and seconds by its id. */
export interface CpuReading {
  loopSeconds: number
  loopWaitSeconds: number
  processSeconds: number
  tasks: Map<string, { name: string; seconds: number }>
}

/**
 * CPU seconds (user + system) an agent's threads have used, from /proc: its
 * loop's thread (whose id is the process's) apart from every thread, and
 * each thread on its own. On a shared machine these say what the loop's
 * thread did, where a latency says also how long it waited for a core.
 */
export function threadCpu(pid: number): CpuReading {
  const tasks = new Map<string, { name: string; seconds: number }>()
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    const stat = readTask(pid, tid, 'stat')
    if (stat === undefined) continue
    const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'))
    tasks.set(tid, { name, seconds: statSeconds(stat) })
  }
  const schedstat = readTask(pid, String(pid), 'schedstat')?.split(' ') ?? []
  return {
    loopSeconds: statSeconds(fs.readFileSync(`/proc/${pid}/task/${pid}/stat`, 'utf8')),
    loopWaitSeconds: Number(schedstat[1] ?? 0) / 1e9,
    processSeconds: statSeconds(fs.readFileSync(`/proc/${pid}/stat`, 'utf8')),
    tasks,
  }
}

/** What threadCpu reads at the end less what it read at the start; a thread new since counts from nothing. */
export function cpuSince(start: CpuReading, pid: number): AgentCpu {
  const end = threadCpu(pid)
  const round = (s: number): number => Math.round(s * 100) / 100
  const threads: Record<string, number> = {}
  for (const [tid, t] of end.tasks) {
    const used = t.seconds - (start.tasks.get(tid)?.seconds ?? 0)
    threads[t.name] = round((threads[t.name] ?? 0) + used)
  }
  return {
    loopSeconds: round(end.loopSeconds - start.loopSeconds),
    loopWaitSeconds: round(end.loopWaitSeconds - start.loopWaitSeconds),
    processSeconds: round(end.processSeconds - start.processSeconds),
    threads,
  }
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return 0
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? 0
}

/** One request of an open loop: its status, and when its answer was read whole (performance.now()). */
export type Ask = (pool: Pool, host: string) => Promise<{ status: number; answeredAt: number }>

/** GET /ready/:host: what the activator asks on a sleeping tenant's first request. */
export const askReady: Ask = async (pool, host) => {
  const res = await pool.request({ method: 'GET', path: `/ready/${host}` })
  await res.body.dump()
  return { status: res.statusCode, answeredAt: performance.now() }
}

/**
 * POST /wakes/:host, the activator's claim, carrying the agent's bearer
 * token (design §6); a granted claim is released (DELETE, not timed) as
 * soon as it is answered, so the pass is held back by it for no longer than
 * the claim's round trip. A claim refused for its credential (401, 403) is
 * an error, never a refusal: it says nothing of the converge.
 */
export function askClaim(auth: Record<string, string>): Ask {
  return async (pool, host) => {
    const res = await pool.request({ method: 'POST', path: `/wakes/${host}`, headers: auth })
    await res.body.dump()
    const answeredAt = performance.now()
    if (res.statusCode === 401 || res.statusCode === 403)
      throw new Error(`POST /wakes/${host} answered ${res.statusCode}: the claim's token was not taken`)
    if (res.statusCode === 200) {
      const released = await pool.request({ method: 'DELETE', path: `/wakes/${host}`, headers: auth })
      await released.body.dump()
      if (released.statusCode !== 204) throw new Error(`DELETE /wakes/${host} answered ${released.statusCode}`)
    }
    return { status: res.statusCode, answeredAt }
  }
}

/**
 * Sends ask (GET /ready/:host unless told) at rate per second, each due at
 * its own tick, to a host taken round-robin, until stop is aborted; answers
 * the latencies counted from each request's due time.
 */
export async function openLoad(
  pool: Pool,
  hosts: readonly string[],
  rate: number,
  stop: AbortSignal,
  ask: Ask = askReady,
): Promise<Latencies> {
  const times: number[] = []
  const late: number[] = []
  let non200 = 0
  let errors = 0
  const inFlight: Array<Promise<void>> = []
  const t0 = performance.now()
  for (let i = 0; !stop.aborted; i++) {
    const due = t0 + (i * 1000) / rate
    const wait = due - performance.now()
    if (wait > 0) await delay(wait)
    const host = hosts[i % hosts.length] ?? ''
    late.push(performance.now() - due)
    inFlight.push(
      ask(pool, host)
        .then(({ status, answeredAt }) => {
          // Timed to the answer: a claim's release is not the activator's wait.
          times.push(answeredAt - due)
          if (status !== 200) non200++
        })
        .catch(() => {
          errors++
        }),
    )
  }
  await Promise.all(inFlight)
  times.sort((a, b) => a - b)
  late.sort((a, b) => a - b)
  return {
    requests: times.length + errors,
    non200,
    errors,
    p50Ms: percentile(times, 50),
    p99Ms: percentile(times, 99),
    maxMs: times.at(-1) ?? 0,
    clientLateP99Ms: percentile(late, 99),
  }
}

export interface ConsolePolls {
  everyMs: number
  polls: number
  /** Polls answered 200 (the report changed), each followed by the page. */
  redraws: number
  statusP50Ms: number
  statusMaxMs: number
  pageP50Ms: number
  pageMaxMs: number
}

/** The console page's loop (src/routes/console-page/console.js), until stop is aborted. */
export async function pollLikeConsole(pool: Pool, stop: AbortSignal, everyMs = 2000): Promise<ConsolePolls> {
  const status: number[] = []
  const page: number[] = []
  let etag = ''
  while (!stop.aborted) {
    await delay(everyMs)
    const t0 = performance.now()
    const res = await pool.request({ method: 'GET', path: '/layout/status', headers: { 'if-none-match': etag } })
    await res.body.dump()
    status.push(performance.now() - t0)
    if (res.statusCode !== 200) continue
    etag = String(res.headers.etag ?? '')
    const t1 = performance.now()
    const html = await pool.request({ method: 'GET', path: '/' })
    await html.body.dump()
    page.push(performance.now() - t1)
  }
  const sorted = (xs: number[]): number[] => [...xs].sort((a, b) => a - b)
  const [s, p] = [sorted(status), sorted(page)]
  return {
    everyMs,
    polls: s.length,
    redraws: p.length,
    statusP50Ms: percentile(s, 50),
    statusMaxMs: s.at(-1) ?? 0,
    pageP50Ms: percentile(p, 50),
    pageMaxMs: p.at(-1) ?? 0,
  }
}

/**
 * Waits for the kernel to write back what is dirty (`sync`): the trees a
 * bench has just made are thousands of files, and their writeback would
 * otherwise be timed as part of whatever comes first.
 */
export function settleDisk(): void {
  const run = spawnSync('sync', { stdio: 'inherit' })
  if (run.status !== 0) throw new Error(`sync failed: ${run.error?.message ?? `exit ${String(run.status)}`}`)
}

/** Starts bare-ready.js in a process of its own (through launcher, as the agent is): its pool, and how to stop it. */
export async function startBareReady(
  launcher: readonly string[] = [],
): Promise<{ pool: Pool; stop: () => Promise<void> }> {
  const [program, args] = throughLauncher(launcher, [new URL('./bare-ready.js', import.meta.url).pathname])
  const child = spawn(program, args, {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const port = await new Promise<string>((resolve, reject) => {
    child.once('error', reject)
    child.once('exit', (code) => reject(new Error(`bare-ready exited ${String(code)}`)))
    child.stdout.setEncoding('utf8').once('data', (s: string) => resolve(s.trim()))
  })
  const pool = new Pool(`http://127.0.0.1:${port}`, { connections: 32 })
  return {
    pool,
    stop: async () => {
      await pool.close()
      child.kill('SIGTERM')
    },
  }
}

/** GET /ready/:host of a bare server: the same request, answered by a server with no other work. */
export const askBare: Ask = async (pool, host) => {
  const res = await pool.request({ method: 'GET', path: `/ready/${host}` })
  await res.body.dump()
  return { status: res.statusCode, answeredAt: performance.now() }
}

/** POST /layout/converge?wait=1 with the agent's token: kicks the leg and waits for the run the kick asked for (at most 600 s). */
async function kickAndWait(agent: AgentProcess): Promise<void> {
  const res = await request(new URL('/layout/converge?wait=1&timeout=600', agent.url), {
    method: 'POST',
    headers: agent.authorization(),
    headersTimeout: 700_000,
    bodyTimeout: 700_000,
  })
  await res.body.dump()
  if (res.statusCode !== 200) throw new Error(`POST /layout/converge?wait=1 answered ${res.statusCode}`)
}

export async function runReadyDuringConverge(
  root: string,
  opts: {
    hosts: number
    rate: number
    idleSeconds: number
    claimRate?: number
    console?: boolean
    bare?: boolean
    ordinary?: boolean
  },
  log: (l: string) => void = () => undefined,
): Promise<ReadyDuringConverge> {
  log(`ready-during-converge: making ${opts.hosts} flat tenants under ${root}`)
  const w = await makeWorld(root, opts.hosts)
  settleDisk()
  const hosts = w.tenants.map((t) => t.host)
  // Flat recorded: the first run finds nothing to move, and the converge starts when this bench says.
  await recordIntent(w.sb, 'flat')
  const sched: Scheduling =
    opts.ordinary === true ? { launcher: [], what: 'SCHED_OTHER (--ordinary)' } : unitScheduling()
  // As the unit starts it: its scheduling and node's flags.
  const agent = await AgentProcess.start(w.sb, { launcher: sched.launcher, nodeArgs: unitNodeArgs() })
  // Enough connections that a slow answer never holds back the next request's send.
  const pool = new Pool(agent.url, { connections: 32, headersTimeout: 60_000, bodyTimeout: 60_000 })
  const claimPool = new Pool(agent.url, { connections: 16, headersTimeout: 60_000, bodyTimeout: 60_000 })
  const bare = opts.bare === true ? await startBareReady(sched.launcher) : undefined
  let loadGenerator = 'SCHED_OTHER'
  try {
    await agent.waitReady(300_000)
    // The first run (after the instance keys of every tenant) moves nothing: wait it out before measuring.
    await kickAndWait(agent)
    log('ready-during-converge: idle load')
    loadGenerator = scheduleThisLoop(sched)
    const idleStop = AbortSignal.timeout(opts.idleSeconds * 1000)
    const idle = await openLoad(pool, hosts, opts.rate, idleStop)
    log('ready-during-converge: converging under load')
    await recordIntent(w.sb, 'nested')
    const probe = await LagProbe.start(agent.url)
    const ac = new AbortController()
    const load = openLoad(pool, hosts, opts.rate, ac.signal)
    const claimRate = opts.claimRate ?? 0
    // The claims take the hosts from the other end, so a claim and a /ready/:host seldom name one host at once.
    const claims =
      claimRate > 0
        ? openLoad(claimPool, [...hosts].reverse(), claimRate, ac.signal, askClaim(agent.authorization()))
        : undefined
    const consoleOpen = opts.console === true ? pollLikeConsole(claimPool, ac.signal) : undefined
    const bareLoad = bare === undefined ? undefined : openLoad(bare.pool, hosts, opts.rate, ac.signal, askBare)
    const c0 = performance.now()
    const cpu0 = threadCpu(agent.pid)
    let agentCpu: AgentCpu
    let seconds: number
    try {
      await kickAndWait(agent)
      seconds = (performance.now() - c0) / 1000
    } finally {
      agentCpu = cpuSince(cpu0, agent.pid)
      ac.abort()
    }
    const during = await load
    const claimsDuring = claims === undefined ? undefined : { rate: claimRate, ...(await claims) }
    const consoleDuring = await consoleOpen
    const bareDuring = await bareLoad
    scheduleThisLoop(sched, true)
    const lagDuringConverge = await probe.stop()
    // A host a claim held when its batch came was deferred (awake, inside
    // its grace) and is moved by the leg's retry once the claim is gone:
    // the converge is done when every host is nested, not when the kicked run ends.
    const deadline = performance.now() + 120_000
    for (;;) {
      const report = await agent.status()
      const notNested = hosts.filter((h) => report.rows[h]?.layout !== 'nested')
      if (notNested.length === 0) break
      if (performance.now() > deadline)
        throw new Error(
          `${notNested.length} hosts are not nested 120 s after the converge, e.g. ${notNested.slice(0, 3).join(', ')}`,
        )
      await delay(1000)
    }
    return {
      hosts: opts.hosts,
      rate: opts.rate,
      idle,
      during,
      ...(claimsDuring === undefined ? {} : { claimsDuring }),
      ...(consoleDuring === undefined ? {} : { consoleDuring }),
      ...(bareDuring === undefined ? {} : { bareDuring }),
      lagDuringConverge,
      scheduling: { agent: sched.what, loadGenerator },
      converge: { seconds, movesPerSecond: opts.hosts / seconds },
      agentCpu,
      machine: { cpus: os.cpus().length, loadavg: os.loadavg() },
    }
  } finally {
    await pool.close()
    await claimPool.close()
    await bare?.stop()
    await agent.kill()
  }
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      hosts: { type: 'string', default: '10000' },
      rate: { type: 'string', default: '100' },
      idle: { type: 'string', default: '5' },
      claims: { type: 'string', default: '0' },
      console: { type: 'boolean', default: false },
      bare: { type: 'boolean', default: false },
      ordinary: { type: 'boolean', default: false },
      dir: { type: 'string' },
      keep: { type: 'boolean', default: false },
    },
  })
  const hosts = Number(values.hosts)
  const rate = Number(values.rate)
  const idleSeconds = Number(values.idle)
  const claimRate = Number(values.claims)
  if (
    ![hosts, rate, idleSeconds].every((n) => Number.isInteger(n) && n >= 1) ||
    !(Number.isInteger(claimRate) && claimRate >= 0)
  ) {
    process.stderr.write(
      'usage: node dist/bench/ready-during-converge.js [--hosts N] [--rate R] [--idle S] [--claims C] [--console] [--bare] [--ordinary] [--dir D] [--keep]\n',
    )
    return 2
  }
  const root = values.dir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'layoutd-ready-bench-'))
  try {
    const r = await runReadyDuringConverge(
      root,
      { hosts, rate, idleSeconds, claimRate, console: values.console, bare: values.bare, ordinary: values.ordinary },
      (l) => process.stderr.write(`${l}\n`),
    )
    process.stdout.write(`${JSON.stringify(r, null, 2)}\n`)
    return 0
  } finally {
    if (!values.keep) fs.rmSync(root, { recursive: true, force: true })
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await main()
}

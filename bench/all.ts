// Every figure of layoutd's performance on one box of N tenants (default
// 10,000), each beside its baseline measured in the same run, printed as ONE
// JSON document (`npm run bench`). Progress goes to stderr.
//
//   node dist/bench/all.js [--runs 5] [--hosts 10000] [--seconds 3] [--journals 1000] [--rounds 3] [--dir D] [--keep]
//
// With --runs N (5 unless told), N whole runs back to back: each run's
// document, then every target's figure in each run and their spread
// (bench/spread.ts); a target is met only where every run met it.
//
// In order: the converge's floor (every source walked for hard links by
// `find -P … -type f -links +1`, and the group-committed renames of
// bench/converge.ts, on the same trees before the agent has them); the rows
// written by `layoutd routes import` (a real process);
// the agent started on them (spawn to /ready 200); the HTTP routes under a
// closed-loop load beside a bare Fastify server (a process of its own)
// answering the same objects with the same schemas; the claim rate; a
// converge of every tenant to nested (its trees first walked again,
// untimed, as warm as the floor found them), with GET /ready/:host and wake claims
// sent at steady rates through it and a console polling every 2 s (and the
// same /ready/:host asked of a server that does nothing but answer, the
// machine's own floor for that p99), its time against the floor, and the
// agent's RSS after it; and a
// start that must recover `--journals` journals before /ready is 200.
//
// The agent runs as contrib/layoutd.service starts it, its loop's thread
// real-time (bench/scheduling.ts), and every server it is measured beside
// is started alike; through the converge this bench's own loop, which
// sends the open loops' requests, runs one real-time priority below the
// agent's (its own lateness is counted apart, `clientLateP99Ms`). Where
// chrt is refused, all run ordinary and `scheduling` says so.
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import { Client, Pool, request } from 'undici'
import { pathsFor, type Dirs } from '../src/domain/paths.js'
import type { LayoutReport } from '../src/domain/schemas.js'
import { writeJournals, type Journal } from '../src/infra/pass/journal.js'
import { Registry } from '../src/infra/registry.js'
import {
  AgentProcess,
  makeSandbox,
  recordIntent,
  runCli,
  throughLauncher,
  type Sandbox,
} from '../test/helpers/agent-process.js'
import { makeTenantTree } from '../test/helpers/tenants.js'
import { hostFor } from './crash.js'
import { load, type LoadResult } from './load.js'
import { LagProbe } from './lag-probe.js'
import { findWalk, groupCommittedBaseline } from './converge.js'
import {
  askBare,
  askClaim,
  cpuSince,
  openLoad,
  pollLikeConsole,
  settleDisk,
  startBareReady,
  threadCpu,
} from './ready-during-converge.js'
import { memory, reportArgs } from './memory.js'
import { spreadOf, type RunDoc } from './spread.js'
import { scheduleThisLoop, unitEnvironment, unitNodeArgs, unitScheduling, type Scheduling } from './scheduling.js'
import { SYNC_CONCURRENCY, threadPoolSize } from '../src/infra/fsutil.js'

const log = (l: string): void => void process.stderr.write(`bench: ${l}\n`)
const round = (x: number, digits = 3): number => Math.round(x * 10 ** digits) / 10 ** digits
/** The targets of a converge of every tenant (issue 26): /ready/:host's p99, and the converge's share of its floor. */
const READY_P99_TARGET_MS = 10
const FLOOR_RATIO_TARGET = 0.6

/** The steady claim rate sent through the converge. */
const CLAIMS_PER_SECOND = 20

interface Side {
  layoutd: LoadResult
  bareFastify: LoadResult
  /** layoutd's rate over the bare server's. */
  ratio: number
}

function side(layoutd: LoadResult, bareFastify: LoadResult): Side {
  return { layoutd, bareFastify, ratio: round(layoutd.perSecond / bareFastify.perSecond) }
}

/** N flat tenants' trees, and their rows as JSON Lines (not yet in the registry). */
function makeTenants(sb: Sandbox, n: number): { dirs: Dirs; hosts: string[]; file: string } {
  const dirs: Dirs = { dataDir: sb.dataDir, runDir: path.join(sb.dataDir, 'run') }
  fs.mkdirSync(dirs.runDir, { recursive: true })
  const hosts: string[] = []
  const lines: string[] = []
  for (let i = 0; i < n; i++) {
    const host = hostFor(i)
    const p = pathsFor(dirs, host, 'flat')
    const { db } = makeTenantTree(p.dir, i + 1)
    hosts.push(host)
    lines.push(JSON.stringify({ host, kind: 'instance', hibernate: true, dir: p.dir, socket: p.socket, db }))
  }
  const file = path.join(sb.root, 'rows.jsonl')
  fs.writeFileSync(file, `${lines.join('\n')}\n`)
  return { dirs, hosts, file }
}

async function get<T>(origin: string, p: string): Promise<{ status: number; body: T; etag: string }> {
  const client = new Client(origin)
  try {
    const res = await client.request({ method: 'GET', path: p })
    const body = JSON.parse(await res.body.text()) as T
    return { status: res.statusCode, body, etag: String(res.headers.etag ?? '') }
  } finally {
    await client.close()
  }
}

/** A change sent with the agent's bearer token (design §6): auth is AgentProcess.authorization(). */
async function send(
  origin: string,
  method: 'PUT',
  p: string,
  body: unknown,
  auth: Record<string, string>,
): Promise<number> {
  const client = new Client(origin)
  try {
    const res = await client.request({
      method,
      path: p,
      body: JSON.stringify(body),
      headers: { 'content-type': 'application/json', ...auth },
    })
    await res.body.dump()
    return res.statusCode
  } finally {
    await client.close()
  }
}

/** POST /layout/converge?wait=1 with the agent's token: kicks the leg and waits for the run the kick asked for (at most 600 s). */
async function convergeAndWait(agent: AgentProcess): Promise<void> {
  const res = await request(new URL('/layout/converge?wait=1&timeout=600', agent.url), {
    method: 'POST',
    headers: agent.authorization(),
    headersTimeout: 700_000,
    bodyTimeout: 700_000,
  })
  await res.body.dump()
  if (res.statusCode !== 200) throw new Error(`POST /layout/converge?wait=1 answered ${res.statusCode}`)
}

/** The bare Fastify baseline, in its own process, serving the objects of these files. */
async function startBare(
  reportFile: string,
  readyFile: string,
  launcher: readonly string[],
): Promise<{ origin: string; stop: () => void }> {
  const js = new URL('./bare-server.js', import.meta.url)
  const [program, args] = throughLauncher(launcher, [js.pathname, reportFile, readyFile])
  const child = spawn(program, args, { stdio: ['ignore', 'pipe', 'inherit'] })
  const port = await new Promise<string>((resolve, reject) => {
    child.once('error', reject)
    child.once('exit', (code) => reject(new Error(`bare server exited ${String(code)}`)))
    child.stdout.setEncoding('utf8').once('data', (s: string) => resolve(s.trim()))
  })
  return { origin: `http://127.0.0.1:${port}`, stop: () => void child.kill('SIGTERM') }
}

async function waitIdle(agent: AgentProcess): Promise<void> {
  await agent.waitFor(
    'the first run of the leg to end',
    async () => {
      const leg = (await agent.status()).leg
      return !leg.running && !leg.pending && leg.lastRun !== null ? true : undefined
    },
    600_000,
  )
}

/** CPU seconds the process has used (user + system), from /proc. */
function cpuSeconds(pid: number): number {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? []
  return (Number(fields[11]) + Number(fields[12])) / 100
}

/**
 * Waits until the agent has used under 5% of a core for a whole second:
 * after ready it mints the instance keys of every host, and a rate taken
 * meanwhile would time that work, not the route.
 */
async function waitQuiet(agent: AgentProcess): Promise<void> {
  await agent.waitFor(
    'the agent to go quiet',
    async () => {
      const before = cpuSeconds(agent.pid)
      await new Promise((resolve) => setTimeout(resolve, 1000))
      return cpuSeconds(agent.pid) - before < 0.05 ? true : undefined
    },
    600_000,
  )
}

/**
 * layoutd and the bare server measured in turn, `rounds` times each, and
 * each side's best round kept: on a shared machine the best of a few is
 * the figure least moved by what else runs, and taking turns keeps a
 * quiet or a busy moment from favouring one side.
 */
async function sides(
  rounds: number,
  ours: () => Promise<LoadResult>,
  bare: () => Promise<LoadResult>,
): Promise<Side & { rounds: { layoutd: number[]; bareFastify: number[] } }> {
  const a: LoadResult[] = []
  const b: LoadResult[] = []
  for (let i = 0; i < rounds; i++) {
    a.push(await ours())
    b.push(await bare())
  }
  const best = (xs: LoadResult[]): LoadResult => xs.reduce((x, y) => (y.perSecond > x.perSecond ? y : x))
  return {
    ...side(best(a), best(b)),
    rounds: { layoutd: a.map((r) => r.perSecond), bareFastify: b.map((r) => r.perSecond) },
  }
}

/** How the agent is started: as the unit starts it (its flags and environment), with more environment (`--env`), its heaps readable. */
interface AgentSpec {
  sched: Scheduling
  env: Record<string, string>
  /** Where its diagnostic reports go (bench/memory.ts). */
  reports: string
}

async function startTimed(sb: Sandbox, spec: AgentSpec): Promise<{ agent: AgentProcess; seconds: number }> {
  const agent = await AgentProcess.start(sb, {
    listenTimeoutMs: 120_000,
    nodeArgs: [...unitNodeArgs(), ...reportArgs(spec.reports)],
    launcher: spec.sched.launcher,
    env: { ...unitEnvironment(), ...spec.env },
  })
  await agent.waitReady(600_000)
  return { agent, seconds: round((performance.now() - agent.startedAt) / 1000) }
}

export interface AllOptions {
  hosts: number
  seconds: number
  journals: number
  rounds: number
  /** How long the agent is left idle after the converge before its memory is read again. */
  idle: number
  /** More environment for the agent (MALLOC_ARENA_MAX=2, UV_THREADPOOL_SIZE=…): what a figure costs or buys. */
  env: Record<string, string>
  /** The converge alone: no routes under load before it, no start with journals after it. */
  convergeOnly: boolean
}

export async function runAll(root: string, opts: AllOptions) {
  const load0 = os.loadavg()
  const sb = await makeSandbox(path.join(root, 'box'))
  log(`making ${opts.hosts} flat tenants`)
  const { dirs, hosts, file } = makeTenants(sb, opts.hosts)
  // The contract's own floor for a converge, on these trees before the agent
  // has them: every source walked for hard links as find does it, and the
  // same renames group-committed (bench/converge.ts), one way of the two.
  const pool = threadPoolSize()
  if (pool < SYNC_CONCURRENCY)
    throw new Error(
      `run with UV_THREADPOOL_SIZE=${SYNC_CONCURRENCY} (npm run bench does): the pool has ${pool} threads`,
    )
  // Timed on a disk that has written back the trees just made, as the converge is.
  settleDisk()
  log('the floor: find -links +1 over every source, and the group-committed renames')
  const walk = await findWalk(path.join(dirs.dataDir, 'apps'))
  const renames = await groupCommittedBaseline({ sb, dirs, tenants: hosts.map((host) => ({ host })) })
  const floorSeconds = walk.seconds + renames.seconds / 2

  log('routes import')
  const i0 = performance.now()
  const imported = await runCli(sb, ['routes', 'import', file])
  const importSeconds = round((performance.now() - i0) / 1000)
  if (imported.exit.code !== 0) throw new Error(`routes import failed: ${imported.stderr}`)

  await recordIntent(sb, 'flat')
  log('start with the rows, no journal')
  // The agent as contrib/layoutd.service starts it (its loop's thread real-time where
  // this machine allows it), and every server it is measured beside alike.
  const sched = unitScheduling()
  const agentSpec: AgentSpec = { sched, env: opts.env, reports: path.join(root, 'reports') }
  const first = await startTimed(sb, agentSpec)
  const agent = first.agent
  const out: Record<string, unknown> = {}
  let bareReady: Awaited<ReturnType<typeof startBareReady>> | undefined
  try {
    await waitIdle(agent)
    await waitQuiet(agent)
    out.beforeConverge = {
      ...(await memory(agent.pid, agentSpec.reports)),
      what: 'the agent started on every row, its first run over and its keys minted, quiet: RSS, threads, heaps',
    }
    if (!opts.convergeOnly) {
      const { body: report, etag } = await get<LayoutReport>(agent.url, '/layout/status')
      const { body: ready } = await get<unknown>(agent.url, '/ready')
      fs.writeFileSync(path.join(root, 'report.json'), JSON.stringify(report))
      fs.writeFileSync(path.join(root, 'ready.json'), JSON.stringify(ready))
      const bare = await startBare(path.join(root, 'report.json'), path.join(root, 'ready.json'), sched.launcher)
      try {
        const spec = { seconds: opts.seconds, connections: 10 }
        const rounds = opts.rounds
        log('status 200')
        const status200 = await sides(
          rounds,
          () => load({ ...spec, origin: agent.url, path: '/layout/status' }),
          () => load({ ...spec, origin: bare.origin, path: '/status' }),
        )
        log('status 304')
        const status304 = await sides(
          rounds,
          () => load({ ...spec, origin: agent.url, path: '/layout/status', headers: { 'if-none-match': etag } }),
          () => load({ ...spec, origin: bare.origin, path: '/status304', headers: { 'if-none-match': '"bare.1"' } }),
        )
        log('/ready')
        const readyLoad = await sides(
          rounds,
          () => load({ ...spec, origin: agent.url, path: '/ready' }),
          () => load({ ...spec, origin: bare.origin, path: '/ready' }),
        )
        log('/ready/:host')
        const readyHost = await load({
          ...spec,
          origin: agent.url,
          path: (n) => `/ready/${hosts[n % hosts.length] ?? ''}`,
        })
        log('claims')
        const claims = await load({
          ...spec,
          connections: 4,
          warmup: 0,
          origin: agent.url,
          method: 'POST',
          headers: agent.authorization(),
          path: (n) => `/wakes/${hosts[n % hosts.length] ?? ''}`,
        })
        const unauthorised = (claims.statuses['401'] ?? 0) + (claims.statuses['403'] ?? 0)
        if (unauthorised > 0) throw new Error(`${unauthorised} claims were refused their token (401/403)`)
        if ((await send(agent.url, 'PUT', '/wakes', { awake: [] }, agent.authorization())) !== 200)
          throw new Error('PUT /wakes did not release the claims')
        Object.assign(out, {
          status200,
          status304,
          ready: readyLoad,
          readyHost,
          claimsIdle: {
            ...claims,
            what: 'POST /wakes/:host, a different sleeping host each time (granted, recorded in the registry)',
          },
        })
      } finally {
        bare.stop()
      }
    }

    // The tree as warm as the floor's walk found it, right after it was
    // made: this machine pages out what has gone a minute unread (DAMON),
    // and the phases above take about that long, so the converge's walk
    // had been reading some of the tenants' directories back from the disk
    // where find had not (design §3.6). The same walk, untimed in the ratio.
    log('the tenants warmed as the floor found them: find over every source, again')
    const warmUp = await findWalk(path.join(dirs.dataDir, 'apps'))
    log(`converge to nested, GET /ready/:host at 100 req/s and POST /wakes/:host at ${CLAIMS_PER_SECOND}/s throughout`)
    bareReady = await startBareReady(sched.launcher)
    // This bench's own loop sends the requests and reads the answers: real-time,
    // one priority below the agent's, while the converge runs, so a latency is
    // the agent's wait and not the load generator's (its own lateness is counted apart).
    const loadGenerator = scheduleThisLoop(sched)
    // The open loops of bench/ready-during-converge.ts: each request due at
    // its own tick, its latency counted from that tick. The claims take the
    // hosts from the other end, and each granted claim is released at once.
    const pool = new Pool(agent.url, { connections: 16 })
    const claimPool = new Pool(agent.url, { connections: 8 })
    const stop = new AbortController()
    const during = openLoad(pool, hosts, 100, stop.signal)
    const claimsDuring = openLoad(
      claimPool,
      [...hosts].reverse(),
      CLAIMS_PER_SECOND,
      stop.signal,
      askClaim(agent.authorization()),
    )
    // An operator's console open throughout: GET /layout/status every 2 s, and GET / when it changed.
    const consolePool = new Pool(agent.url, { connections: 2 })
    const consoleDuring = pollLikeConsole(consolePool, stop.signal)
    // The machine's floor for the p99, in the same converge: bench/bare-ready.ts
    // asked at the same rate, what any answering thread waits while the box converges.
    const bareDuring = openLoad(bareReady.pool, hosts, 100, stop.signal, askBare)
    // The agent's own event-loop lag over the same stretch (bench/lag-probe.ts).
    // Its first scrape waits for the row gauges, counted on the report
    // thread, which ends on a box nobody has asked for 150 s and is then
    // started again and sent the box (0.3–0.45 s here, design §3.6): before the intent.
    const lagProbe = await LagProbe.start(agent.url)
    // The converge is timed from here: the intent recorded, as an operator
    // times it, with the loads already running.
    const c0 = performance.now()
    const cpu0 = threadCpu(agent.pid)
    await recordIntent(sb, 'nested')
    const intentSeconds = round((performance.now() - c0) / 1000)
    // The run the converge asks for, waited on (as bench/ready-during-converge.ts does):
    // the figure is that run's, and the loads stop when it ends.
    await convergeAndWait(agent)
    const convergeSeconds = round((performance.now() - c0) / 1000)
    const agentCpu = cpuSince(cpu0, agent.pid)
    const lag = await lagProbe.stop()
    stop.abort()
    out.scheduling = { agent: sched.what, servers: sched.what, loadGenerator }
    out.lagDuringConverge = { ...lag, targetP99Ms: 50 }
    // A host a bench claim held at the instant the pass reached it was
    // deferred as awake (the contract): its claim is released, and one more
    // run moves it, rather than the retry timer minutes later.
    await convergeAndWait(agent)
    await agent.waitConverged(hosts, 'nested', 600_000, 1000)
    const readyHost = await during
    const floor = await bareDuring
    out.readyHostDuringConverge = {
      rate: 100,
      ...readyHost,
      console: await consoleDuring,
      machineFloor: {
        ...floor,
        what: 'the same GET /ready/:host at the same rate through the same converge, asked of a node:http server that does nothing but answer (bench/bare-ready.ts, a process of its own)',
      },
      targetP99Ms: READY_P99_TARGET_MS,
      met: readyHost.p99Ms <= READY_P99_TARGET_MS,
      what: 'GET /ready/:host open-loop at 100/s through the converge run, a console polling every 2 s (GET /layout/status, and GET / when it changed); latency from each due tick',
    }
    const ratio = round(floorSeconds / convergeSeconds)
    out.convergeVsFloor = {
      hosts: hosts.length,
      convergeSeconds,
      floor: {
        seconds: round(floorSeconds),
        walk: { seconds: round(walk.seconds), linked: walk.linked },
        renames: { ...renames, seconds: round(renames.seconds) },
        what: `find -P D/apps -type f -links +1 over every source, plus half of the group-committed renames to nested and back (${SYNC_CONCURRENCY} fsyncs in flight): one converge's worth`,
      },
      warmUp: {
        seconds: round(warmUp.seconds),
        what: "the floor's walk again just before the converge, untimed in the ratio: every source as warm in the page cache as the floor found it (longer than floor.walk where the machine had paged some out since)",
      },
      intentSeconds,
      intentWhat:
        'of convergeSeconds, the stretch before the intent was on record (`layoutd intent migrate --fleet`, run in this process); the loads and the lag probe were started before either',
      ratio,
      targetRatio: FLOOR_RATIO_TARGET,
      met: ratio >= FLOOR_RATIO_TARGET,
      agentCpu,
    }
    out.claimsDuringConverge = {
      rate: CLAIMS_PER_SECOND,
      ...(await claimsDuring),
      what: 'POST /wakes/:host open-loop at a steady rate through the converge run, latency from each due tick; non200 are refusals (a host fenced for its move); each granted claim released at once',
    }
    scheduleThisLoop(sched, true)
    await pool.close()
    await claimPool.close()
    await consolePool.close()
    await waitIdle(agent)
    // After what a run's end sets going (the report for the gauges, the
    // box's summary, the heap's trim a second later): the box as it stays.
    await waitQuiet(agent)
    const after = await memory(agent.pid, agentSpec.reports)
    // Left alone for a while, as a box is between converges: what it keeps.
    await new Promise((resolve) => setTimeout(resolve, opts.idle * 1000))
    const idle = await memory(agent.pid, agentSpec.reports)
    out.afterConverge = {
      seconds: convergeSeconds,
      movesPerSecond: Math.round(hosts.length / convergeSeconds),
      ...after,
      idle: { ...idle, afterSeconds: opts.idle, targetRssMB: 100 },
      targetRssMB: 150,
      env: { ...unitEnvironment(), ...opts.env },
      what: "RSS, threads and each thread's heap once the converge is over and the agent quiet; idle: the same after `--idle` seconds more",
    }
  } finally {
    await bareReady?.stop()
    await agent.stop()
  }

  if (opts.convergeOnly) return { hosts: hosts.length, ...out, machine: machine(load0) }
  // Journals left as a crash would leave them: written, no file moved yet.
  const n = Math.min(opts.journals, hosts.length)
  log(`start with ${n} journals to recover`)
  const registry = Registry.open(sb.dataDir)
  let journals: Journal[]
  try {
    const generation = registry.nextGeneration()
    const startedAt = new Date().toISOString()
    journals = hosts.slice(0, n).map((host) => {
      const row = registry.get(host)
      if (row === undefined) throw new Error(`${host} has no row`)
      const dest = pathsFor(dirs, host, 'flat')
      return {
        v: 1,
        host,
        to: 'flat',
        from: { dir: row.dir, socket: row.socket, db: row.db },
        dest: { ...dest, db: path.join(dest.dir, path.relative(row.dir, row.db)) },
        generation,
        startedAt,
      }
    })
  } finally {
    registry.close()
  }
  await writeJournals(dirs, journals)
  await recordIntent(sb, 'flat')
  const second = await startTimed(sb, agentSpec)
  try {
    const redone = (await second.agent.metric('carlos_layout_recovered_journals_total{action="redone"}')) ?? 0
    out.startUp = {
      rows: { hosts: hosts.length, journals: 0, seconds: first.seconds, targetSeconds: 1 },
      journals: { hosts: hosts.length, journals: n, redone, seconds: second.seconds, targetSeconds: 3 },
    }
  } finally {
    await second.agent.kill()
  }

  return {
    hosts: hosts.length,
    routesImport: {
      rows: hosts.length,
      seconds: importSeconds,
      targetSeconds: 2,
      what: 'layoutd routes import FILE, spawn to exit',
    },
    ...out,
    machine: machine(load0),
  }
}

function machine(loadavgBefore: number[]) {
  return {
    cpus: os.cpus().length,
    model: os.cpus()[0]?.model ?? '',
    node: process.version,
    loadavgBefore,
    loadavgAfter: os.loadavg(),
  }
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      hosts: { type: 'string', default: '10000' },
      seconds: { type: 'string', default: '3' },
      journals: { type: 'string', default: '1000' },
      rounds: { type: 'string', default: '3' },
      runs: { type: 'string', default: '5' },
      idle: { type: 'string', default: '60' },
      env: { type: 'string', multiple: true, default: [] },
      'converge-only': { type: 'boolean', default: false },
      dir: { type: 'string' },
      keep: { type: 'boolean', default: false },
    },
  })
  const [hosts, seconds, journals, rounds, runs, idle] = [
    Number(values.hosts),
    Number(values.seconds),
    Number(values.journals),
    Number(values.rounds),
    Number(values.runs),
    Number(values.idle),
  ]
  const env = Object.fromEntries(values.env.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]))
  if (
    ![hosts, seconds, journals, rounds, runs].every((x) => Number.isInteger(x) && x > 0) ||
    !(Number.isInteger(idle) && idle >= 0) ||
    values.env.some((kv) => !/^[A-Z_][A-Z0-9_]*=/.test(kv))
  ) {
    process.stderr.write(
      'usage: node dist/bench/all.js [--runs N] [--hosts N] [--seconds S] [--journals J] [--rounds R] [--idle S] ' +
        '[--env KEY=VALUE]... [--converge-only] [--dir D] [--keep]\n',
    )
    return 2
  }
  const root = values.dir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'layoutd-bench-all-'))
  const options = { hosts, seconds, journals, rounds, idle, env, convergeOnly: values['converge-only'] }
  try {
    if (runs === 1) {
      process.stdout.write(`${JSON.stringify(await runAll(root, options), null, 2)}\n`)
      return 0
    }
    const docs: RunDoc[] = []
    for (let i = 1; i <= runs; i++) {
      log(`run ${i} of ${runs}`)
      const dir = path.join(root, `run-${i}`)
      fs.mkdirSync(dir)
      docs.push((await runAll(dir, options)) as RunDoc)
      if (!values.keep) fs.rmSync(dir, { recursive: true, force: true })
    }
    const spread = spreadOf(docs)
    const missed = Object.keys(spread).filter((name) => spread[name]?.metInEvery === false)
    process.stdout.write(`${JSON.stringify({ runs: docs, spread, missed }, null, 2)}\n`)
    return 0
  } finally {
    if (!values.keep) fs.rmSync(root, { recursive: true, force: true })
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await main()
}

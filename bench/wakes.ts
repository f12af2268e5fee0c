// Wake claims under load while the box converges (design §3 step 3, §6.1:
// no window between a claim's check and a fence): the real agent as a child process with N flat tenants (default
// 1000) migrated and reverted, over and over, for the whole run, while C
// connections (default 10) claim a random sleeping tenant, check the grant
// while the claim stands, and release it. Every grant is checked the way
// an instance would find it as it starts: the directory exists and holds
// that tenant's files and database, and no journal names the host. A
// reference activator honours the agent's stop requests.
//
// Next to it, in the same run and with the same connections and loop, a
// bare Fastify route in a process of its own: what the claim path costs
// over answering HTTP at all. Prints JSON.
//
//   node dist/bench/wakes.js [--hosts 1000] [--duration 30] [--connections 10]
//                            [--bare-duration SECONDS] [--dir D] [--keep]
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import fsp from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import { Pool } from 'undici'
import type { WakeGrant, WakeRefusal } from '../src/agent-api.js'
import type { Mode } from '../src/domain/modes.js'
import { pathsFor } from '../src/domain/paths.js'
import { Registry } from '../src/infra/registry.js'
import { AgentProcess, makeSandbox, recordIntent, type Sandbox } from '../test/helpers/agent-process.js'
import { ReferenceActivator } from '../test/helpers/reference-activator.js'

export interface Latency {
  requests: number
  perSecond: number
  p50Ms: number
  p99Ms: number
  maxMs: number
}

export interface WakesBench {
  hosts: number
  connections: number
  durationSeconds: number
  claims: Latency & {
    granted: number
    refused: Record<string, number>
    /** Grants whose directory did not hold the tenant's files, or that came while a journal named the host. */
    wrongGrants: number
    /** Answers other than 200/409 (claims) and 204 (releases), and requests that failed. */
    errors: number
  }
  releases: Latency
  converge: {
    /** Converges (migrate or revert) that reached every host within the run. */
    completed: number
    hostMoves: number
    /** Stop requests the agent sent the activator (hosts awake past their grace). */
    stopsAsked: number
  }
  bare: Latency & { errors: number }
  /** Claim throughput and p99 over the bare route's. */
  ratio: { throughput: number; p99: number }
  /** The agent's own count of claim answers, by result. */
  agentCounts: Record<string, number>
  firstProblems: string[]
  machine: { cpus: number; loadavg: number[] }
}

/** Light tenants: a marker, a database, a few files; the claims are the subject, not the size of a move. */
function makeTenants(sb: Sandbox, n: number): string[] {
  const dirs = { dataDir: sb.dataDir, runDir: path.join(sb.dataDir, 'run') }
  fs.mkdirSync(dirs.runDir, { recursive: true })
  const hosts: string[] = []
  const registry = Registry.open(sb.dataDir)
  try {
    for (let i = 0; i < n; i++) {
      const host = `t${i}.bench.example.com`
      const p = pathsFor(dirs, host, 'flat')
      fs.mkdirSync(path.join(p.dir, 'public'), { recursive: true })
      fs.writeFileSync(path.join(p.dir, 'host.txt'), host)
      fs.writeFileSync(path.join(p.dir, 'app.db'), `db of ${host}`)
      fs.writeFileSync(path.join(p.dir, 'public', 'index.html'), `<h1>${host}</h1>\n`)
      registry.add({ host, kind: 'instance', hibernate: true, ...p, db: path.join(p.dir, 'app.db') })
      hosts.push(host)
    }
  } finally {
    registry.close()
  }
  return hosts
}

/** Why a grant is wrong, checked while its claim stands; undefined when it is right. */
async function grantProblem(sb: Sandbox, host: string, g: WakeGrant): Promise<string | undefined> {
  try {
    if ((await fsp.readFile(path.join(g.dir, 'host.txt'), 'utf8')) !== host)
      return `${host}: ${g.dir} holds another tenant's files`
    if ((await fsp.readFile(g.db, 'utf8')) !== `db of ${host}`) return `${host}: ${g.db} is not its database`
  } catch (err) {
    return `${host}: granted ${g.dir}, where its files are not (${(err as Error).message})`
  }
  try {
    await fsp.lstat(path.join(sb.dataDir, 'layout', `${host}.journal`))
    return `${host}: granted while a journal names it`
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') return `${host}: ${(err as Error).message}`
  }
  return undefined
}

function summarise(ms: number[], seconds: number): Latency {
  const sorted = Float64Array.from(ms).sort()
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0
  return {
    requests: ms.length,
    perSecond: ms.length / seconds,
    p50Ms: at(0.5),
    p99Ms: at(0.99),
    maxMs: sorted[sorted.length - 1] ?? 0,
  }
}

interface LoopResult {
  claimMs: number[]
  releaseMs: number[]
  granted: number
  refused: Record<string, number>
  wrong: string[]
  errors: string[]
  seconds: number
}

/**
 * `connections` workers, each on its own connection, claim a random host
 * no other worker holds, run `check` on a grant, and release it; until
 * `seconds` have passed.
 */
async function claimLoop(
  pool: Pool,
  hosts: readonly string[],
  connections: number,
  seconds: number,
  check?: (host: string, g: WakeGrant) => Promise<string | undefined>,
  /** The agent's bearer token header, which every claim and release carries (design §6). */
  auth: Record<string, string> = {},
): Promise<LoopResult> {
  const r: LoopResult = { claimMs: [], releaseMs: [], granted: 0, refused: {}, wrong: [], errors: [], seconds }
  // Two workers never hold one host: one's release would end the other's claim.
  const held = new Set<string>()
  let seed = 20261130
  const pick = (): string => {
    for (;;) {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0
      const h = hosts[seed % hosts.length] ?? ''
      if (!held.has(h)) return h
    }
  }
  const t0 = performance.now()
  const end = t0 + seconds * 1000
  const worker = async (): Promise<void> => {
    while (performance.now() < end) {
      const host = pick()
      held.add(host)
      try {
        const s = performance.now()
        const res = await pool.request({ method: 'POST', path: `/wakes/${host}`, headers: auth })
        const body = (await res.body.json()) as WakeGrant & WakeRefusal
        r.claimMs.push(performance.now() - s)
        if (res.statusCode === 409) {
          const kind = body.code
          r.refused[kind] = (r.refused[kind] ?? 0) + 1
          continue
        }
        if (res.statusCode !== 200) {
          r.errors.push(`POST /wakes/${host}: ${res.statusCode} ${JSON.stringify(body)}`)
          continue
        }
        r.granted++
        const problem = await check?.(host, body)
        if (problem !== undefined) r.wrong.push(problem)
        const d = performance.now()
        const del = await pool.request({ method: 'DELETE', path: `/wakes/${host}`, headers: auth })
        await del.body.dump()
        r.releaseMs.push(performance.now() - d)
        if (del.statusCode !== 204) r.errors.push(`DELETE /wakes/${host}: ${del.statusCode}`)
      } catch (err) {
        r.errors.push(`${host}: ${(err as Error).message}`)
      } finally {
        held.delete(host)
      }
    }
  }
  await Promise.all(Array.from({ length: connections }, worker))
  r.seconds = (performance.now() - t0) / 1000
  return r
}

/** Migrates and reverts, over and over, until the deadline; answers how many converges finished. */
async function convergeLoop(
  agent: AgentProcess,
  sb: Sandbox,
  hosts: readonly string[],
  deadline: number,
): Promise<{ completed: number }> {
  let completed = 0
  let mode: Mode = 'nested'
  while (performance.now() < deadline) {
    await recordIntent(sb, mode)
    for (;;) {
      if (performance.now() >= deadline) return { completed }
      // Polled every 500 ms: each report walks every row, and the agent is under test.
      await new Promise((r) => setTimeout(r, 500))
      const s = await agent.status()
      if (!s.leg.running && !s.leg.pending && hosts.every((h) => s.rows[h]?.layout === mode)) break
    }
    completed++
    mode = mode === 'nested' ? 'flat' : 'nested'
  }
  return { completed }
}

/** The bare route, in a process of its own as the agent is: spawned from this same file. */
async function startBare(): Promise<{ url: string; stop: () => Promise<void> }> {
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url), '--serve-bare'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const lines = createInterface({ input: child.stdout })
  const port = await new Promise<string>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`the bare server exited (${String(code)})`)))
    lines.once('line', resolve)
  })
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  return {
    url: `http://127.0.0.1:${port}`,
    stop: async () => {
      child.kill('SIGTERM')
      await exited
    },
  }
}

async function serveBare(): Promise<void> {
  const { default: Fastify } = await import('fastify')
  const app = Fastify()
  app.post<{ Params: { host: string } }>('/wakes/:host', (request) => ({ host: request.params.host }))
  app.delete('/wakes/:host', (_request, reply) => reply.code(204).send())
  await app.listen({ host: '127.0.0.1', port: 0 })
  const addr = app.server.address()
  process.stdout.write(`${typeof addr === 'object' && addr !== null ? addr.port : 0}\n`)
  process.once('SIGTERM', () => void app.close())
}

async function agentCounts(agent: AgentProcess): Promise<Record<string, number>> {
  const out: Record<string, number> = {}
  for (const result of ['granted', 'fenced', 'held', 'conflict', 'not_ready', 'gate_shut', 'unknown_host', 'error']) {
    out[result] = (await agent.metric(`carlos_layout_wake_claims_total{result="${result}"}`)) ?? 0
  }
  return out
}

export async function runWakesBench(
  root: string,
  opts: { hosts: number; connections: number; seconds: number; bareSeconds: number },
  log: (l: string) => void = () => undefined,
): Promise<WakesBench> {
  const sb = await makeSandbox(root, 'bench-box')
  log(`wakes: making ${opts.hosts} flat tenants under ${root}`)
  const hosts = makeTenants(sb, opts.hosts)
  const act = await ReferenceActivator.start()
  const agent = await AgentProcess.start(sb, {
    env: {
      CARLOS_ACTIVATOR_URL: act.url,
      CARLOS_LAYOUT_DEFAULT: 'flat',
      CARLOS_LAYOUT_POLL: '200ms',
      // A tenant claimed as its batch is fenced is deferred; short clocks
      // bring the leg back for it within the run.
      CARLOS_LAYOUT_AWAKE_GRACE: '1s',
      CARLOS_LAYOUT_RETRY: '1s',
    },
  })
  const pool = new Pool(agent.url, { connections: opts.connections, headersTimeout: 30_000, bodyTimeout: 30_000 })
  act.connect(agent)
  let running = true
  try {
    await agent.waitReady(120_000)
    log(`wakes: ${opts.connections} connections claiming for ${opts.seconds} s while the box converges`)
    const deadline = performance.now() + opts.seconds * 1000
    const [loop, conv] = await Promise.all([
      claimLoop(
        pool,
        hosts,
        opts.connections,
        opts.seconds,
        (host, g) => grantProblem(sb, host, g),
        agent.authorization(),
      ),
      convergeLoop(agent, sb, hosts, deadline),
    ])
    const moved = (await agent.metric('carlos_layout_moves_total{to="nested",outcome="moved"}')) ?? 0
    const movedBack = (await agent.metric('carlos_layout_moves_total{to="flat",outcome="moved"}')) ?? 0
    const counts = await agentCounts(agent)
    running = false
    await pool.close()
    await agent.stop()
    await act.close()

    log(`wakes: the bare Fastify route for ${opts.bareSeconds} s`)
    const bare = await startBare()
    const barePool = new Pool(bare.url, { connections: opts.connections })
    let b: LoopResult
    try {
      b = await claimLoop(barePool, hosts, opts.connections, opts.bareSeconds)
    } finally {
      await barePool.close()
      await bare.stop()
    }
    const claims = summarise(loop.claimMs, loop.seconds)
    const bareLat = summarise(b.claimMs, b.seconds)
    return {
      hosts: opts.hosts,
      connections: opts.connections,
      durationSeconds: loop.seconds,
      claims: {
        ...claims,
        granted: loop.granted,
        refused: loop.refused,
        wrongGrants: loop.wrong.length,
        errors: loop.errors.length + act.errors.length,
      },
      releases: summarise(loop.releaseMs, loop.seconds),
      converge: { completed: conv.completed, hostMoves: moved + movedBack, stopsAsked: act.stops.length },
      bare: { ...bareLat, errors: b.errors.length },
      ratio: { throughput: claims.perSecond / bareLat.perSecond, p99: claims.p99Ms / bareLat.p99Ms },
      agentCounts: counts,
      firstProblems: [...loop.wrong, ...loop.errors, ...act.errors].slice(0, 20),
      machine: { cpus: os.cpus().length, loadavg: os.loadavg() },
    }
  } finally {
    if (running) {
      await pool.close()
      await agent.kill()
      await act.close()
    }
  }
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      hosts: { type: 'string', default: '1000' },
      duration: { type: 'string', default: '30' },
      connections: { type: 'string', default: '10' },
      'bare-duration': { type: 'string' },
      dir: { type: 'string' },
      keep: { type: 'boolean', default: false },
      'serve-bare': { type: 'boolean', default: false },
    },
  })
  if (values['serve-bare']) {
    await serveBare()
    return 0
  }
  const hosts = Number(values.hosts)
  const seconds = Number(values.duration)
  const connections = Number(values.connections)
  const bareSeconds = Number(values['bare-duration'] ?? values.duration)
  if (![hosts, connections].every((n) => Number.isInteger(n) && n >= 1) || !(seconds > 0) || !(bareSeconds > 0)) {
    process.stderr.write(
      'usage: node dist/bench/wakes.js [--hosts N] [--duration SECONDS] [--connections C] [--bare-duration SECONDS] [--dir D] [--keep]\n',
    )
    return 2
  }
  if (connections >= hosts) {
    process.stderr.write('wakes: --connections must be below --hosts: each connection holds a host of its own\n')
    return 2
  }
  const root = values.dir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'layoutd-wakes-'))
  try {
    const r = await runWakesBench(root, { hosts, connections, seconds, bareSeconds }, (l) =>
      process.stderr.write(`${l}\n`),
    )
    process.stdout.write(`${JSON.stringify(r, null, 2)}\n`)
    return r.claims.wrongGrants === 0 && r.claims.errors === 0 ? 0 : 1
  } finally {
    if (!values.keep) fs.rmSync(root, { recursive: true, force: true })
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await main()
}

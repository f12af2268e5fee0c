// The soak (design §3–§6): the real agent (`layoutd serve`, the dist build,
// on a loopback port, with the directory deploy store) on a temp box of N
// tenants (default 1000, the crash harness's trees: nested dirs, odd names,
// links, modes, a database), for M minutes:
//
// - the intent is recorded nested, then flipped every --flip-seconds (30),
//   with the CLI's own command, as the other benches do;
// - an activator (bench/soak-activator.ts) claims random tenants through
//   the agent's HTTP API, lets each run a short random time, releases it,
//   and honours the agent's stop requests; every grant is checked while
//   its claim stands: the files are in exactly one place, the one the
//   grant and the registry row name, and the tree hashes as it did at
//   setup (its instance key aside);
// - the agent is killed with SIGKILL at random moments (uniform on
//   0..2 × --kill-every-seconds, default 20, after it listens; 0 for none)
//   and started again on the same box;
// - the agent's RSS (/proc/<pid>/status VmRSS) is sampled every 10 s.
//
// Then the flips stop, the activator drains (an empty awake set), the
// agent converges to the last intent, is stopped with SIGTERM, and the box
// is checked with no agent running (bench/crash.ts checkState): every tree
// byte-identical in exactly one place, the registry agreeing with the
// disk, no journal, no temporary file, no hold marker.
//
//   npm run soak -- [--minutes 10] [--tenants 1000] [--seed N] [--flip-seconds 30]
//                   [--kill-every-seconds 20] [--claimers 8] [--dir D] [--keep]
//
// Prints one JSON object; exits 1 when its `problems` is not empty.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import { pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import { request } from 'undici'
import type { WakeGrant } from '../src/agent-api.js'
import type { Mode } from '../src/domain/modes.js'
import { pathsFor } from '../src/domain/paths.js'
import { errorMessage } from '../src/errors.js'
import { Registry } from '../src/infra/registry.js'
import { AgentProcess, recordIntent, sandboxToken } from '../test/helpers/agent-process.js'
import { treeLines } from '../test/helpers/tenants.js'
import { checkState, layoutFiles, makeWorld, rng, rowPathsFor, treePrint, type Tenant, type World } from './crash.js'
import { SoakActivator } from './soak-activator.js'

export interface SoakOptions {
  minutes: number
  tenants: number
  seed: number
  flipSeconds: number
  /** Mean seconds between kills; 0: never killed. */
  killEverySeconds: number
  claimers: number
  root: string
  keepLogs?: boolean
  log?: (line: string) => void
}

export interface SoakSummary {
  minutes: number
  tenants: number
  seed: number
  flipSeconds: number
  killEverySeconds: number
  /** Intents recorded during the run, the first (nested, over flat tenants) included. */
  flips: number
  kills: number
  /** Agent processes started: kills + 1, plus any restart after an exit of its own. */
  lives: number
  /** Hosts moved (carlos_layout_moves_total{outcome="moved"}), summed over the lives, each read just before its kill. */
  moves: number
  /** Journals start-up recovery finished or kept (carlos_layout_recovered_journals_total), summed over the lives. */
  recoveredJournals: number
  grants: number
  wrongGrants: number
  claims: {
    sent: number
    refused: Record<string, number>
    releases: number
    interrupted: number
    awakeSets: number
    stopsAsked: number
  }
  /** Files hashed: at each grant and at the end, every file of each tree checked. */
  filesChecked: number
  /** Trees hashed: one per grant, and every tenant's at the end. */
  treesChecked: number
  journalsLeft: number
  holdsLeft: Array<{ host: string; reason: string }>
  finalMode: Mode
  /** The agent's VmRSS, every 10 s, in MB. */
  rssSamplesMb: number[]
  rss: {
    everySeconds: number
    /** Samples taken before this many seconds of the run are warm-up. */
    warmupSeconds: number
    firstAfterWarmupMb: number | null
    lastMb: number | null
    maxMb: number | null
    /** last / first after warm-up, and max / first after warm-up: near 1 when flat. */
    lastOverFirst: number | null
    maxOverFirst: number | null
    /** With kills, no process lives long: the longest life, in seconds. */
    longestLifeSeconds: number
  }
  /** Lines the agent logged at level error or fatal, and the first few. */
  agentErrorLines: { count: number; first: string[] }
  seconds: { setup: number; run: number; settle: number; total: number }
  problems: string[]
}

const RSS_EVERY_MS = 10_000
const METRICS_EVERY_MS = 2_000
const MAX_PROBLEMS = 50

/** Exists, without following a link. */
function present(p: string): boolean {
  try {
    fs.lstatSync(p)
    return true
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false
    throw err
  }
}

/** The agent's resident set, in MB, or undefined when it has gone. */
function rssMb(pid: number): number | undefined {
  try {
    const m = /^VmRSS:\s+(\d+) kB$/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))
    return m?.[1] === undefined ? undefined : Math.round(Number(m[1]) / 102.4) / 10
  } catch {
    return undefined
  }
}

/** What one agent process did, as its /metrics said at the last read. */
interface Life {
  pid: number
  startedAt: number
  endedAt?: number
  moves: number
  recovered: number
}

/** Reads the moves and recovered journals of one life from its /metrics; a failed read keeps the last. */
async function readCounters(agent: AgentProcess, life: Life): Promise<void> {
  try {
    const res = await request(`${agent.url}/metrics`, { headersTimeout: 2000, bodyTimeout: 2000 })
    const text = await res.body.text()
    if (res.statusCode !== 200) return
    let moves = 0
    let recovered = 0
    for (const line of text.split('\n')) {
      const value = Number(line.slice(line.lastIndexOf(' ') + 1))
      if (line.startsWith('carlos_layout_moves_total{') && line.includes('outcome="moved"')) moves += value
      if (line.startsWith('carlos_layout_recovered_journals_total{')) recovered += value
    }
    life.moves = moves
    life.recovered = recovered
  } catch {
    // Killed or not serving yet: the last read stands.
  }
}

/** The checks of a grant, against the disk and the registry, as an instance would find its files. */
export class GrantChecks {
  trees = 0
  files = 0
  readonly #w: World
  readonly #registry: Registry
  readonly #tenants: Map<string, { t: Tenant; files: number }>

  constructor(w: World, registry: Registry, fileCounts: Map<string, number>) {
    this.#w = w
    this.#registry = registry
    this.#tenants = new Map(w.tenants.map((t) => [t.host, { t, files: fileCounts.get(t.host) ?? 0 }]))
  }

  /** Where the grant puts the files, and that they are only there, as the registry row says. */
  placement(host: string, g: WakeGrant): { problem: string } | { t: Tenant; files: number; mode: Mode } {
    const known = this.#tenants.get(host)
    if (known === undefined) return { problem: 'a host the soak did not make' }
    const mode = (['flat', 'nested'] as const).find((m) => pathsFor(this.#w.dirs, host, m).dir === g.dir)
    if (mode === undefined) return { problem: `granted ${g.dir}, neither of its layouts' directories` }
    if (g.layout !== mode) return { problem: `granted as ${g.layout} at its ${mode} paths` }
    const want = rowPathsFor(this.#w, known.t, mode)
    if (g.socket !== want.socket || g.db !== want.db)
      return {
        problem: `granted socket ${g.socket} and db ${g.db}; its ${mode} ones are ${want.socket} and ${want.db}`,
      }
    const row = this.#registry.get(host)
    if (row === undefined || row.dir !== g.dir || row.socket !== g.socket || row.db !== g.db) {
      return { problem: `granted ${g.dir}, but the registry row names ${row === undefined ? 'nothing' : row.dir}` }
    }
    const other = pathsFor(this.#w.dirs, host, mode === 'flat' ? 'nested' : 'flat').dir
    if (present(other)) return { problem: `its files are in both places: ${g.dir} and ${other}` }
    if (!present(g.dir) || !fs.lstatSync(g.dir).isDirectory())
      return { problem: `granted ${g.dir}, which is not a directory` }
    const layout = path.join(this.#w.dirs.dataDir, 'layout')
    if (present(path.join(layout, `${host}.journal`))) return { problem: 'granted while a journal names it' }
    if (present(path.join(layout, `${host}.hold`))) return { problem: 'granted while a hold marker names it' }
    return { ...known, mode }
  }

  atGrant = (host: string, g: WakeGrant): string | undefined => {
    try {
      const p = this.placement(host, g)
      if ('problem' in p) return `${p.problem} (grant ${JSON.stringify(g)})`
      const tp = treePrint(g.dir)
      this.trees++
      this.files += p.files
      if (tp.hash !== p.t.hash) return `the tree at ${g.dir} differs from the one made at setup (hash)`
      if (p.t.key !== undefined && tp.key !== p.t.key)
        return `its instance key ${tp.key === undefined ? 'vanished' : 'changed'}`
      p.t.key ??= tp.key
      return undefined
    } catch (err) {
      return `checking the grant failed: ${errorMessage(err)}`
    }
  }

  atRelease = (host: string, g: WakeGrant): string | undefined => {
    try {
      const p = this.placement(host, g)
      return 'problem' in p ? p.problem : undefined
    } catch (err) {
      return `checking before the release failed: ${errorMessage(err)}`
    }
  }
}

/** Regular files in a tree (treeLines: `"rel" file <mode> <sha256>`). */
function fileCount(dir: string): number {
  return treeLines(dir).filter((l) => / file [0-7]+ [0-9a-f]{64}$/.test(l)).length
}

/** Counts the agent's error and fatal log lines (pino levels 50 and 60). */
function watchErrors(agent: AgentProcess, into: { count: number; first: string[] }): void {
  for (const stream of [agent.child.stdout, agent.child.stderr]) {
    let partial = ''
    stream?.on('data', (s: string | Buffer) => {
      const lines = (partial + s.toString()).split('\n')
      partial = lines.pop() ?? ''
      for (const line of lines) {
        if (!/"level":(50|60)\b/.test(line)) continue
        into.count++
        if (into.first.length < 5) into.first.push(line.slice(0, 400))
      }
    })
  }
}

export async function runSoak(opts: SoakOptions): Promise<SoakSummary> {
  const log = opts.log ?? (() => undefined)
  const problems: string[] = []
  const t0 = performance.now()
  log(`soak: making ${opts.tenants} flat tenants under ${opts.root}`)
  const w = await makeWorld(opts.root, opts.tenants, { firstSeed: opts.seed })
  const counts = new Map(w.tenants.map((t) => [t.host, fileCount(pathsFor(w.dirs, t.host, 'flat').dir)]))
  const hosts = w.tenants.map((t) => t.host)
  const setupSeconds = (performance.now() - t0) / 1000
  const killRandom = rng(opts.seed)
  const registry = Registry.open(w.sb.dataDir)
  const checks = new GrantChecks(w, registry, counts)
  const act = await SoakActivator.start({
    hosts,
    random: rng(opts.seed ^ 0x5eed),
    claimers: opts.claimers,
    runMs: [100, 2000],
    longRuns: 0.05,
    longRunMs: [3000, 10_000],
    atGrant: checks.atGrant,
    atRelease: checks.atRelease,
    // The token the agent made in D/agent.token at its first start (design §6),
    // read at each request: every life on this data root keeps the same file.
    token: () => sandboxToken(w.sb) || undefined,
  })
  const env = {
    CARLOS_ACTIVATOR_URL: act.url,
    // Short clocks: a tenant awake at a flip is stopped for its move within
    // the run (the activator's long runs outlast the grace), and a deferred
    // or held host comes back within seconds.
    CARLOS_LAYOUT_AWAKE_GRACE: '2s',
    CARLOS_LAYOUT_RETRY: '1s',
  }
  const logFile = opts.keepLogs === true ? path.join(opts.root, 'agent.log') : undefined
  const errorsSeen = { count: 0, first: [] as string[] }
  const lives: Life[] = []
  const rss: Array<{ atS: number; mb: number; life: number; ageS: number }> = []
  const runStart = performance.now()
  const end = runStart + opts.minutes * 60_000

  const start = async (): Promise<{ agent: AgentProcess; life: Life }> => {
    const agent = await AgentProcess.start(w.sb, { env, ...(logFile === undefined ? {} : { logFile }) })
    watchErrors(agent, errorsSeen)
    const life: Life = { pid: agent.pid, startedAt: performance.now(), moves: 0, recovered: 0 }
    lives.push(life)
    return { agent, life }
  }
  /** Ready, then the activator's awake set; a kill meanwhile ends it quietly. */
  const attach = async (agent: AgentProcess): Promise<void> => {
    try {
      await agent.waitReady(120_000)
      await act.attach(agent.url)
    } catch (err) {
      // A kill's connection reset can come before the child's exit is seen.
      const exit = await Promise.race([agent.exited, delay(5000, undefined)])
      if (exit?.signal !== 'SIGKILL')
        problems.push(`agent pid ${agent.pid} never took the awake set: ${errorMessage(err)}`)
    }
  }

  // Ends the flips and the sampling early when the soak itself fails.
  const halt = new AbortController()
  const pause = (ms: number): Promise<boolean> => delay(ms, true, { signal: halt.signal }).catch(() => false)

  // The intent: nested, then flipped every flipSeconds until the end.
  let finalMode: Mode = 'nested'
  let flips = 0
  const flipper = (async () => {
    for (let mode: Mode = 'nested'; ; mode = mode === 'nested' ? 'flat' : 'nested') {
      try {
        await recordIntent(w.sb, mode)
        finalMode = mode
        flips++
        log(`soak: intent ${mode} (${flips})`)
      } catch (err) {
        problems.push(`recording the intent ${mode}: ${errorMessage(err)}`)
      }
      const next = performance.now() + opts.flipSeconds * 1000
      if (next >= end || !(await pause(next - performance.now()))) return
    }
  })()

  let kills = 0
  let current: { agent: AgentProcess; life: Life } | undefined
  const holdsLeft: SoakSummary['holdsLeft'] = []
  let runSeconds = 0
  let settleSeconds = 0
  try {
    current = await start()
    let attached = attach(current.agent)
    // RSS every 10 s and the counters every 2 s, of whichever agent is running.
    const sampling = (async () => {
      let nextRss = performance.now() + RSS_EVERY_MS
      while (performance.now() < end) {
        if (!(await pause(METRICS_EVERY_MS))) return
        if (current === undefined) continue
        const { agent, life } = current
        await readCounters(agent, life)
        if (performance.now() < nextRss) continue
        // An agent just killed has no RSS: the sample is taken of the next one, at the next tick.
        const mb = rssMb(agent.pid)
        if (mb === undefined) continue
        nextRss += RSS_EVERY_MS
        const at = performance.now()
        const s = {
          atS: Math.round((at - runStart) / 1000),
          mb,
          life: lives.length,
          ageS: Math.round((at - life.startedAt) / 1000),
        }
        rss.push(s)
        log(
          `soak: rss ${mb} MB (life ${s.life}, pid ${agent.pid}, ${s.ageS} s old) at ${s.atS} s; ${act.counts.grants} grants, ${kills} kills`,
        )
      }
    })()

    while (performance.now() < end) {
      const lifeMs = opts.killEverySeconds > 0 ? killRandom() * 2 * opts.killEverySeconds * 1000 : Infinity
      const until = Math.min(end, performance.now() + lifeMs)
      const ac = new AbortController()
      const why = await Promise.race([
        delay(Math.max(0, until - performance.now()), 'time' as const, { signal: ac.signal }).catch(
          () => 'time' as const,
        ),
        current.agent.exited.then(() => 'exited' as const),
      ])
      ac.abort()
      if (why === 'exited') {
        problems.push(
          `the agent exited on its own: ${JSON.stringify(current.agent.exit)}; its last output:\n${current.agent.tail()}`,
        )
      } else if (until >= end) break
      else {
        await readCounters(current.agent, current.life)
        act.losing()
        await current.agent.kill()
        kills++
      }
      current.life.endedAt = performance.now()
      await act.detach()
      await attached
      current = await start()
      attached = attach(current.agent)
    }
    await flipper
    await sampling
    await attached
    runSeconds = (performance.now() - runStart) / 1000

    // Settle: no more claims, the agent converges to the last intent, stops cleanly.
    const s0 = performance.now()
    const { agent, life } = current
    log(`soak: ${kills} kills, ${flips} flips; draining the activator and converging ${finalMode}`)
    await act.drain()
    log(`soak: activator drained; waiting for every host ${finalMode} and the leg idle`)
    try {
      await agent.waitConverged(hosts, finalMode, 120_000 + 100 * hosts.length, 500)
    } catch (err) {
      const r = await agent.status().catch(() => undefined)
      const off = r === undefined ? [] : hosts.filter((h) => r.rows[h]?.layout !== finalMode)
      const examples = off.slice(0, 10).map((h) => `${h}: ${r?.rows[h]?.layout} (${r?.rows[h]?.reason})`)
      problems.push(
        `the agent did not converge ${finalMode}: ${off.length} hosts are not (${examples.join('; ')}); ${errorMessage(err)}`,
      )
    }
    const report = await agent.status().catch(() => undefined)
    for (const h of layoutFiles(w.dirs).holds)
      holdsLeft.push({ host: h, reason: report?.rows[h]?.reason ?? '(not in the report)' })
    await readCounters(agent, life)
    log('soak: converged; stopping the agent (SIGTERM)')
    const exit = await agent.stop()
    life.endedAt = performance.now()
    if (exit.code !== 0)
      problems.push(`the agent did not stop cleanly on SIGTERM: ${JSON.stringify(exit)}\n${agent.tail()}`)
    settleSeconds = (performance.now() - s0) / 1000
  } finally {
    // On a throw, nothing may outlive the soak.
    halt.abort()
    if (current !== undefined && current.agent.exit === undefined) await current.agent.kill()
    await act.close()
    registry.close()
  }

  // The box with no agent running: every tree, the registry, D/layout.
  const final = checkState(w, { final: finalMode })
  const badHosts = new Set(final.problems.map((p) => p.split(':')[0]))
  for (const t of w.tenants) {
    if (badHosts.has(t.host)) continue
    checks.trees++
    checks.files += counts.get(t.host) ?? 0
  }
  problems.push(...final.problems)
  problems.push(...act.counts.wrongGrants.map((g) => `wrong grant: ${g}`))
  problems.push(...act.counts.errors.map((e) => `activator: ${e}`))

  const warmupSeconds = Math.min(60, (opts.minutes * 60) / 5)
  const afterWarmup = rss.filter((s) => s.atS >= warmupSeconds).map((s) => s.mb)
  const first = afterWarmup[0] ?? null
  const last = rss.at(-1)?.mb ?? null
  const max = rss.length === 0 ? null : Math.max(...rss.map((s) => s.mb))
  const ratio = (a: number | null): number | null =>
    a === null || first === null ? null : Math.round((a / first) * 100) / 100
  const c = act.counts
  return {
    minutes: opts.minutes,
    tenants: opts.tenants,
    seed: opts.seed,
    flipSeconds: opts.flipSeconds,
    killEverySeconds: opts.killEverySeconds,
    flips,
    kills,
    lives: lives.length,
    moves: lives.reduce((n, l) => n + l.moves, 0),
    recoveredJournals: lives.reduce((n, l) => n + l.recovered, 0),
    grants: c.grants,
    wrongGrants: c.wrongGrants.length,
    claims: {
      sent: c.claims,
      refused: c.refused,
      releases: c.releases,
      interrupted: c.interrupted,
      awakeSets: c.awakeSets,
      stopsAsked: c.stopsAsked,
    },
    filesChecked: checks.files,
    treesChecked: checks.trees,
    journalsLeft: final.files.journals.size,
    holdsLeft,
    finalMode,
    rssSamplesMb: rss.map((s) => s.mb),
    rss: {
      everySeconds: RSS_EVERY_MS / 1000,
      warmupSeconds,
      firstAfterWarmupMb: first,
      lastMb: last,
      maxMb: max,
      lastOverFirst: ratio(last),
      maxOverFirst: ratio(max),
      longestLifeSeconds: Math.round(
        Math.max(0, ...lives.map((l) => ((l.endedAt ?? performance.now()) - l.startedAt) / 1000)),
      ),
    },
    agentErrorLines: errorsSeen,
    seconds: { setup: setupSeconds, run: runSeconds, settle: settleSeconds, total: (performance.now() - t0) / 1000 },
    problems:
      problems.length > MAX_PROBLEMS
        ? [...problems.slice(0, MAX_PROBLEMS), `... and ${problems.length - MAX_PROBLEMS} more`]
        : problems,
  }
}

// ---- the script ----------------------------------------------------------------

const USAGE =
  'usage: npm run soak -- [--minutes 10] [--tenants 1000] [--seed N] [--flip-seconds 30] ' +
  '[--kill-every-seconds 20] [--claimers 8] [--dir D] [--keep]\n'

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      minutes: { type: 'string', default: '10' },
      tenants: { type: 'string', default: '1000' },
      seed: { type: 'string' },
      'flip-seconds': { type: 'string', default: '30' },
      'kill-every-seconds': { type: 'string', default: '20' },
      claimers: { type: 'string', default: '8' },
      dir: { type: 'string' },
      keep: { type: 'boolean', default: false },
    },
  })
  const minutes = Number(values.minutes)
  const tenants = Number(values.tenants)
  const flipSeconds = Number(values['flip-seconds'])
  const killEverySeconds = Number(values['kill-every-seconds'])
  const claimers = Number(values.claimers)
  const seed = values.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(values.seed)
  const bad = [
    !(minutes > 0) && '--minutes must be above 0',
    !(Number.isInteger(tenants) && tenants >= 1) && '--tenants must be a whole number of at least 1',
    !(flipSeconds > 0) && '--flip-seconds must be above 0',
    !(killEverySeconds >= 0) && '--kill-every-seconds must be 0 (no kills) or above',
    !(Number.isInteger(claimers) && claimers >= 1 && claimers < tenants) &&
      '--claimers must be a whole number from 1 to below --tenants',
    !Number.isInteger(seed) && '--seed must be a whole number',
  ].filter((m) => m !== false)
  if (bad.length > 0) {
    process.stderr.write(`soak: ${bad.join('; ')}\n${USAGE}`)
    return 2
  }
  const root = values.dir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'layoutd-soak-'))
  const summary = await runSoak({
    minutes,
    tenants,
    seed,
    flipSeconds,
    killEverySeconds,
    claimers,
    root,
    keepLogs: values.keep,
    log: (l) => process.stderr.write(`${l}\n`),
  })
  process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`)
  if (!values.keep && summary.problems.length === 0) fs.rmSync(root, { recursive: true, force: true })
  else process.stderr.write(`soak: the box is kept at ${root}\n`)
  return summary.problems.length === 0 ? 0 : 1
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await main()
}

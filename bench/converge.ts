// How fast the real pass converges a box (design §3 "Many hosts"): N flat
// tenants (default 1000) migrated to nested and reverted to flat by the real
// agent process, against a baseline measured in the same run on the same
// filesystem: the same number of plain directory moves, each a rename(2)
// followed by an fsync of both parents, which is what one crash-safe move
// costs with no journal, no registry and no batching. Prints JSON.
//
//   node dist/bench/converge.js [--hosts 1000] [--dir D] [--keep]
import fs from 'node:fs'
import fsp from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import type { Mode } from '../src/domain/modes.js'
import { fsyncDir } from '../src/infra/fsutil.js'
import { AgentProcess, recordIntent } from '../test/helpers/agent-process.js'
import { checkState, makeWorld, type World } from './crash.js'

interface Leg {
  /** From the intent being seen (or the agent being ready) to every row reported in mode, as polled. */
  wallSeconds: number
  /** Time the agent spent in runs of its leg meanwhile (carlos_layout_leg_run_seconds). */
  passSeconds: number
  runs: number
  movesPerSecond: number
}

const RUN_SECONDS = 'carlos_layout_leg_run_seconds'

async function legTotals(agent: AgentProcess): Promise<{ seconds: number; runs: number }> {
  return { seconds: (await agent.metric(`${RUN_SECONDS}_sum`)) ?? 0, runs: (await agent.metric(`${RUN_SECONDS}_count`)) ?? 0 }
}

async function converge(agent: AgentProcess, w: World, mode: Mode, t0: number, before: { seconds: number; runs: number }): Promise<Leg> {
  const hosts = w.tenants.map((t) => t.host)
  // Polled every 250 ms: each report walks every row, and the agent is the thing being timed.
  await agent.waitConverged(hosts, mode, 600_000, 250)
  const wallSeconds = (performance.now() - t0) / 1000
  const after = await legTotals(agent)
  const passSeconds = after.seconds - before.seconds
  return { wallSeconds, passSeconds, runs: after.runs - before.runs, movesPerSecond: hosts.length / passSeconds }
}

/** n plain crash-safe directory moves, a → b and back: rename(2), then fsync both parents. */
async function baseline(root: string, n: number): Promise<{ renames: number; seconds: number; movesPerSecond: number }> {
  const a = path.join(root, 'baseline-a')
  const b = path.join(root, 'baseline-b')
  fs.mkdirSync(a)
  fs.mkdirSync(b)
  for (let i = 0; i < n; i++) {
    fs.mkdirSync(path.join(a, `d${i}`))
    fs.writeFileSync(path.join(a, `d${i}`, 'f'), `${i}\n`)
  }
  await fsyncDir(a)
  const t0 = performance.now()
  for (const [from, to] of [
    [a, b],
    [b, a],
  ] as const) {
    for (let i = 0; i < n; i++) {
      await fsp.rename(path.join(from, `d${i}`), path.join(to, `d${i}`))
      await fsyncDir(from)
      await fsyncDir(to)
    }
  }
  const seconds = (performance.now() - t0) / 1000
  fs.rmSync(a, { recursive: true })
  fs.rmSync(b, { recursive: true })
  return { renames: 2 * n, seconds, movesPerSecond: (2 * n) / seconds }
}

export interface ConvergeBench {
  hosts: number
  setupSeconds: number
  /** Spawn to /ready 200 of the agent that does both legs. */
  startSeconds: number
  migrate: Leg
  revert: Leg
  pass: { moves: number; seconds: number; movesPerSecond: number }
  baseline: { what: string; renames: number; seconds: number; movesPerSecond: number }
  /** pass seconds / baseline seconds for the same number of moves: how many plain safe moves one pass move costs. */
  ratio: number
  treesIntact: boolean
  machine: { cpus: number; loadavg: number[] }
}

export async function runConvergeBench(root: string, hosts: number, log: (l: string) => void = () => undefined): Promise<ConvergeBench> {
  const s0 = performance.now()
  log(`converge: making ${hosts} flat tenants under ${root}`)
  const w = await makeWorld(root, hosts)
  const setupSeconds = (performance.now() - s0) / 1000
  await recordIntent(w.sb, 'nested')
  const a0 = performance.now()
  const agent = await AgentProcess.start(w.sb)
  try {
    await agent.waitReady(120_000)
    const startSeconds = (performance.now() - a0) / 1000
    log('converge: migrating')
    // The leg's first run may already be under way at ready: count from zero.
    const migrate = await converge(agent, w, 'nested', a0, { seconds: 0, runs: 0 })
    log(`converge: migrated in ${migrate.passSeconds.toFixed(2)} s; reverting`)
    const r0 = performance.now()
    const before = await legTotals(agent)
    await recordIntent(w.sb, 'flat')
    const revert = await converge(agent, w, 'flat', r0, before)
    log(`converge: reverted in ${revert.passSeconds.toFixed(2)} s`)
    await agent.stop()
    const problems = checkState(w, { final: 'flat' }).problems
    if (problems.length > 0) throw new Error(`trees not intact after the bench:\n${problems.slice(0, 20).join('\n')}`)
    log('converge: every tree intact; measuring the baseline')
    const base = await baseline(root, hosts)
    const passSeconds = migrate.passSeconds + revert.passSeconds
    return {
      hosts,
      setupSeconds,
      startSeconds,
      migrate,
      revert,
      pass: { moves: 2 * hosts, seconds: passSeconds, movesPerSecond: (2 * hosts) / passSeconds },
      baseline: { what: 'rename(2) of a directory + fsync of both parents, one at a time', ...base },
      ratio: passSeconds / base.seconds,
      treesIntact: true,
      machine: { cpus: os.cpus().length, loadavg: os.loadavg() },
    }
  } finally {
    await agent.kill()
  }
}

async function main(): Promise<number> {
  const { values } = parseArgs({ options: { hosts: { type: 'string', default: '1000' }, dir: { type: 'string' }, keep: { type: 'boolean', default: false } } })
  const hosts = Number(values.hosts)
  if (!Number.isInteger(hosts) || hosts < 1) {
    process.stderr.write('usage: node dist/bench/converge.js [--hosts N] [--dir D] [--keep]\n')
    return 2
  }
  const root = values.dir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'layoutd-bench-'))
  try {
    const r = await runConvergeBench(root, hosts, (l) => process.stderr.write(`${l}\n`))
    process.stdout.write(`${JSON.stringify(r, null, 2)}\n`)
    return 0
  } finally {
    if (!values.keep) fs.rmSync(root, { recursive: true, force: true })
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await main()
}

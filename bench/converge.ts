// How fast the real pass converges a box (design §3.3 "Many hosts"): N flat
// tenants (default 1000) migrated to nested and reverted to flat by the real
// agent process, against a baseline measured in the same run on the same
// tree: the same renames (D/apps/<host> to D/nested/<host>/data and back)
// group-committed with no agent, no registry and no checks, which is as
// near the filesystem's limit as a crash-safe move gets. Per batch of 256:
// one journal file naming the batch, written and fdatasynced, its
// directory fsynced; the renames; one fsync per distinct parent; the
// journal removed and its directory fsynced. The nested parents
// (D/nested/<host>) are made as the move needs them, and D/nested fsynced
// once per batch for them. Its fsyncs are in flight as many at once as the
// agent's (SYNC_CONCURRENCY, on a thread pool as large), so the two differ
// in what they do, not in how they wait on the disk. Prints JSON; `ratio`
// is the pass's moves per second over the baseline's (the issue asks at
// least 0.5).
//
// Each leg counts its hosts moved and failed (carlos_layout_moves_total).
// --nested-mounts M has the agent's gate check the real mount table for
// M (a nosymfollow mount holding --dir), where the sandbox otherwise
// requires no mount: a migrate on the mount layout the README recommends.
//
//   UV_THREADPOOL_SIZE=64 node dist/bench/converge.js [--hosts 1000] [--dir D] [--keep] [--nested-mounts M]
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import { setTimeout as delay } from 'node:timers/promises'
import { parseArgs, promisify } from 'node:util'
import { request } from 'undici'
import type { Mode } from '../src/domain/modes.js'
import type { LayoutReport } from '../src/domain/schemas.js'
import { pathsFor, type Dirs } from '../src/domain/paths.js'
import { fsyncDir, mapLimit, SYNC_CONCURRENCY, threadPoolSize } from '../src/infra/fsutil.js'
import { INSTANCE_ENV } from '../src/infra/instance-keys.js'
import { AgentProcess, recordIntent } from '../test/helpers/agent-process.js'
import { checkState, makeWorld, type World } from './crash.js'

interface Leg {
  /** From the intent being seen (or the agent being ready) to every row reported in mode, as polled. */
  wallSeconds: number
  /** Time the agent spent in runs of its leg meanwhile (carlos_layout_leg_run_seconds). */
  passSeconds: number
  runs: number
  movesPerSecond: number
  /** Hosts the leg moved toward its mode, and failed to. */
  moved: number
  failed: number
}

async function moveCount(agent: AgentProcess, to: Mode, outcome: 'moved' | 'failed'): Promise<number> {
  return (await agent.metric(`carlos_layout_moves_total{to="${to}",outcome="${outcome}"}`)) ?? 0
}

const RUN_SECONDS = 'carlos_layout_leg_run_seconds'

async function legTotals(agent: AgentProcess): Promise<{ seconds: number; runs: number }> {
  return {
    seconds: (await agent.metric(`${RUN_SECONDS}_sum`)) ?? 0,
    runs: (await agent.metric(`${RUN_SECONDS}_count`)) ?? 0,
  }
}

/**
 * Waits until every host reads mode with the leg idle, asking the report
 * once a second with the ETag of the last answer: while nothing changed
 * the agent answers 304 and builds nothing. A run changes the report with
 * every batch, and each answer then builds it for every row, so the wait
 * asks seldom: the pass's time is the leg's own metric, not this wait's.
 */
async function waitConverged(
  agent: AgentProcess,
  hosts: readonly string[],
  mode: Mode,
  timeoutMs: number,
): Promise<void> {
  const deadline = performance.now() + timeoutMs
  let etag: string | undefined
  for (;;) {
    const res = await request(`${agent.url}/layout/status`, {
      headers: etag === undefined ? {} : { 'if-none-match': etag },
    })
    if (res.statusCode === 200) {
      const r = (await res.body.json()) as LayoutReport
      const tag = res.headers.etag
      etag = typeof tag === 'string' ? tag : undefined
      if (!r.leg.running && !r.leg.pending && hosts.every((h) => r.rows[h]?.layout === mode)) return
    } else {
      await res.body.dump()
      if (res.statusCode !== 304) throw new Error(`GET /layout/status: ${res.statusCode}`)
    }
    if (performance.now() > deadline) throw new Error(`not every host ${mode} after ${timeoutMs} ms`)
    await delay(1000)
  }
}

async function converge(
  agent: AgentProcess,
  w: World,
  mode: Mode,
  t0: number,
  before: { seconds: number; runs: number },
): Promise<Leg> {
  const hosts = w.tenants.map((t) => t.host)
  const [moved0, failed0] = [await moveCount(agent, mode, 'moved'), await moveCount(agent, mode, 'failed')]
  await waitConverged(agent, hosts, mode, 600_000)
  const wallSeconds = (performance.now() - t0) / 1000
  const after = await legTotals(agent)
  const passSeconds = after.seconds - before.seconds
  return {
    wallSeconds,
    passSeconds,
    runs: after.runs - before.runs,
    movesPerSecond: hosts.length / passSeconds,
    moved: (await moveCount(agent, mode, 'moved')) - moved0,
    failed: (await moveCount(agent, mode, 'failed')) - failed0,
  }
}

/** What the baseline needs of a tree: where to keep its journal, the roots, and the hosts (flat). */
export interface BaselineTree {
  sb: { root: string }
  dirs: Dirs
  tenants: ReadonlyArray<{ host: string }>
}

/**
 * The hard-link walk of every source the way the contract's own tool does
 * it (design §3 step 5): `find -P <D/apps> -type f -links +1`, a real find
 * over every flat tenant's tree. Answers its seconds and what it found.
 */
export async function findWalk(appsDir: string): Promise<{ seconds: number; linked: number }> {
  const t0 = performance.now()
  const out = await new Promise<string>((resolve, reject) => {
    const child = spawn('find', ['-P', appsDir, '-type', 'f', '-links', '+1'], { stdio: ['ignore', 'pipe', 'inherit'] })
    let text = ''
    child.stdout.setEncoding('utf8').on('data', (s: string) => (text += s))
    child.once('error', reject)
    child.once('close', (code) => (code === 0 ? resolve(text) : reject(new Error(`find exited ${String(code)}`))))
  })
  return { seconds: (performance.now() - t0) / 1000, linked: out.split('\n').filter((l) => l !== '').length }
}

/** Hosts per group commit of the baseline. */
export const BASELINE_BATCH = 256

/**
 * The same renames as the pass on the same tree, group-committed (see the
 * head of this file), to nested and back to flat. The tree is flat before
 * and after, with no D/nested: the nested parents the baseline made are
 * set aside outside the data root (D/nested renamed whole), not removed.
 * On ext4 without a journal (this machine's disks) the kernel will not
 * reuse an inode freed within the last minute (six while its inode
 * table's block is unwritten), and every inode it allocates skips each
 * such one in its group, a buffer looked up apiece: 10,000 directories
 * removed here had the converge timed after it make its own 20,000 paying
 * for them, more or less as the seconds between fell (design §3.6).
 */
export async function groupCommittedBaseline(
  w: BaselineTree,
  batch = BASELINE_BATCH,
): Promise<{ renames: number; seconds: number; movesPerSecond: number }> {
  const journalDir = path.join(w.sb.root, 'baseline-journal')
  fs.mkdirSync(journalDir, { recursive: true })
  const nested = path.join(w.dirs.dataDir, 'nested')
  fs.mkdirSync(nested, { recursive: true })
  await fsyncDir(w.dirs.dataDir)
  const hosts = w.tenants.map((t) => t.host)
  const t0 = performance.now()
  for (const to of ['nested', 'flat'] as const) {
    for (let i = 0; i < hosts.length; i += batch) {
      const moves = hosts.slice(i, i + batch).map((host) => ({
        host,
        from: pathsFor(w.dirs, host, to === 'nested' ? 'flat' : 'nested').dir,
        to: pathsFor(w.dirs, host, to).dir,
      }))
      const journal = path.join(journalDir, `batch-${to}-${i}.journal`)
      const fd = fs.openSync(journal, 'w', 0o600)
      try {
        fs.writeSync(fd, JSON.stringify(moves))
        await fdatasync(fd)
      } finally {
        fs.closeSync(fd)
      }
      await fsyncDir(journalDir)
      let made = false
      for (const m of moves) {
        if (to === 'nested' && !fs.existsSync(path.dirname(m.to))) {
          fs.mkdirSync(path.dirname(m.to))
          made = true
        }
      }
      if (made) await fsyncDir(nested)
      for (const m of moves) fs.renameSync(m.from, m.to)
      const parents = [...new Set(moves.flatMap((m) => [path.dirname(m.from), path.dirname(m.to)]))]
      await mapLimit(parents, SYNC_CONCURRENCY, (dir) => fsyncDir(dir))
      fs.unlinkSync(journal)
      await fsyncDir(journalDir)
    }
  }
  const seconds = (performance.now() - t0) / 1000
  fs.renameSync(nested, path.join(fs.mkdtempSync(path.join(w.sb.root, 'baseline-set-aside-')), 'nested'))
  fs.rmdirSync(journalDir)
  return { renames: 2 * hosts.length, seconds, movesPerSecond: (2 * hosts.length) / seconds }
}

const fdatasync = promisify(fs.fdatasync)

async function waitFor(what: string, done: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs
  while (!done()) {
    if (performance.now() > deadline) throw new Error(`${what}: not after ${timeoutMs} ms`)
    await delay(1000)
  }
}

export interface ConvergeBench {
  hosts: number
  setupSeconds: number
  /** Spawn to /ready 200 of the agent that does both legs. */
  startSeconds: number
  /** From ready to every tenant's instance key minted and the leg idle (before the migrate is timed). */
  keysSeconds: number
  migrate: Leg
  revert: Leg
  pass: { moves: number; seconds: number; movesPerSecond: number }
  baseline: { what: string; renames: number; seconds: number; movesPerSecond: number }
  /** The pass's moves per second over the baseline's, on the same tree in the same run (the issue asks at least 0.5). */
  ratio: number
  treesIntact: boolean
  machine: { cpus: number; loadavg: number[] }
}

export async function runConvergeBench(
  root: string,
  hosts: number,
  log: (l: string) => void = () => undefined,
  env: Record<string, string> = {},
): Promise<ConvergeBench> {
  // The agent's pool is SYNC_CONCURRENCY threads (sandboxEnv); a baseline
  // on a smaller one would wait on the disk more often than the pass does.
  const pool = threadPoolSize()
  if (pool < SYNC_CONCURRENCY)
    throw new Error(
      `this process's thread pool has ${pool} threads, the agent's ${SYNC_CONCURRENCY}: run it with UV_THREADPOOL_SIZE=${SYNC_CONCURRENCY} (npm run bench:converge does)`,
    )
  const s0 = performance.now()
  log(`converge: making ${hosts} flat tenants under ${root}`)
  const w = await makeWorld(root, hosts)
  const setupSeconds = (performance.now() - s0) / 1000
  // The baseline first, on the tree as made: after the revert its mkdirs
  // would pay for the revert's rmdirs (groupCommittedBaseline says why),
  // and it removes nothing the migrate would pay for. The trees are
  // checked once the agent has been through them too (every file, and the
  // instance key the agent mints), which the baseline's loss would fail.
  log('converge: measuring the baseline on the same tree')
  const base = await groupCommittedBaseline(w)
  // Started under flat, where the tenants are: after ready the agent mints
  // every tenant's instance key (a start-up job, once per tenant), and the
  // leg waits for it; the pass is what is timed, so the migrate starts once
  // every key is there and the leg is idle.
  await recordIntent(w.sb, 'flat')
  const a0 = performance.now()
  const agent = await AgentProcess.start(w.sb, { env })
  try {
    await agent.waitReady(120_000)
    const startSeconds = (performance.now() - a0) / 1000
    const names = w.tenants.map((t) => t.host)
    await waitFor(
      'every instance key',
      () => names.every((h) => fs.existsSync(path.join(pathsFor(w.dirs, h, 'flat').dir, INSTANCE_ENV))),
      600_000,
    )
    await waitConverged(agent, names, 'flat', 600_000)
    const keysSeconds = (performance.now() - a0) / 1000 - startSeconds
    log(`converge: keys minted in ${keysSeconds.toFixed(2)} s after ready; migrating`)
    const m0 = performance.now()
    const before0 = await legTotals(agent)
    await recordIntent(w.sb, 'nested')
    const migrate = await converge(agent, w, 'nested', m0, before0)
    log(`converge: migrated in ${migrate.passSeconds.toFixed(2)} s; reverting`)
    const r0 = performance.now()
    const before = await legTotals(agent)
    await recordIntent(w.sb, 'flat')
    const revert = await converge(agent, w, 'flat', r0, before)
    log(`converge: reverted in ${revert.passSeconds.toFixed(2)} s`)
    await agent.stop()
    const problems = checkState(w, { final: 'flat' }).problems
    if (problems.length > 0) throw new Error(`trees not intact after the bench:\n${problems.slice(0, 20).join('\n')}`)
    log('converge: every tree intact after the baseline and both legs')
    const passSeconds = migrate.passSeconds + revert.passSeconds
    return {
      hosts,
      setupSeconds,
      startSeconds,
      keysSeconds,
      migrate,
      revert,
      pass: { moves: 2 * hosts, seconds: passSeconds, movesPerSecond: (2 * hosts) / passSeconds },
      baseline: {
        what: `the same renames group-committed ${BASELINE_BATCH} at a time: a journal file and its fsyncs per batch, one fsync per distinct parent, ${SYNC_CONCURRENCY} fsyncs in flight on a pool of ${pool} threads`,
        ...base,
      },
      ratio: (2 * hosts) / passSeconds / base.movesPerSecond,
      treesIntact: true,
      machine: { cpus: os.cpus().length, loadavg: os.loadavg() },
    }
  } finally {
    await agent.kill()
  }
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      hosts: { type: 'string', default: '1000' },
      dir: { type: 'string' },
      keep: { type: 'boolean', default: false },
      'nested-mounts': { type: 'string' },
    },
  })
  const hosts = Number(values.hosts)
  if (!Number.isInteger(hosts) || hosts < 1) {
    process.stderr.write(
      'usage: UV_THREADPOOL_SIZE=64 node dist/bench/converge.js [--hosts N] [--dir D] [--keep] [--nested-mounts M]\n',
    )
    return 2
  }
  const root = values.dir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'layoutd-bench-'))
  try {
    const mounts = values['nested-mounts']
    const env: Record<string, string> =
      mounts === undefined ? {} : { CARLOS_NESTED_MOUNTS: mounts, CARLOS_MOUNTINFO: '/proc/self/mountinfo' }
    const r = await runConvergeBench(root, hosts, (l) => process.stderr.write(`${l}\n`), env)
    process.stdout.write(`${JSON.stringify(r, null, 2)}\n`)
    return 0
  } finally {
    if (!values.keep) fs.rmSync(root, { recursive: true, force: true })
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await main()
}

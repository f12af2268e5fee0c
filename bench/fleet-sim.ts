// bench:fleet at fleet scale (design §7.3, §7.6): N boxes in this one
// process against a real 3-member etcd cluster on loopback, each box the
// agent's real etcd store client (its own connections, watch, lease and
// summary), rollout follower and intent poller (test/helpers/sim-box.ts);
// the pass is a stand-in that takes passMs per box, said in the output.
// 1,000 agent processes do not fit a small machine; their etcd traffic
// does. Measures: a fleet-wide record to every box converged, the watch's
// latency, `fleet status` at N boxes, lease keep-alives per second (etcd's
// own counter), a 4-wave rollout end to end through a real fleet's faults
// (awake tenants, held rows, killed boxes: fleet-faults.ts), etcd's keys
// and each member's RSS.
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { PassThrough } from 'node:stream'
import { fleetCommand } from '../src/cli/commands/fleet.js'
import { loadConfig } from '../src/config.js'
import { EtcdDeployStore } from '../src/infra/deploy-etcd/store.js'
import { LOADED_MACHINE_TIMING, EtcdServer } from '../test/helpers/etcd.js'
import type { SimBox } from '../test/helpers/sim-box.js'
import { SimFleet } from '../test/helpers/sim-fleet.js'
import { faultedRollout } from './fleet-faults.js'

export interface SimFleetBenchOptions {
  root: string
  boxes: number
  passMs: number
  /** Draws which boxes get which fault. */
  seed: number
  log: (line: string) => void
}

function pct(xs: readonly number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b)
  return s.length === 0 ? NaN : (s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] ?? NaN)
}

const stats = (xs: readonly number[]) => ({ p50: pct(xs, 50), p99: pct(xs, 99), max: pct(xs, 100), n: xs.length })

async function rssMb(pid: number): Promise<number> {
  const status = await fs.readFile(`/proc/${pid}/status`, 'utf8')
  const kb = Number(/VmRSS:\s+([0-9]+) kB/.exec(status)?.[1] ?? NaN)
  return Math.round(kb / 1024)
}

/** etcd's own count of lease renewals, summed over the members. */
async function leasesRenewed(members: readonly EtcdServer[]): Promise<number> {
  let n = 0
  for (const m of members) {
    const text = await (await fetch(`${m.url}/metrics`)).text()
    const line = text.split('\n').find((l) => l.startsWith('etcd_debugging_lease_renewed_total'))
    n += Number(line?.split(' ')[1] ?? NaN)
  }
  return n
}

function quiet(): PassThrough {
  const s = new PassThrough()
  s.resume()
  return s
}

export async function runSimFleet(o: SimFleetBenchOptions) {
  const members = await EtcdServer.startCluster(o.root, 3, undefined, LOADED_MACHINE_TIMING)
  const endpoints = members.map((m) => m.url)
  const prefix = '/carlos/layout/intents/'
  const seen = new Map<string, Map<string, number>>()
  const heard = new Map<string, Map<string, number>>()
  const converged = new Map<string, Map<string, number>>()
  const fleet = new SimFleet({
    endpoints,
    prefix,
    boxes: o.boxes,
    passMs: o.passMs,
    onWatchEvent: (box, id, at) => {
      const m = heard.get(id) ?? new Map<string, number>()
      if (!m.has(box)) m.set(box, at)
      heard.set(id, m)
    },
    onIntentSeen: (box, id, at) => {
      const m = seen.get(id) ?? new Map<string, number>()
      if (!m.has(box)) m.set(box, at)
      seen.set(id, m)
    },
    onConverged: (box, id, at) => {
      const m = converged.get(id) ?? new Map<string, number>()
      if (!m.has(box)) m.set(box, at)
      converged.set(id, m)
    },
  })
  const ops = new EtcdDeployStore(endpoints, { prefix })
  const config = loadConfig({ CARLOS_BOX: 'ops', CARLOS_DEPLOYMENT_ETCD: endpoints.join(',') })
  const out: Record<string, unknown> = {
    mode: 'in-process boxes: the agent store client, watch, lease, summary, rollout follower and intent poller',
    pass: `stand-in: ${o.passMs} ms per box (no files moved)`,
    boxes: o.boxes,
    etcd: {
      members: 3,
      version: '3.4 (Debian etcd-server)',
      endpoints: 'loopback http',
      dataDir: o.root,
      heartbeatMs: LOADED_MACHINE_TIMING.heartbeatMs,
      electionMs: LOADED_MACHINE_TIMING.electionMs,
    },
  }
  try {
    await phases(out, fleet, members, ops, config, o, heard, seen)
    const rollout: Record<string, unknown> = {}
    out.rollout = rollout
    await faultedRollout({ fleet, members, ops, config, prefix, seed: o.seed, converged, log: o.log }, rollout)
  } catch (err) {
    // A phase that did not complete is said, with what was measured before it.
    out.incomplete = err instanceof Error ? err.message : String(err)
    out.boxesConvergedSoFar = fleet.moves.length
    const moved = new Set(fleet.moves.map((m) => m.box))
    out.notMoved = fleet.boxes
      .filter((b) => !moved.has(b.box))
      .slice(0, 10)
      .map((b) => ({ box: b.box, ...b.progress }))
  }
  try {
    out.leaseKeepAliveNote = 'etcd_debugging_lease_renewed_total over a quiet 30 s window, summed over the members'
    out.boxTtlSeconds = 30
    out.etcdRssMb = await Promise.all(members.map((m) => rssMb(m.pid)))
    out.etcdLeaderChangesSeen = await leaderChanges(members).catch(() => NaN)
    out.benchReadsRefused = benchReadsRefused
    out.benchRssMb = Math.round(process.memoryUsage().rss / 1024 / 1024)
    out.passErrors = { count: fleet.errors().length, first: fleet.errors().slice(0, 3) }
    out.machine = { cpus: os.cpus().length, loadavg: os.loadavg() }
    return out
  } finally {
    await fleet.stop().catch(() => undefined)
    await ops.close()
    await Promise.all(members.map((m) => m.kill()))
  }
}

/** etcd's own count of leader changes, summed over the members. */
async function leaderChanges(members: readonly EtcdServer[]): Promise<number> {
  let n = 0
  for (const m of members) {
    const text = await (await fetch(`${m.url}/metrics`)).text()
    const line = text.split('\n').find((l) => l.startsWith('etcd_server_leader_changes_seen_total'))
    n += Number(line?.split(' ')[1] ?? NaN)
  }
  return n
}

function live(): AbortSignal {
  return AbortSignal.timeout(30_000)
}

async function phases(
  out: Record<string, unknown>,
  fleet: SimFleet,
  members: readonly EtcdServer[],
  ops: EtcdDeployStore,
  config: ReturnType<typeof loadConfig>,
  o: SimFleetBenchOptions,
  heard: Map<string, Map<string, number>>,
  seen: Map<string, Map<string, number>>,
): Promise<void> {
  const t0 = Date.now()
  for (let i = 0; i < fleet.boxes.length; i += 50) await Promise.all(fleet.boxes.slice(i, i + 50).map(startBox))
  out.startSeconds = (Date.now() - t0) / 1000
  // Every box's watch is up (the poller reads again once it is): a record before that would time the watches' start.
  await waitFor(() => fleet.boxes.every((b) => b.intentReads >= 2), 120_000, 'every watch up')
  out.watchesUpSeconds = (Date.now() - t0) / 1000
  o.log(`fleet-sim: ${o.boxes} boxes watching in ${String(out.watchesUpSeconds)} s`)

  // A fleet-wide record: to each box's watch seeing it, and to its stand-in pass ending.
  const id = `${new Date().toISOString().replace(/[-:]/g, '')}-bench`
  const recordAt = Date.now()
  await ops.record({ id, mode: 'nested', force: false, recordedAt: new Date().toISOString(), by: 'bench' }, live())
  const mine = () => fleet.moves.filter((m) => m.intent === id)
  const progress = setInterval(() => {
    o.log(`fleet-sim: ${mine().length}/${o.boxes} converged, ${fleet.errors().length} errors`)
  }, 10_000)
  const figures = () => {
    out.recordToConvergedMs = stats(mine().map((m) => m.endedAt - recordAt))
    out.watchLatencyMs = stats([...(heard.get(id)?.values() ?? [])].map((at) => at - recordAt))
    out.recordToIntentReadMs = stats([...(seen.get(id)?.values() ?? [])].map((at) => at - recordAt))
  }
  try {
    await waitFor(() => mine().length >= o.boxes, 120_000, 'every box converged')
  } finally {
    clearInterval(progress)
    figures()
  }

  // `fleet status` over every summary (its own store, as the CLI opens one).
  await waitFor(
    async () => (await ops.listBoxes(live())).every((b) => b.intent === id && !b.leg.running),
    60_000,
    'every summary to say so',
  )
  const statusMs: number[] = []
  let statusFailures = 0
  for (let i = 0; i < 5; i++) {
    const s = Date.now()
    const code = await fleetCommand(['status', '--json'], { config, store: ops, stdout: quiet(), stderr: quiet() })
    statusMs.push(Date.now() - s)
    if (code !== 0) statusFailures++
  }
  out.fleetStatusMs = { median: pct(statusMs, 50), max: pct(statusMs, 100), runs: statusMs.length, statusFailures }

  // Lease keep-alives over 30 s of a quiet fleet (each box renews at TTL/3).
  const before = await leasesRenewed(members)
  const windowMs = 30_000
  await new Promise((r) => setTimeout(r, windowMs))
  out.leaseKeepAlivesPerSecond = Math.round((((await leasesRenewed(members)) - before) / (windowMs / 1000)) * 10) / 10
}

/**
 * Starts a box, again a second later while its first summary cannot be
 * written (etcd electing a leader under the start's load), as the agent
 * publishes again at its next read; the fifth failure ends the bench.
 */
async function startBox(box: SimBox): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await box.start()
    } catch (err) {
      if (attempt >= 5) throw err
      await new Promise((r) => setTimeout(r, 1_000))
    }
  }
}

/** Reads of the bench's own that etcd refused (a leader lost under load): counted, and asked again. */
let benchReadsRefused = 0

async function waitFor<T>(
  check: () => Promise<T | undefined | false> | T | undefined | false,
  ms: number,
  what: string,
) {
  const end = Date.now() + ms
  for (;;) {
    let v: T | undefined | false
    try {
      v = await check()
    } catch {
      benchReadsRefused++
      v = undefined
    }
    if (v !== undefined && v !== false) return v
    if (Date.now() > end) throw new Error(`bench: timed out after ${ms} ms waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

export async function mainSim(
  boxes: number,
  passMs: number,
  seed: number,
  dir: string | undefined,
  keep: boolean,
): Promise<number> {
  // etcd's data on tmpfs when there is one: on a shared machine another's fsyncs would otherwise time etcd's disk.
  const tmp = await fs.stat('/dev/shm').then(
    (s) => (s.isDirectory() ? '/dev/shm' : os.tmpdir()),
    () => os.tmpdir(),
  )
  const root = dir ?? (await fs.mkdtemp(path.join(tmp, 'layoutd-fleet-sim-')))
  try {
    const r = await runSimFleet({ root, boxes, passMs, seed, log: (l) => process.stderr.write(`${l}\n`) })
    process.stdout.write(`${JSON.stringify(r, null, 2)}\n`)
    return 0
  } finally {
    if (!keep) await fs.rm(root, { recursive: true, force: true })
  }
}

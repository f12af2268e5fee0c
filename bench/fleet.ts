// A fleet on one etcd (design §7): N real agent processes (default 20), each
// with its own data dir, box label and sleeping tenants, sharing one real
// etcd that serves https only, asks for a client certificate and has its
// auth on (the agents authenticate as a user whose role may read and write
// /carlos/layout/). `fleet status` must show every box; a fleet-wide
// `intent migrate --fleet` is recorded, `fleet status --wait` must exit 0
// once every box converged; then `intent revert --box` for one box, which
// no other box may move on; then one agent is killed and must leave the
// fleet's view when its lease (2 s) expires. Prints JSON: per box, the time
// from the record to its last tenant moved (the agent's own log stamp),
// the watch's latency, how long `fleet status` takes, and the lease figure.
//
// The agents poll once a minute, so a box that converges in less is the
// watch's doing, not the poll's.
//
//   node dist/bench/fleet.js [--boxes 20] [--hosts 2] [--dir D] [--keep] [--plain]
//   node dist/bench/fleet.js --boxes 1000 [--in-process] [--pass-ms 500] [--seed 1]
//
// Over 50 boxes (or with --in-process) the boxes run in this process
// against a 3-member etcd cluster, with a stand-in pass (bench/fleet-sim.ts),
// and a staged rollout meets a real fleet's faults drawn from the seed
// (bench/fleet-faults.ts).
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { PassThrough } from 'node:stream'
import { pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import { fleetCommand } from '../src/cli/commands/fleet.js'
import { intentCommand } from '../src/cli/commands/intent.js'
import { routesCommand } from '../src/cli/commands/routes/index.js'
import { loadConfig } from '../src/config.js'
import type { Mode } from '../src/domain/modes.js'
import type { DeployStore } from '../src/domain/ports.js'
import { openDeployStore } from '../src/infra/deploy-store.js'
import { Registry } from '../src/infra/registry.js'
import { AgentProcess, makeSandbox, sandboxEnv, type Sandbox } from '../test/helpers/agent-process.js'
import { EtcdServer } from '../test/helpers/etcd.js'
import { makeEtcdCerts } from '../test/helpers/etcd-tls.js'

export interface FleetOptions {
  root: string
  boxes: number
  hostsPerBox: number
  /** Plain http, no auth: the figures without TLS, to compare. */
  plain?: boolean
  log?: (line: string) => void
}

export interface LegFigures {
  /** How many boxes this record addressed (and converged). */
  boxes: number
  /** Record to converged (the box's last tenant moved), per box label, in ms. */
  perBox: Record<string, number>
  medianMs: number
  maxMs: number
  /** Record to the box's watch seeing it (the agent reads at once, and a change kicks its leg), over the same boxes. */
  watch: { medianMs: number; maxMs: number }
}

export interface FleetFigures {
  agents: number
  hostsPerBox: number
  /** https with a client certificate and etcd's auth on, or plain http. */
  security: 'tls+auth' | 'plain'
  pollMs: number
  /** Spawn of the first agent to the last one ready and watching. */
  startSeconds: number
  migrate: LegFigures
  revert: LegFigures & { box: string }
  fleetStatus: {
    /** `fleet status --json` in process over the live summaries: median and max of five, in ms. */
    medianMs: number
    maxMs: number
    /** Boxes it showed before the migrate. */
    boxesShown: number
    /** Record of the fleet-wide migrate to `fleet status --wait` exiting 0. */
    waitExit0Ms: number
  }
  /** A box killed with SIGKILL: how long until the fleet's view no longer shows it, against its lease TTL. */
  killedBoxGoneMs: number
  boxTtlMs: number
  machine: { cpus: number; loadavg: number[] }
}

const POLL = '60s'
const BOX_TTL = '2s'
const BOX_TTL_MS = 2000
/** How many agents start at once: enough to overlap their start-up, few enough for a small machine. */
const START_BATCH = 5

interface Box {
  sb: Sandbox
  env: Record<string, string>
  hosts: string[]
  logFile: string
  agent?: AgentProcess
}

function quiet(): NodeJS.WritableStream {
  const s = new PassThrough()
  s.resume()
  return s
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b)
  const m = Math.floor(s.length / 2)
  return s.length % 2 === 1 ? (s[m] ?? NaN) : ((s[m - 1] ?? NaN) + (s[m] ?? NaN)) / 2
}

/** Adds the box's sleeping tenants, flat (no intent is recorded yet, and the fleet's default is flat). */
async function addTenants(box: Box): Promise<void> {
  const config = loadConfig(sandboxEnv(box.sb, box.env))
  const registry = Registry.open(config.dataDir)
  const errors = new PassThrough().setEncoding('utf8')
  let err = ''
  errors.on('data', (s: string) => (err += s))
  try {
    for (const host of box.hosts) {
      const code = await routesCommand(['add', host, '--hibernate'], {
        config,
        registry,
        stdout: quiet(),
        stderr: errors,
        mint: () => Promise.resolve('flat'),
      })
      if (code !== 0) throw new Error(`routes add ${host} on ${box.sb.box}: exit ${code}: ${err}`)
    }
  } finally {
    registry.close()
  }
}

/** Runs `fleet <argv>` with the CLI's own command, in this process; answers the exit status and stdout. */
async function fleet(store: DeployStore, box: Box, argv: string[]): Promise<{ code: number; out: string }> {
  const config = loadConfig(sandboxEnv(box.sb, box.env))
  const out = new PassThrough().setEncoding('utf8')
  let text = ''
  out.on('data', (s: string) => (text += s))
  const code = await fleetCommand(argv, { config, store, stdout: out, stderr: quiet() })
  return { code, out: text }
}

/** Records an intent with the CLI's own command, in this process. */
async function record(store: DeployStore, box: Box, argv: string[]): Promise<void> {
  const config = loadConfig(sandboxEnv(box.sb, box.env))
  const errors = new PassThrough().setEncoding('utf8')
  let err = ''
  errors.on('data', (s: string) => (err += s))
  const code = await intentCommand(argv, { config, store, stdout: quiet(), stderr: errors })
  if (code !== 0) throw new Error(`layoutd intent ${argv.join(' ')}: exit ${code}: ${err}`)
}

/**
 * When, after t0 (epoch ms), the box's watch saw a record and its last
 * tenant moved to mode, from the agent's log: the agent stamps each line as
 * it logs it, so no poll's interval is in the figures.
 */
async function timeline(box: Box, mode: Mode, t0: number): Promise<{ seen: number; moved: number }> {
  const text = await fs.readFile(box.logFile, 'utf8')
  const last = new Map<string, number>()
  let seen: number | undefined
  for (const line of text.split('\n')) {
    if (!line.startsWith('{')) continue
    const v = JSON.parse(line) as { time?: number; host?: string; outcome?: string; to?: string; revision?: string }
    if (v.time === undefined || v.time < t0) continue
    if (v.revision !== undefined && seen === undefined) seen = v.time
    if (v.outcome === 'moved' && v.to === mode && v.host !== undefined) last.set(v.host, v.time)
  }
  const missing = box.hosts.filter((h) => !last.has(h))
  if (missing.length > 0)
    throw new Error(`${box.sb.box}: no move of ${missing.join(', ')} to ${mode} logged after the record`)
  if (seen === undefined) throw new Error(`${box.sb.box}: its watch logged no record after the one made`)
  return { seen, moved: Math.max(...last.values()) }
}

/**
 * Waits until the box's watch is up (its log says so): /ready comes before
 * the agent's first read and its watch, and a record made before the watch
 * is found by the read the watch makes when it begins, which is not the
 * path being timed.
 */
async function watching(box: Box): Promise<void> {
  await agentOf(box).waitFor(
    `${box.sb.box}'s watch`,
    async () => ((await fs.readFile(box.logFile, 'utf8')).includes('etcd deploy store: watching') ? true : undefined),
    60_000,
  )
}

function agentOf(box: Box): AgentProcess {
  if (box.agent === undefined) throw new Error(`${box.sb.box} has no agent`)
  return box.agent
}

/** Waits for every box to converge to mode, then answers record-to-converged per box. */
async function converged(boxes: Box[], mode: Mode, t0: number): Promise<LegFigures> {
  // A slow poll of the report, so the agents being timed are not kept busy answering.
  await Promise.all(
    boxes.map(async (b) => {
      const r = await agentOf(b).waitConverged(b.hosts, mode, 120_000, 200)
      if (r.mode !== mode) throw new Error(`${b.sb.box}: converged rows, but status says ${r.mode}`)
    }),
  )
  const perBox: Record<string, number> = {}
  const seen: number[] = []
  for (const b of boxes) {
    const tl = await timeline(b, mode, t0)
    perBox[b.sb.box] = tl.moved - t0
    seen.push(tl.seen - t0)
  }
  const ms = Object.values(perBox)
  return {
    boxes: boxes.length,
    perBox,
    medianMs: median(ms),
    maxMs: Math.max(...ms),
    watch: { medianMs: median(seen), maxMs: Math.max(...seen) },
  }
}

/** The etcd of the fleet, and the environment every box shares to reach it. */
async function startEtcd(root: string, plain: boolean): Promise<{ etcd: EtcdServer; env: Record<string, string> }> {
  if (plain) {
    const etcd = await EtcdServer.start(path.join(root, 'etcd'))
    return { etcd, env: { CARLOS_DEPLOYMENT_ETCD: etcd.url } }
  }
  const certs = await makeEtcdCerts(path.join(root, 'certs'))
  const etcd = await EtcdServer.start(path.join(root, 'etcd'), {
    certs,
    clientCertAuth: true,
    admin: await certs.client('admin'),
  })
  await etcd.enableAuth([{ name: 'layoutd', password: 'fleet-password', readwrite: ['/carlos/layout/'] }])
  const passwordFile = path.join(root, 'certs', 'layoutd.password')
  await fs.writeFile(passwordFile, 'fleet-password\n', { mode: 0o600 })
  const client = await certs.client('layoutd')
  return {
    etcd,
    env: {
      CARLOS_DEPLOYMENT_ETCD: etcd.url,
      CARLOS_ETCD_CA: certs.ca,
      CARLOS_ETCD_CERT: client.cert,
      CARLOS_ETCD_KEY: client.key,
      CARLOS_ETCD_USER: 'layoutd',
      CARLOS_ETCD_PASSWORD_FILE: passwordFile,
    },
  }
}

/** Waits until the fleet's view (the live boxes' labels) says want; answers when, in ms from the call. */
async function untilBoxes(
  store: DeployStore,
  want: (labels: string[]) => boolean,
  what: string,
  ms = 60_000,
): Promise<number> {
  const t0 = performance.now()
  for (;;) {
    const labels = ((await store.listBoxes?.(AbortSignal.timeout(10_000))) ?? []).map((b) => b.box)
    if (want(labels)) return performance.now() - t0
    if (performance.now() - t0 > ms)
      throw new Error(`fleet: ${what}: ${labels.length} boxes after ${ms} ms: ${labels.join(' ')}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

export async function runFleet(opts: FleetOptions): Promise<FleetFigures> {
  const log = opts.log ?? (() => undefined)
  const plain = opts.plain === true
  const { etcd, env: etcdEnv } = await startEtcd(opts.root, plain)
  const boxes: Box[] = []
  let store: DeployStore | undefined
  try {
    for (let i = 0; i < opts.boxes; i++) {
      const label = `box-${String(i).padStart(2, '0')}`
      const sb = await makeSandbox(path.join(opts.root, label), label)
      const hosts = Array.from({ length: opts.hostsPerBox }, (_, j) => `t${j}.${label}.example.com`)
      const box: Box = {
        sb,
        hosts,
        logFile: path.join(sb.root, 'agent.log'),
        // debug: each host's move is a line of its own only there; the timeline reads them.
        env: {
          ...etcdEnv,
          CARLOS_LAYOUT_DEFAULT: 'flat',
          CARLOS_LAYOUT_POLL: POLL,
          CARLOS_ETCD_BOX_TTL: BOX_TTL,
          CARLOS_LOG_LEVEL: 'debug',
        },
      }
      await addTenants(box)
      boxes.push(box)
    }
    const first = boxes[0]
    if (first === undefined) throw new Error('a fleet needs a box')
    store = await openDeployStore(loadConfig(sandboxEnv(first.sb, first.env)))
    log(`fleet: starting ${boxes.length} agents against ${etcd.url}${plain ? '' : ' (TLS, client certificate, auth)'}`)
    const s0 = performance.now()
    for (let i = 0; i < boxes.length; i += START_BATCH) {
      await Promise.all(
        boxes.slice(i, i + START_BATCH).map(async (b) => {
          // A loaded machine (other work on two cores) can take long to start twenty node processes.
          b.agent = await AgentProcess.start(b.sb, { env: b.env, logFile: b.logFile, listenTimeoutMs: 120_000 })
          await b.agent.waitReady(60_000)
          await watching(b)
        }),
      )
    }
    const startSeconds = (performance.now() - s0) / 1000
    // Each agent publishes its summary after its first read.
    await untilBoxes(store, (l) => l.length === boxes.length, 'every box in the fleet view')
    const shown = JSON.parse((await fleet(store, first, ['status', '--json'])).out) as { boxes: unknown[] }

    log('fleet: migrate --fleet')
    const m0 = Date.now()
    await record(store, first, ['migrate', '--fleet'])
    const waited = await fleet(store, first, ['status', '--wait', '--timeout', '120'])
    if (waited.code !== 0) throw new Error(`fleet status --wait exited ${waited.code}:\n${waited.out}`)
    const waitExit0Ms = Date.now() - m0
    const migrate = await converged(boxes, 'nested', m0)

    const timings: number[] = []
    for (let k = 0; k < 5; k++) {
      const f0 = performance.now()
      const r = await fleet(store, first, ['status', '--json'])
      timings.push(performance.now() - f0)
      if (r.code !== 0) throw new Error(`fleet status after the migrate exited ${r.code}:\n${r.out}`)
    }

    const target = boxes[Math.floor(boxes.length / 2)] ?? first
    log(`fleet: revert --box ${target.sb.box}`)
    const r0 = Date.now()
    await record(store, target, ['revert', '--box', target.sb.box])
    const revert = await converged([target], 'flat', r0)
    // Every other box read the record (the watch woke each) and stays nested.
    for (const b of boxes) {
      if (b === target) continue
      const s = await agentOf(b).status()
      const moved = b.hosts.filter((h) => s.rows[h]?.layout !== 'nested')
      if (s.mode !== 'nested' || moved.length > 0)
        throw new Error(
          `${b.sb.box} left nested on another box's revert: mode ${s.mode}, rows ${JSON.stringify(s.rows)}`,
        )
    }

    const victim = boxes.at(-1) ?? first
    log(`fleet: kill -9 ${victim.sb.box}`)
    await agentOf(victim).kill()
    const killedBoxGoneMs = await untilBoxes(
      store,
      (l) => !l.includes(victim.sb.box),
      `${victim.sb.box} gone after its lease`,
      30_000,
    )
    // Every other box stays (or, its renewals late on a loaded machine, comes back).
    await untilBoxes(
      store,
      (l) => l.length === boxes.length - 1 && !l.includes(victim.sb.box),
      'every live box in the view after the kill',
      30_000,
    )
    return {
      agents: boxes.length,
      hostsPerBox: opts.hostsPerBox,
      security: plain ? 'plain' : 'tls+auth',
      pollMs: 60_000,
      startSeconds,
      migrate,
      revert: { ...revert, box: target.sb.box },
      fleetStatus: {
        medianMs: median(timings),
        maxMs: Math.max(...timings),
        boxesShown: shown.boxes.length,
        waitExit0Ms,
      },
      killedBoxGoneMs,
      boxTtlMs: BOX_TTL_MS,
      machine: { cpus: os.cpus().length, loadavg: os.loadavg() },
    }
  } finally {
    await Promise.all(boxes.flatMap((b) => (b.agent === undefined ? [] : [b.agent.stop(10_000)])))
    await store?.close()
    await etcd.kill()
  }
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      boxes: { type: 'string', default: '20' },
      hosts: { type: 'string', default: '2' },
      dir: { type: 'string' },
      keep: { type: 'boolean', default: false },
      plain: { type: 'boolean', default: false },
      'in-process': { type: 'boolean' },
      'pass-ms': { type: 'string', default: '500' },
      seed: { type: 'string', default: '1' },
    },
  })
  const boxes = Number(values.boxes)
  // Over 50 boxes the agents run in this process (fleet-sim.ts): that many processes do not fit a small machine.
  if (values['in-process'] ?? boxes > 50) {
    const { mainSim } = await import('./fleet-sim.js')
    return mainSim(boxes, Number(values['pass-ms']), Number(values.seed), values.dir, values.keep)
  }
  const hostsPerBox = Number(values.hosts)
  if (!Number.isInteger(boxes) || boxes < 1 || !Number.isInteger(hostsPerBox) || hostsPerBox < 1) {
    process.stderr.write('usage: node dist/bench/fleet.js [--boxes N] [--hosts N] [--dir D] [--keep] [--plain]\n')
    return 2
  }
  const root = values.dir ?? (await fs.mkdtemp(path.join(os.tmpdir(), 'layoutd-fleet-')))
  try {
    const r = await runFleet({
      root,
      boxes,
      hostsPerBox,
      plain: values.plain,
      log: (l) => process.stderr.write(`${l}\n`),
    })
    process.stdout.write(`${JSON.stringify(r, null, 2)}\n`)
    return 0
  } finally {
    if (!values.keep) await fs.rm(root, { recursive: true, force: true })
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await main()
}

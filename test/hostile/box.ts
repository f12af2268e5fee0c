// What the hostile suite's files share: a real agent on a temp box, built as
// test/helpers/agent.ts builds one, but with a log the cases can read (a
// refusal is asserted by the line it logs too), tenants that already carry
// their instance key (so the start-up backfill changes nothing a case
// fingerprints), and the injected request every HTTP case makes.
import fs from 'node:fs/promises'
import path from 'node:path'
import os from 'node:os'
import type { Agent } from '../../src/agent/agent.js'
import { composeAgent } from '../../src/agent/compose.js'
import { buildApp, type App } from '../../src/app.js'
import { loadConfig, type Config } from '../../src/config.js'
import { flatPaths, nestedPaths } from '../../src/domain/paths.js'
import type { DeployStore } from '../../src/domain/ports.js'
import type { IntentRecord, LayoutReport, LegRun } from '../../src/domain/schemas.js'
import { DirDeployStore } from '../../src/infra/deploy-dir.js'
import { Registry } from '../../src/infra/registry.js'
import { createLogger } from '../../src/logger.js'
import { Metrics } from '../../src/metrics.js'
import { fingerprint, type Fingerprint, type FingerprintOptions } from '../helpers/fingerprint.js'
import { Sink } from '../helpers/sink.js'

export interface LogLine {
  level: number
  msg: string
  [field: string]: unknown
}

export interface HostileBox {
  dir: string
  config: Config
  registry: Registry
  store: DeployStore
  agent: Agent
  app: App
  /** Every line the agent and the app logged, parsed. */
  lines: () => LogLine[]
  /** The data root and the registry now (plus `also`). */
  fp: (opts?: FingerprintOptions) => Fingerprint
  close: () => Promise<void>
}

export interface HostileBoxOptions {
  env?: Record<string, string>
  /** A box's dir to build in (a restart); a fresh temp dir by default. */
  dir?: string
  /** Used instead of the directory store (an etcd store). */
  store?: DeployStore
  /** Runs before the agent starts, with the box built (tenants, planted files, intents). */
  before?: (b: HostileBox) => Promise<void> | void
  /** Starts the agent and waits until it is ready and its first leg run is over; true by default. */
  start?: boolean
}

/** Where a box's end is registered: a test's context, or node:test's top-level `after` for a box a whole file shares. */
export interface Scope {
  after(fn: () => unknown): void
}

/**
 * A scope for a box a whole file shares: call at the top level of the file;
 * its ends run in node:test's top-level `after`. (An `after` called inside a
 * `before` hook would run at the end of that hook.)
 */
export function fileScope(after: (fn: () => Promise<void>) => void): Scope {
  const ends: Array<() => unknown> = []
  after(async () => {
    for (const end of ends) await end()
  })
  return { after: (fn) => ends.push(fn) }
}

/** A temp dir of its own, removed when scope ends (for cases that build no box). */
export async function scopedDir(scope: Scope, prefix = 'layoutd-hostile-'): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), prefix))
  scope.after(() => fs.rm(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 }))
  return dir
}

/** The closes of every box built in a dir, so the dir's owner closes them all before it removes the dir. */
const boxesIn = new Map<string, Array<() => Promise<void>>>()

export async function hostileBox(t: Scope, opts: HostileBoxOptions = {}): Promise<HostileBox> {
  let dir = opts.dir
  if (dir === undefined) {
    const own = await fs.mkdtemp(path.join(os.tmpdir(), 'layoutd-hostile-'))
    boxesIn.set(own, [])
    // One hook: every box built here is closed (last built first), then the dir goes.
    t.after(async () => {
      for (const close of (boxesIn.get(own) ?? []).reverse()) await close()
      boxesIn.delete(own)
      await fs.rm(own, { recursive: true, force: true, maxRetries: 5, retryDelay: 50 })
    })
    dir = own
  }
  const probe = path.join(dir, 'probe.out')
  await fs.writeFile(probe, 'ready: true\n')
  const config = loadConfig({
    CARLOS_BOX: 'kass-1',
    CARLOS_DATA_DIR: path.join(dir, 'data'),
    CARLOS_DEPLOYMENT_DIR: path.join(dir, 'deploy'),
    CARLOS_NESTED_MOUNTS: 'none',
    CARLOS_PROBE_FILE: probe,
    // The poller reads often; the cases drive the leg themselves with converge.
    CARLOS_LAYOUT_POLL: '50ms',
    ...opts.env,
  })
  const sink = new Sink()
  const logger = createLogger('info', sink)
  const registry = Registry.open(config.dataDir)
  const store = opts.store ?? new DirDeployStore(config.deploymentDir)
  const agent = composeAgent({ config, logger, metrics: new Metrics(), registry, store, stopTimeoutMs: 2000 })
  const app = await buildApp({ api: agent, metrics: new Metrics(), logger, token: '' })
  let closed: Promise<void> | undefined
  const close = (): Promise<void> =>
    (closed ??= (async () => {
      await app.close()
      await agent.stop()
      registry.close()
    })())
  const closes = boxesIn.get(dir)
  if (closes === undefined) t.after(close)
  else closes.push(close)
  const box: HostileBox = {
    dir,
    config,
    registry,
    store,
    agent,
    app,
    lines: () =>
      sink.text
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l) as LogLine),
    fp: (o) => fingerprint(config.dataDir, o),
    close,
  }
  await opts.before?.(box)
  if (opts.start !== false) {
    await agent.start()
    await settle(box)
  }
  return box
}

/** Waits until the agent is ready and a run of the leg has finished after now: the box is quiet. */
export async function settle(b: HostileBox): Promise<LegRun> {
  return converge(b)
}

/** POST /layout/converge?wait=1: a run that starts after this call, and its results. */
export async function converge(b: HostileBox): Promise<LegRun> {
  const res = await b.app.inject({ method: 'POST', url: '/layout/converge?wait=1&timeout=60', remoteAddress: '127.0.0.1' })
  if (res.statusCode !== 200) throw new Error(`converge answered ${res.statusCode}: ${res.body}`)
  return res.json<{ run: LegRun }>().run
}

export async function report(b: HostileBox): Promise<LayoutReport> {
  const res = await b.app.inject({ method: 'GET', url: '/layout/status' })
  if (res.statusCode !== 200) throw new Error(`status answered ${res.statusCode}: ${res.body}`)
  return res.json()
}

/** A flat tenant with its instance key already there: its row, and its dir holding host.txt. */
export async function addFlat(b: { config: Config; registry: Registry }, host: string): Promise<void> {
  const p = flatPaths(b.config, host)
  await fs.mkdir(p.dir, { recursive: true })
  await fs.writeFile(path.join(p.dir, 'host.txt'), host)
  await fs.writeFile(path.join(p.dir, 'instance.env'), 'CARLOS_INSTANCE_KEY=planted\n', { mode: 0o600 })
  b.registry.add({ host, kind: 'instance', hibernate: true, ...p })
}

/** A nested tenant with its instance key already there. */
export async function addNested(b: { config: Config; registry: Registry }, host: string): Promise<void> {
  const p = nestedPaths(b.config, host)
  await fs.mkdir(p.dir, { recursive: true })
  await fs.mkdir(path.dirname(p.socket), { recursive: true })
  await fs.writeFile(path.join(p.dir, 'host.txt'), host)
  await fs.writeFile(path.join(p.dir, 'instance.env'), 'CARLOS_INSTANCE_KEY=planted\n', { mode: 0o600 })
  b.registry.add({ host, kind: 'instance', hibernate: true, ...p })
}

let ids = 0

/** A fresh intent id, sorting after every earlier one of this process. */
export function intentId(): string {
  return `${new Date().toISOString().replace(/[-:]/g, '')}-${process.pid.toString(16)}${String(++ids).padStart(4, '0')}`
}

export function intentRecord(mode: string, extra: Partial<IntentRecord> = {}): IntentRecord {
  return { id: intentId(), mode, force: false, recordedAt: new Date().toISOString(), by: 'hostile@test', ...extra }
}

/** Records an intent through the store (the way `layoutd intent` does). */
export async function recordIntent(b: { store: DeployStore }, mode: 'flat' | 'nested', extra: Partial<IntentRecord> = {}): Promise<IntentRecord> {
  const r = intentRecord(mode, extra)
  await b.store.record(r, AbortSignal.timeout(10_000))
  return r
}

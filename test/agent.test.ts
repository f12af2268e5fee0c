// The worker's start-up order and its poller, in process, with the real
// registry, the real directory store and the real pass on a temp data dir.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { test } from 'node:test'
import type { TestContext } from 'node:test'
import pino from 'pino'
import { Agent } from '../src/agent.js'
import { loadConfig, type Config } from '../src/config.js'
import { flatPaths, nestedPaths } from '../src/domain/paths.js'
import type { DeployStore } from '../src/domain/ports.js'
import type { IntentRecord } from '../src/domain/schemas.js'
import { DirDeployStore } from '../src/infra/deploy-dir.js'
import { Registry } from '../src/infra/registry.js'
import { Metrics } from '../src/metrics.js'

interface Box {
  config: Config
  registry: Registry
  store: DeployStore
  agent: Agent
  metrics: Metrics
}

/** A store that counts its reads and can be made to hold them until released. */
class GatedStore implements DeployStore {
  reads = 0
  #open: Promise<void> = Promise.resolve()
  #release: () => void = () => {}
  constructor(private readonly inner: DeployStore) {}
  hold(): void {
    this.#open = new Promise((r) => (this.#release = r))
  }
  release(): void {
    this.#release()
  }
  async list(signal: AbortSignal): Promise<IntentRecord[]> {
    this.reads++
    await this.#open
    return this.inner.list(signal)
  }
  record(i: IntentRecord, s: AbortSignal): Promise<void> {
    return this.inner.record(i, s)
  }
  describe(): string {
    return this.inner.describe()
  }
  close(): Promise<void> {
    return this.inner.close()
  }
}

async function box(t: TestContext, env: Record<string, string> = {}, wrap?: (s: DeployStore) => DeployStore): Promise<Box> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'layoutd-agent-'))
  const probe = path.join(dir, 'probe.out')
  await fs.writeFile(probe, 'ready: true\n')
  const config = loadConfig({
    CARLOS_BOX: 'kass-1',
    CARLOS_DATA_DIR: path.join(dir, 'data'),
    CARLOS_DEPLOYMENT_DIR: path.join(dir, 'deploy'),
    CARLOS_NESTED_MOUNTS: 'none',
    CARLOS_PROBE_FILE: probe,
    CARLOS_LAYOUT_POLL: '50ms',
    ...env,
  })
  const registry = Registry.open(config.dataDir)
  const dirStore = new DirDeployStore(config.deploymentDir)
  const store = wrap ? wrap(dirStore) : dirStore
  const metrics = new Metrics()
  const agent = new Agent({ config, logger: pino({ level: 'silent' }), metrics, registry, store })
  // One cleanup, in order: the agent writes under dir until it has stopped.
  t.after(async () => {
    await agent.stop()
    registry.close()
    await fs.rm(dir, { recursive: true, force: true })
  })
  return { config, registry, store, agent, metrics }
}

async function addFlat(b: Box, host: string): Promise<void> {
  const p = flatPaths(b.config, host)
  await fs.mkdir(p.dir, { recursive: true })
  await fs.writeFile(path.join(p.dir, 'db.sqlite'), host)
  b.registry.add({ host, kind: 'instance', hibernate: true, ...p })
}

async function record(b: Box, id: string, mode: 'flat' | 'nested', extra: Partial<IntentRecord> = {}): Promise<void> {
  await b.store.record({ id, mode, force: false, recordedAt: new Date().toISOString(), by: 'test', ...extra }, AbortSignal.timeout(5000))
}

/** Polls cond (no blind sleep: a bounded wait on an observable state). */
async function until(cond: () => boolean, what: string, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 10))
  }
}

void test('/ready is 503 with the phase until start-up recovery is done, then 200', async (t) => {
  const b = await box(t)
  assert.equal(b.agent.readiness().ready, false)
  assert.equal(b.agent.readiness().phase, 'starting')
  await b.agent.start()
  const r = b.agent.readiness()
  assert.equal(r.ready, true)
  assert.equal(r.phase, 'ready')
  // The isolation probe is read asynchronously: not yet run, then open.
  await until(() => b.agent.readiness().nested.allowed, 'the isolation gate to open')
  assert.deepEqual(b.agent.readiness().nested, { allowed: true, reason: '' })
})

void test('with no journal and no hold marker, start-up does not wait on the deploy store', async (t) => {
  let gated: GatedStore | undefined
  const b = await box(t, {}, (s) => (gated = new GatedStore(s)))
  gated?.hold()
  await b.agent.start() // would hang if start-up read the held store
  assert.equal(b.agent.readiness().ready, true)
  gated?.release()
})

void test('with a journal present, start-up reads the intent before the activator may wake anything', async (t) => {
  let gated: GatedStore | undefined
  const b = await box(t, {}, (s) => (gated = new GatedStore(s)))
  await fs.mkdir(path.join(b.config.dataDir, 'layout'), { recursive: true })
  // A journal that names a host with no files anywhere: recovery keeps it fenced.
  const from = flatPaths(b.config, 'a.example.com')
  const dest = nestedPaths(b.config, 'a.example.com')
  await fs.writeFile(
    path.join(b.config.dataDir, 'layout', 'a.example.com.journal'),
    JSON.stringify({ v: 1, host: 'a.example.com', to: 'nested', from, dest, generation: 1, startedAt: new Date().toISOString() }),
  )
  b.registry.add({ host: 'a.example.com', kind: 'instance', hibernate: true, ...from })
  gated?.hold()
  const started = b.agent.start()
  await until(() => (gated?.reads ?? 0) > 0, 'the start-up intent read')
  assert.equal(b.agent.readiness().ready, false, 'not ready while the start-up intent is being read')
  assert.equal(b.agent.readiness().phase, 'recovering')
  gated?.release()
  await started
  assert.equal(b.agent.readiness().ready, true)
  assert.equal(b.agent.report().rows['a.example.com']?.layout, 'fenced')
})

void test('a newly recorded intent converges the box without a restart', async (t) => {
  const b = await box(t, { CARLOS_LAYOUT_DEFAULT: 'flat' })
  await addFlat(b, 'a.example.com')
  await addFlat(b, 'b.example.com')
  await b.agent.start()
  await until(() => b.agent.legState().lastRun?.finishedAt != null, 'the first run')
  assert.equal(b.agent.report().mode, 'none')
  assert.equal(b.agent.report().rows['a.example.com']?.layout, 'flat')

  await record(b, '20261130T090000.000Z-aaaaaa', 'nested', { box: 'kass-1' })
  await until(() => b.agent.report().mode === 'nested' && !b.agent.legState().running, 'the poller to converge nested')
  const report = b.agent.report()
  assert.equal(report.rows['a.example.com']?.layout, 'nested')
  assert.equal(report.rows['b.example.com']?.layout, 'nested')
  assert.equal(await fs.readFile(path.join(nestedPaths(b.config, 'a.example.com').dir, 'db.sqlite'), 'utf8'), 'a.example.com')

  // An intent for another box is not this box's: nothing changes.
  await record(b, '20261130T090001.000Z-bbbbbb', 'flat', { box: 'kass-2' })
  const run = await b.agent.converge(10_000)
  assert.ok(run)
  assert.equal(b.agent.report().mode, 'nested')
  assert.ok(run.results.every((r) => r.outcome === 'unchanged'))
})

void test('a malformed intent record makes the intent unreadable: nothing moves', async (t) => {
  const b = await box(t, { CARLOS_LAYOUT_DEFAULT: 'flat' })
  await addFlat(b, 'a.example.com')
  await b.agent.start()
  const dir = path.join(b.config.deploymentDir, 'layout', 'intents')
  await fs.mkdir(dir, { recursive: true })
  await fs.writeFile(path.join(dir, '20261130T090000.000Z-cccccc.json'), '{"id": "20261130T090000.000Z-cccccc", "mode": ')
  const run = await b.agent.converge(10_000)
  assert.ok(run)
  assert.deepEqual(run.results, [])
  const report = b.agent.report()
  assert.equal(report.mode, 'unreadable')
  assert.equal(report.rows['a.example.com']?.layout, 'flat')
  assert.ok(report.warnings.some((w) => w.includes('cannot be read')), report.warnings.join('; '))
})

void test('CARLOS_ACTIVATOR=none: the unmanaged report, and nothing moves', async (t) => {
  const b = await box(t, { CARLOS_ACTIVATOR: 'none' })
  await addFlat(b, 'a.example.com')
  await record(b, '20261130T090000.000Z-dddddd', 'nested')
  await b.agent.start()
  const report = b.agent.report()
  assert.equal(report.mode, 'unmanaged')
  assert.equal(report.rows['a.example.com']?.layout, 'flat')
  assert.equal(b.agent.readiness().nested.allowed, false)
  assert.equal((await fs.stat(flatPaths(b.config, 'a.example.com').dir)).isDirectory(), true)
})

void test('recovery counts each journal by the action the DESIGN §4 table took', async (t) => {
  const b = await box(t, { CARLOS_LAYOUT_DEFAULT: 'flat' })
  // a: files already at dest, row still at from (a crash after the rename): the row is committed.
  // b: no files anywhere: kept fenced.
  for (const host of ['a.example.com', 'b.example.com']) {
    const from = flatPaths(b.config, host)
    const dest = nestedPaths(b.config, host)
    b.registry.add({ host, kind: 'instance', hibernate: true, ...from })
    await fs.mkdir(path.join(b.config.dataDir, 'layout'), { recursive: true })
    await fs.writeFile(
      path.join(b.config.dataDir, 'layout', `${host}.journal`),
      JSON.stringify({ v: 1, host, to: 'nested', from, dest, generation: 1, startedAt: new Date().toISOString() }),
    )
    if (host === 'a.example.com') {
      await fs.mkdir(dest.dir, { recursive: true })
      await fs.writeFile(path.join(dest.dir, 'db.sqlite'), host)
    }
  }
  await b.agent.start()
  const text = await b.metrics.text()
  const count = (action: string) => Number(new RegExp(`^carlos_layout_recovered_journals_total\\{action="${action}"\\} (\\d+)$`, 'm').exec(text)?.[1])
  assert.equal(count('committed'), 1)
  assert.equal(count('kept_fenced'), 1)
  assert.equal(count('finished'), 0)
  assert.equal(count('rolled_back'), 0)
  assert.equal(b.registry.get('a.example.com')?.dir, nestedPaths(b.config, 'a.example.com').dir)
})

void test('a host held for a second name on one of its files is counted in held_hosts and reported fenced', async (t) => {
  const b = await box(t, { CARLOS_LAYOUT_DEFAULT: 'flat' })
  await addFlat(b, 'a.example.com')
  await addFlat(b, 'b.example.com')
  const dir = flatPaths(b.config, 'a.example.com').dir
  await fs.link(path.join(dir, 'db.sqlite'), path.join(dir, 'second-name'))
  await b.agent.start()
  await until(() => b.agent.readiness().nested.allowed, 'the isolation gate to open')
  await record(b, '20261130T090000.000Z-eeeeee', 'nested')
  const run = await b.agent.converge(10_000)
  assert.ok(run)
  assert.equal(run.results.find((r) => r.host === 'a.example.com')?.outcome, 'held')
  assert.equal(b.agent.report().rows['a.example.com']?.layout, 'fenced')
  assert.equal(b.agent.report().rows['b.example.com']?.layout, 'nested')
  assert.match(await b.metrics.text(), /^carlos_layout_held_hosts 1$/m)
})

void test('the registry readiness check asks the database: a closed connection fails it', async (t) => {
  const b = await box(t)
  await b.agent.start()
  assert.deepEqual(b.agent.readiness().checks[0], { name: 'registry', ok: true, detail: b.registry.file })
  b.registry.close()
  const r = b.agent.readiness()
  assert.equal(r.checks[0]?.ok, false)
  assert.match(r.checks[0]?.detail ?? '', /not open/)
  assert.equal(r.ready, false)
})

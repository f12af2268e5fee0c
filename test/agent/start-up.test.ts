// The agent's start-up order (design §4), in process, with the real
// registry, the real directory store and the real pass on a temp data dir.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test } from 'node:test'
import { flatPaths, nestedPaths } from '../../src/domain/paths.js'
import type { DeployStore } from '../../src/domain/ports.js'
import type { IntentRecord } from '../../src/domain/schemas.js'
import { addFlat, agentBox, recordIntent } from '../helpers/agent.js'
import { until } from '../helpers/until.js'

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

void test('/ready is 503 with the phase until start-up recovery is done, then 200', async (t) => {
  const b = await agentBox(t)
  assert.equal(b.agent.readiness().ready, false)
  assert.equal(b.agent.readiness().phase, 'starting')
  await b.agent.start()
  const r = b.agent.readiness()
  assert.equal(r.ready, true)
  assert.equal(r.phase, 'ready')
  // The isolation probe is read asynchronously: not yet run, then open.
  await until('the isolation gate to open', () => b.agent.readiness().nested.allowed)
  assert.deepEqual(b.agent.readiness().nested, { allowed: true, reason: '' })
})

void test('with no journal and no hold marker, start-up does not wait on the deploy store', async (t) => {
  let gated: GatedStore | undefined
  const b = await agentBox(t, { wrapStore: (s) => (gated = new GatedStore(s)) })
  gated?.hold()
  await b.agent.start() // would hang if start-up read the held store
  assert.equal(b.agent.readiness().ready, true)
  gated?.release()
})

void test('with a journal present, start-up reads the intent before the activator may wake anything', async (t) => {
  let gated: GatedStore | undefined
  const b = await agentBox(t, { wrapStore: (s) => (gated = new GatedStore(s)) })
  await fs.mkdir(path.join(b.config.dataDir, 'layout'), { recursive: true })
  // A journal that names a host with no files anywhere: recovery keeps it fenced.
  const from = flatPaths(b.config, 'a.example.com')
  const dest = nestedPaths(b.config, 'a.example.com')
  await fs.writeFile(
    path.join(b.config.dataDir, 'layout', 'a.example.com.journal'),
    JSON.stringify({
      v: 1,
      host: 'a.example.com',
      to: 'nested',
      from,
      dest,
      generation: 1,
      startedAt: new Date().toISOString(),
    }),
  )
  b.registry.add({ host: 'a.example.com', kind: 'instance', hibernate: true, ...from })
  gated?.hold()
  const started = b.agent.start()
  await until('the start-up intent read', () => (gated?.reads ?? 0) > 0)
  assert.equal(b.agent.readiness().ready, false, 'not ready while the start-up intent is being read')
  assert.equal(b.agent.readiness().phase, 'recovering')
  gated?.release()
  await started
  assert.equal(b.agent.readiness().ready, true)
  assert.equal(b.agent.report().rows['a.example.com']?.layout, 'fenced')
})

void test('while an armed box recovers, its rows say start-up recovery is under way, never "no activator"', async (t) => {
  let gated: GatedStore | undefined
  const b = await agentBox(t, { wrapStore: (s) => (gated = new GatedStore(s)) })
  await fs.mkdir(path.join(b.config.dataDir, 'layout'), { recursive: true })
  const from = flatPaths(b.config, 'a.example.com')
  const dest = nestedPaths(b.config, 'a.example.com')
  await fs.writeFile(
    path.join(b.config.dataDir, 'layout', 'a.example.com.journal'),
    JSON.stringify({
      v: 1,
      host: 'a.example.com',
      to: 'nested',
      from,
      dest,
      generation: 1,
      startedAt: '2026-12-01T00:00:00Z',
    }),
  )
  b.registry.add({ host: 'a.example.com', kind: 'instance', hibernate: true, ...from })
  b.registry.add({
    host: 'b.example.com',
    kind: 'instance',
    hibernate: true,
    ...nestedPaths(b.config, 'b.example.com'),
  })
  gated?.hold()
  const started = b.agent.start()
  await until('the start-up intent read', () => (gated?.reads ?? 0) > 0)
  const rows = b.agent.report().rows
  assert.equal(rows['a.example.com']?.code, 'in_flight')
  assert.match(rows['a.example.com']?.reason ?? '', /a\.example\.com\.journal \(start-up recovery under way\)/)
  assert.deepEqual(
    { layout: rows['b.example.com']?.layout, code: rows['b.example.com']?.code },
    { layout: 'nested', code: 'recovery_pending' },
  )
  for (const r of Object.values(rows)) assert.doesNotMatch(r.reason, /no activator/)
  gated?.release()
  await started
})

void test('CARLOS_ACTIVATOR=none: the unmanaged report, and nothing moves', async (t) => {
  const b = await agentBox(t, { env: { CARLOS_ACTIVATOR: 'none' } })
  await addFlat(b, 'a.example.com')
  await recordIntent(b, 'nested', { id: '20261130T090000.000Z-dddddd' })
  await b.agent.start()
  const report = b.agent.report()
  assert.equal(report.mode, 'unmanaged')
  assert.equal(report.rows['a.example.com']?.layout, 'flat')
  assert.equal(b.agent.readiness().nested.allowed, false)
  assert.equal((await fs.stat(flatPaths(b.config, 'a.example.com').dir)).isDirectory(), true)
})

void test('recovery counts each journal by the action the design §4 table took', async (t) => {
  const b = await agentBox(t, { env: { CARLOS_LAYOUT_DEFAULT: 'flat' } })
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
      await fs.writeFile(path.join(dest.dir, 'host.txt'), host)
    }
  }
  await b.agent.start()
  const text = await b.metrics.text()
  const count = (action: string) =>
    Number(new RegExp(`^carlos_layout_recovered_journals_total\\{action="${action}"\\} (\\d+)$`, 'm').exec(text)?.[1])
  assert.equal(count('committed'), 1)
  assert.equal(count('kept_fenced'), 1)
  assert.equal(count('finished'), 0)
  assert.equal(count('rolled_back'), 0)
  assert.equal(b.registry.get('a.example.com')?.dir, nestedPaths(b.config, 'a.example.com').dir)
})

void test('intent_mode says none from the moment the agent is built, before any read or change of intent', async (t) => {
  const b = await agentBox(t)
  const text = await b.metrics.text()
  assert.match(text, /^carlos_layout_intent_mode\{mode="none"\} 1$/m)
  for (const mode of ['flat', 'nested', 'unreadable', 'unmanaged'])
    assert.match(text, new RegExp(`^carlos_layout_intent_mode\\{mode="${mode}"\\} 0$`, 'm'), mode)
})

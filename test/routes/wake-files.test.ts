// A grant is a fact about the disk (design §6.1): a flat or nested row wakes
// only while its dir is there, a real directory, and the other shape's is
// not. Through the real agent, registry and pass on a temp box (inject),
// and once through a real agent process on its socket: a registry restored
// from a copy older than the files, a deleted dir, a symlink, the pass's
// own files_missing; and the row reads fenced in the report and the console.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test } from 'node:test'
import { request } from 'undici'
import type { WakeRefusal } from '../../src/agent-api.js'
import { flatPaths, nestedPaths, nestedRoot } from '../../src/domain/paths.js'
import type { LayoutReport, LegState } from '../../src/domain/schemas.js'
import { Registry } from '../../src/infra/registry.js'
import { addFlat, agentBox, recordIntent, type AgentBox } from '../helpers/agent.js'
import { AgentProcess, makeSandbox, recordIntent as recordSandboxIntent } from '../helpers/agent-process.js'
import { tmpDir } from '../helpers/tmp.js'
import { until } from '../helpers/until.js'

const HOSTS = ['a.example.com', 'b.example.com', 'c.example.com']

/** The files of a flat row moved nested by hand, its row left flat: a registry older than the last move. */
async function filesMovedNested(b: Pick<AgentBox, 'config'>, host: string): Promise<void> {
  await fs.mkdir(nestedRoot(b.config, host), { recursive: true })
  await fs.rename(flatPaths(b.config, host).dir, nestedPaths(b.config, host).dir)
}

async function answers(b: AgentBox, host: string) {
  const claim = await b.app.inject({ method: 'POST', url: `/wakes/${host}` })
  const ready = await b.app.inject({ method: 'GET', url: `/ready/${host}` })
  const gate = await b.app.inject({ method: 'GET', url: `/gate/${host}` })
  return { claim, ready, gate }
}

function idle(leg: LegState): boolean {
  return !leg.running && !leg.pending
}

void test('a registry older than the files (rows flat, files nested): after a restart no claim is granted, and no row is green', async (t) => {
  const first = await agentBox(t)
  for (const host of HOSTS) await addFlat(first, host)
  await first.close()
  const b0 = { config: first.config }
  for (const host of HOSTS) await filesMovedNested(b0, host)
  // The box restarted on it, the fleet's intent nested.
  const b = await agentBox(t, { dir: first.dir })
  await recordIntent(b, 'nested')
  await b.agent.start()
  assert.equal((await b.app.inject({ method: 'GET', url: '/ready' })).statusCode, 200)
  for (const host of HOSTS) {
    const { claim, ready, gate } = await answers(b, host)
    assert.equal(claim.statusCode, 409, `${host}: ${claim.body}`)
    const refusal = claim.json<WakeRefusal>()
    assert.deepEqual([refusal.layout, refusal.code], ['fenced', 'files_elsewhere'])
    assert.match(refusal.reason, new RegExp(`${flatPaths(b.config, host).dir} does not exist`))
    assert.equal(ready.statusCode, 409)
    assert.equal(ready.json<WakeRefusal>().code, 'files_elsewhere')
    assert.equal(gate.statusCode, 403, 'never, until a person acts')
    assert.equal(gate.headers['layoutd-code'], 'files_elsewhere')
    assert.equal(b.agent.report().rows[host]?.layout, 'fenced')
  }
  assert.deepEqual(b.agent.wakes().awake, [], 'no claim was recorded')
  // The pass's own run meets the same disk: its moves find no source (files_missing), and still nothing wakes.
  await until('the first run to end', () => idle(b.agent.legState()) && b.agent.legState().lastRun !== null)
  const results = b.agent.legState().lastRun?.results ?? []
  for (const host of HOSTS) {
    assert.equal(results.find((r) => r.host === host)?.code, 'files_missing', JSON.stringify(results))
    assert.equal((await b.app.inject({ method: 'POST', url: `/wakes/${host}` })).statusCode, 409)
  }
  const report = (await b.app.inject({ method: 'GET', url: '/layout/status' })).json<LayoutReport>()
  for (const host of HOSTS) assert.deepEqual(report.rows[host]?.layout, 'fenced', JSON.stringify(report.rows[host]))
  assert.equal(report.rows[HOSTS[0] ?? '']?.code, 'files_elsewhere')
  const page = await b.app.inject({ method: 'GET', url: '/?word=fenced' })
  for (const host of HOSTS) assert.ok(page.body.includes(host), `the console lists ${host} among the fenced rows`)
  assert.ok(page.body.includes('files_elsewhere'))
  const metrics = await b.metrics.text()
  assert.match(metrics, /carlos_layout_wake_claims_total\{result="files"\} [1-9]/)

  // The operator points the rows where the files are: they wake there.
  const host = HOSTS[0] ?? ''
  b.registry.remove(host)
  b.registry.add({ host, kind: 'instance', hibernate: true, ...nestedPaths(b.config, host) })
  const granted = await b.app.inject({ method: 'POST', url: `/wakes/${host}` })
  assert.equal(granted.statusCode, 200, granted.body)
  assert.equal(granted.json<{ dir: string }>().dir, nestedPaths(b.config, host).dir)
})

void test('a flat tenant whose dir was deleted, or made a symlink, is refused; it wakes again once its dir is back', async (t) => {
  const b = await agentBox(t, { env: { CARLOS_LAYOUT_DEFAULT: 'flat' } })
  await addFlat(b, 'a.example.com')
  await addFlat(b, 'b.example.com')
  await b.agent.start()
  const dir = flatPaths(b.config, 'a.example.com').dir
  assert.equal((await b.app.inject({ method: 'GET', url: '/ready/a.example.com' })).statusCode, 200)
  const aside = path.join(b.dir, 'aside')
  await fs.rename(dir, aside)
  const { claim, ready, gate } = await answers(b, 'a.example.com')
  assert.equal(claim.statusCode, 409)
  assert.deepEqual(
    [claim.json<WakeRefusal>().code, ready.statusCode, ready.json<WakeRefusal>().code, gate.statusCode],
    ['files_missing', 409, 'files_missing', 403],
  )
  assert.deepEqual(b.agent.report().rows['a.example.com']?.code, 'files_missing', 'the look is kept for the report')
  assert.equal((await b.app.inject({ method: 'POST', url: '/wakes/b.example.com' })).statusCode, 200)

  await fs.symlink(aside, dir)
  const link = await b.app.inject({ method: 'POST', url: '/wakes/a.example.com' })
  assert.deepEqual([link.statusCode, link.json<WakeRefusal>().code], [409, 'files_not_directory'])

  await fs.unlink(dir)
  await fs.rename(aside, dir)
  const back = await b.app.inject({ method: 'POST', url: '/wakes/a.example.com' })
  assert.equal(back.statusCode, 200, back.body)
  assert.equal(b.agent.report().rows['a.example.com']?.layout, 'flat')
  assert.deepEqual(b.agent.wakes().awake, ['a.example.com', 'b.example.com'])
})

void test('a nested row with a flat dir beside it is refused, and PUT /wakes asks its stop', async (t) => {
  const b = await agentBox(t, { env: { CARLOS_LAYOUT_DEFAULT: 'flat' } })
  await addFlat(b, 'a.example.com')
  await b.agent.start()
  await filesMovedNested(b, 'a.example.com')
  b.registry.remove('a.example.com')
  b.registry.add({
    host: 'a.example.com',
    kind: 'instance',
    hibernate: true,
    ...nestedPaths(b.config, 'a.example.com'),
  })
  await recordIntent(b, 'nested')
  assert.equal((await b.app.inject({ method: 'POST', url: '/wakes/a.example.com' })).statusCode, 200)
  await fs.mkdir(flatPaths(b.config, 'a.example.com').dir, { recursive: true })
  const both = await b.app.inject({ method: 'GET', url: '/ready/a.example.com' })
  assert.deepEqual([both.statusCode, both.json<WakeRefusal>().code], [409, 'files_elsewhere'])
  assert.match(both.json<WakeRefusal>().reason, /two places/)
  const set = await b.app.inject({ method: 'PUT', url: '/wakes', payload: { awake: ['a.example.com'] } })
  assert.deepEqual(
    set.json<{ stop: Array<{ host: string; code: string }> }>().stop.map((s) => [s.host, s.code]),
    [['a.example.com', 'files_elsewhere']],
  )
})

void test('through a real agent process: a registry restored from a flat copy refuses every claim on its socket', async (t) => {
  const root = await tmpDir(t, 'layoutd-wake-files-')
  const sb = await makeSandbox(root)
  const dirs = { dataDir: sb.dataDir, runDir: path.join(sb.dataDir, 'run') }
  const registry = Registry.open(sb.dataDir)
  try {
    for (const host of HOSTS) {
      const flat = flatPaths(dirs, host)
      registry.add({ host, kind: 'instance', hibernate: true, ...flat })
      await fs.mkdir(nestedPaths(dirs, host).dir, { recursive: true })
      await fs.writeFile(path.join(nestedPaths(dirs, host).dir, 'host.txt'), host)
    }
  } finally {
    registry.close()
  }
  await recordSandboxIntent(sb, 'nested')
  const agent = await AgentProcess.start(sb)
  t.after(() => agent.kill())
  await agent.waitReady()
  // The leg's first run, kicked at start, fences each host while it looks (fenced_for_move): asked after it.
  await agent.waitFor(
    'the first run over',
    async () => {
      const { leg } = await agent.status()
      return leg.lastRun !== null && !leg.running && !leg.pending ? true : undefined
    },
    60_000,
  )
  for (const host of HOSTS) {
    const ready = await request(`${agent.url}/ready/${host}`)
    const body = (await ready.body.json()) as WakeRefusal
    assert.deepEqual([ready.statusCode, body.code], [409, 'files_elsewhere'], agent.tail())
    const claim = await request(`${agent.url}/wakes/${host}`, { method: 'POST', headers: agent.authorization() })
    const refusal = (await claim.body.json()) as WakeRefusal
    assert.deepEqual([claim.statusCode, refusal.code], [409, 'files_elsewhere'])
  }
  const status = await agent.status()
  for (const host of HOSTS) assert.equal(status.rows[host]?.layout, 'fenced')
})

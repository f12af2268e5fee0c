// The real agent process against a real etcd (test/helpers/etcd.ts) when
// etcd fails: killed, stopped (slow or cut off), or holding a garbage
// record. Each time the intent is unreadable: nothing moves, nothing is
// released flat, /layout/status says `unreadable`, /ready stays 200; and
// once etcd is healthy again the same agent process converges.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test, type TestContext } from 'node:test'
import type { LayoutReport } from '../../src/domain/schemas.js'
import { INTENT_PREFIX } from '../../src/infra/deploy-etcd/store.js'
import { runFleet } from '../../bench/fleet.js'
import { AgentProcess, MAIN_JS, makeSandbox, sandboxEnv, type Sandbox } from '../helpers/agent-process.js'
import { ended, spawnGroup } from '../helpers/child.js'
import { EtcdServer } from '../helpers/etcd.js'
import { tmpDir } from '../helpers/tmp.js'

const HOSTS = ['a.example.com', 'b.example.com']

/**
 * Runs the CLI with the box's environment plus env to its end; asserts exit 0 unless told.
 * (runCli of agent-process.ts takes no environment of its own, and these commands need etcd's.)
 */
async function cli(
  sb: Sandbox,
  env: Record<string, string>,
  args: string[],
  want = 0,
): Promise<{ stdout: string; stderr: string }> {
  const child = spawnGroup(process.execPath, [MAIN_JS, ...args], {
    env: sandboxEnv(sb, env),
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout?.setEncoding('utf8').on('data', (s: string) => (stdout += s))
  child.stderr?.setEncoding('utf8').on('data', (s: string) => (stderr += s))
  const { code } = await ended(child, `layoutd ${args.join(' ')}`).catch((err: unknown) => {
    throw new Error(`${(err as Error).message}; stderr: ${stderr}`)
  })
  assert.equal(code, want, `layoutd ${args.join(' ')}: exit ${String(code)}: ${stderr}`)
  return { stdout, stderr }
}

/** A box with two sleeping tenants (minted flat), its agent running against etcd; the box then migrated to nested. */
async function nestedBox(t: TestContext, poll: string) {
  const etcd = await EtcdServer.forTest(t)
  const sb = await makeSandbox(await tmpDir(t), 'etcd-box')
  // No intent must mean flat here, so that only a recorded intent moves anything.
  const env = { CARLOS_DEPLOYMENT_ETCD: etcd.url, CARLOS_LAYOUT_DEFAULT: 'flat', CARLOS_LAYOUT_POLL: poll }
  for (const h of HOSTS) assert.match((await cli(sb, env, ['routes', 'add', h, '--hibernate'])).stdout, /minted flat/)
  await fs.writeFile(path.join(sb.dataDir, 'apps', 'a.example.com', 'tenant.db'), 'rows')
  const agent = await AgentProcess.start(sb, { env })
  t.after(() => agent.stop())
  await agent.waitReady()
  // /ready comes before the agent's first read and its watch: wait for the watch, so the migrate below goes through it.
  await agent.waitFor(
    'the watch',
    () => Promise.resolve(agent.tail().includes('etcd deploy store: watching') ? true : undefined),
    10_000,
  )
  const t0 = performance.now()
  assert.match((await cli(sb, env, ['intent', 'migrate', '--fleet'])).stdout, /nested for the whole fleet/)
  const r = await agent.waitConverged(HOSTS, 'nested', 20_000)
  assert.equal(r.mode, 'nested')
  return { etcd, sb, env, agent, migrateMs: performance.now() - t0 }
}

const tenantFile = (sb: Sandbox, layout: 'nested' | 'flat') =>
  layout === 'nested'
    ? path.join(sb.dataDir, 'nested', 'a.example.com', 'data', 'tenant.db')
    : path.join(sb.dataDir, 'apps', 'a.example.com', 'tenant.db')

/** Waits until status says unreadable, then checks that nothing moved and the box still serves wakes. */
async function assertUnreadableAndStill(
  agent: AgentProcess,
  sb: Sandbox,
  timeoutMs: number,
  why: RegExp,
): Promise<LayoutReport> {
  const r = await agent.waitFor(
    'status to say unreadable',
    async () => {
      const s = await agent.status()
      return s.mode === 'unreadable' ? s : undefined
    },
    timeoutMs,
  )
  assert.ok(
    r.warnings.some((w) => why.test(w) && /nothing moves and nothing is released flat/.test(w)),
    JSON.stringify(r.warnings),
  )
  for (const h of HOSTS) assert.equal(r.rows[h]?.layout, 'nested', `${h} stays nested while the intent is unreadable`)
  assert.equal(await fs.readFile(tenantFile(sb, 'nested'), 'utf8'), 'rows')
  assert.equal(await agent.ready(), true, '/ready stays 200')
  return r
}

async function waitMode(agent: AgentProcess, mode: string, timeoutMs: number): Promise<LayoutReport> {
  return agent.waitFor(
    `status to say ${mode}`,
    async () => {
      const s = await agent.status()
      return s.mode === mode ? s : undefined
    },
    timeoutMs,
  )
}

void test('etcd SIGKILLed: unreadable at once through the broken watch; restarted: the watch comes back and a revert converges', async (t) => {
  // A poll of a minute: everything quicker than that is the watch's doing.
  const { etcd, sb, env, agent, migrateMs } = await nestedBox(t, '60s')
  assert.ok(migrateMs < 10_000, `the migrate converged through the watch (${Math.round(migrateMs)} ms)`)

  await etcd.kill()
  await assertUnreadableAndStill(agent, sb, 10_000, /ECONNREFUSED/)

  await etcd.restart()
  const back = await waitMode(agent, 'nested', 20_000)
  for (const h of HOSTS) assert.equal(back.rows[h]?.layout, 'nested')

  const t0 = performance.now()
  await cli(sb, env, ['intent', 'revert', '--fleet'])
  await agent.waitConverged(HOSTS, 'flat', 20_000)
  const revertMs = performance.now() - t0
  assert.ok(revertMs < 10_000, `the revert converged through the re-established watch (${Math.round(revertMs)} ms)`)
  assert.equal(await fs.readFile(tenantFile(sb, 'flat'), 'utf8'), 'rows')
  assert.equal((await agent.status()).mode, 'flat')
  assert.equal(agent.exit, undefined, 'the same agent process throughout')
})

void test('etcd stopped (SIGSTOP, as a slow or cut-off member): reads time out, unreadable; resumed: converges', async (t) => {
  const { etcd, sb, env, agent } = await nestedBox(t, '300ms')
  await etcd.pause()
  try {
    // A read is given 5 s per endpoint; the poll's read and then the leg's.
    await assertUnreadableAndStill(agent, sb, 20_000, /no answer within 5000 ms/)
  } finally {
    await etcd.resume()
  }
  await waitMode(agent, 'nested', 20_000)
  await cli(sb, env, ['intent', 'revert', '--fleet'])
  await agent.waitConverged(HOSTS, 'flat', 20_000)
  assert.equal(await fs.readFile(tenantFile(sb, 'flat'), 'utf8'), 'rows')
  assert.equal(agent.exit, undefined)
})

void test('a garbage record in etcd: unreadable, the CLI names the key; removed: the box reads its intent again', async (t) => {
  const { etcd, sb, env, agent } = await nestedBox(t, '300ms')
  const key = `${INTENT_PREFIX}20991231T000000.000Z-zzzzzz`
  await etcd.put(key, '{"id": "20991231T000000.000Z-zzzzzz", "mode": "flat"')
  await assertUnreadableAndStill(
    agent,
    sb,
    10_000,
    new RegExp(`intent record etcd ${key.replace(/\./g, '\\.')}: not JSON`),
  )
  const st = await cli(sb, env, ['intent', 'status'], 1)
  assert.match(st.stdout, /^mode\s+unreadable$/m)
  assert.match(
    st.stderr,
    new RegExp(`intent unreadable: etcd ${etcd.url}: intent record etcd ${key.replace(/\./g, '\\.')}: not JSON`),
  )

  await etcd.del(key)
  const back = await waitMode(agent, 'nested', 10_000)
  for (const h of HOSTS) assert.equal(back.rows[h]?.layout, 'nested')
  await cli(sb, env, ['intent', 'revert', '--fleet'])
  await agent.waitConverged(HOSTS, 'flat', 20_000)
})

void test('a small fleet on one etcd with TLS and auth: fleet status shows every box, --wait exits 0 after a fleet-wide migrate, a --box revert moves only its box, a killed box leaves after its lease', async (t) => {
  const root = await tmpDir(t)
  const figures = await runFleet({ root, boxes: 4, hostsPerBox: 2 })
  t.diagnostic(JSON.stringify({ ...figures, migrate: { ...figures.migrate, perBox: undefined } }))
  assert.equal(figures.security, 'tls+auth')
  assert.equal(figures.migrate.boxes, 4)
  assert.equal(figures.revert.boxes, 1)
  assert.equal(figures.fleetStatus.boxesShown, 4)
  // The lease is 2 s; etcd expires leases on its own tick, so after it (how soon after is the fleet bench's figure).
  assert.ok(figures.killedBoxGoneMs < figures.boxTtlMs + 20_000, JSON.stringify(figures))
  // Through the watch (the fleet polls once a minute), well within the poll.
  assert.ok(figures.migrate.maxMs < 20_000, JSON.stringify(figures))
  assert.ok(figures.revert.maxMs < 20_000, JSON.stringify(figures))
  // Every box's watch saw each record well within the minute's poll (how promptly is the fleet bench's figure).
  assert.ok(figures.migrate.watch.maxMs < 20_000 && figures.revert.watch.maxMs < 20_000, JSON.stringify(figures))
})

void test('a deploy store that cannot be opened at start (its password file missing) is an unreadable intent: the agent starts and serves, and reads once the file is there', async (t) => {
  const etcd = await EtcdServer.forTest(t)
  await etcd.enableAuth([{ name: 'layoutd', password: 'layoutd-password', readwrite: ['/carlos/layout/'] }])
  const sb = await makeSandbox(await tmpDir(t), 'etcd-box')
  const passwordFile = path.join(sb.root, 'etcd-password')
  const env = {
    CARLOS_DEPLOYMENT_ETCD: etcd.url,
    CARLOS_ETCD_USER: 'layoutd',
    CARLOS_ETCD_PASSWORD_FILE: passwordFile,
    CARLOS_LAYOUT_DEFAULT: 'flat',
    CARLOS_LAYOUT_POLL: '200ms',
  }
  const agent = await AgentProcess.start(sb, { env })
  t.after(() => agent.stop())
  await agent.waitReady()
  const r = await waitMode(agent, 'unreadable', 10_000)
  assert.ok(
    r.warnings.some((w) => w.includes('deploy_store_unopened') && w.includes('CARLOS_ETCD_PASSWORD_FILE')),
    JSON.stringify(r.warnings),
  )
  assert.equal(await agent.ready(), true, '/ready is 200: the box serves its wakes')

  await fs.writeFile(passwordFile, 'layoutd-password\n')
  const id = '20261130T090000.000Z-aaaaaa'
  const record = { id, mode: 'flat', force: false, recordedAt: '2026-11-30T09:00:00.000Z', by: 'test' }
  await etcd.put(`${INTENT_PREFIX}${id}`, JSON.stringify(record))
  await waitMode(agent, 'flat', 20_000)
})

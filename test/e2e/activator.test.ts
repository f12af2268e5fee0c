// The activator contract end to end (design §3 steps 2–3, §6): the real
// agent as a child process and the reference activator, each on a real
// loopback socket. An awake tenant is deferred through its grace, then
// stopped, moved, and woken at its new paths; a forced intent stops at
// once; and a converge under a storm of claims never grants a tenant whose
// files are moving.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { test, type TestContext } from 'node:test'
import type { WakeGrant } from '../../src/agent-api.js'
import type { Mode } from '../../src/domain/modes.js'
import { pathsFor } from '../../src/domain/paths.js'
import { journalNames } from '../../src/infra/layout-dir.js'
import { Registry } from '../../src/infra/registry.js'
import { AgentProcess, makeSandbox, recordIntent, type Sandbox } from '../helpers/agent-process.js'
import { ReferenceActivator } from '../helpers/reference-activator.js'

/** A hang fails the test instead of the run. */
const LIMIT = { timeout: 60_000 }

/** Short clocks: the subject is the order of things, not an hour of grace. */
const QUICK = { CARLOS_LAYOUT_DEFAULT: 'flat', CARLOS_LAYOUT_POLL: '100ms', CARLOS_LAYOUT_RETRY: '200ms' }

/** Tenants in mode, each with its own marker file and a database, added to the registry before the agent starts. */
async function addTenants(sb: Sandbox, hosts: readonly string[], mode: Mode = 'flat'): Promise<void> {
  const dirs = { dataDir: sb.dataDir, runDir: path.join(sb.dataDir, 'run') }
  const registry = Registry.open(sb.dataDir)
  try {
    for (const host of hosts) {
      const p = pathsFor(dirs, host, mode)
      await fs.mkdir(p.dir, { recursive: true })
      await fs.mkdir(path.dirname(p.socket), { recursive: true })
      await fs.writeFile(path.join(p.dir, 'host.txt'), host)
      await fs.writeFile(path.join(p.dir, 'app.db'), `db of ${host}`)
      registry.add({ host, kind: 'instance', hibernate: true, ...p, db: path.join(p.dir, 'app.db') })
    }
  } finally {
    registry.close()
  }
}

/**
 * A sandbox whose directory is removed when the test ends, and a start
 * that runs the reference activator and the agent it is the activator of.
 * Cleanups run last in, first out: the agent stops before the activator
 * closes and before its data dir is removed. (t.after runs hooks in the
 * order they were added, and a failing one skips the rest, which would
 * leave the agent running.)
 */
async function sandbox(t: TestContext): Promise<{
  sb: Sandbox
  start: (env: Record<string, string>) => Promise<{ agent: AgentProcess; act: ReferenceActivator }>
}> {
  const root = await fs.mkdtemp(path.join(os.tmpdir(), 'layoutd-act-'))
  const cleanups: Array<() => Promise<unknown>> = [() => fs.rm(root, { recursive: true, force: true })]
  t.after(async () => {
    for (const f of cleanups.reverse()) await f()
  })
  const sb = await makeSandbox(root, 'kass-1')
  const start = async (env: Record<string, string>) => {
    const act = await ReferenceActivator.start()
    cleanups.push(() => act.close())
    const agent = await AgentProcess.start(sb, { env: { ...env, CARLOS_ACTIVATOR_URL: act.url } })
    cleanups.push(() => agent.stop())
    act.connect(agent)
    await agent.waitReady()
    await agent.waitNestedAllowed()
    return { agent, act }
  }
  return { sb, start }
}

/**
 * What is wrong with a grant, checked while its claim stands (the claim is
 * what keeps the files still, so this is what the instance would find as
 * it starts): the directory holds the tenant's own files and database, and
 * no journal names the host. Undefined when nothing is.
 */
async function grantProblem(sb: Sandbox, host: string, g: WakeGrant): Promise<string | undefined> {
  try {
    const mine = await fs.readFile(path.join(g.dir, 'host.txt'), 'utf8')
    if (mine !== host) return `${host}: granted ${g.dir}, which holds ${mine}'s files`
    if ((await fs.readFile(g.db, 'utf8')) !== `db of ${host}`) return `${host}: granted db ${g.db} is not its database`
  } catch (err) {
    return `${host}: granted ${g.dir}, where its files are not (${(err as Error).message})`
  }
  // Its own journal, or a batch's naming it among others.
  const named = await journalNames(sb.dataDir)
  const file = named.files.get(host)
  if (file !== undefined) return `${host}: granted while a journal names it (${file})`
  if (named.unknown.length > 0) return `${host}: granted while ${named.unknown.join(', ')} cannot be read`
  return undefined
}

void test(
  'an awake tenant is deferred through its grace, then stopped, moved, and wakes nested on its next claim',
  LIMIT,
  async (t) => {
    const { sb, start } = await sandbox(t)
    await addTenants(sb, ['a.example.com', 'b.example.com'])
    // A grace long enough to be seen: the window in which a is deferred and b
    // nested is the grace less the first run, and a status answer on a
    // loaded machine can take most of a second.
    const { agent, act } = await start({ ...QUICK, CARLOS_LAYOUT_AWAKE_GRACE: '4s' })

    const woke = await act.wake('a.example.com')
    assert.equal(woke.status, 200)
    assert.equal(woke.status === 200 && woke.grant.layout, 'flat')

    const stopped = act.stopAsked('a.example.com')
    const t0 = Date.now()
    await recordIntent(sb, 'nested')
    const deferred = await agent.waitFor(
      'a deferred while b moves',
      async () => {
        const r = await agent.status()
        return r.rows['b.example.com']?.layout === 'nested' && r.rows['a.example.com']?.code === 'awake_grace'
          ? r
          : undefined
      },
      15_000,
    )
    assert.deepEqual(deferred.rows['a.example.com'], {
      layout: 'flat',
      code: 'awake_grace',
      reason: 'awake: 1m of grace left',
      note: '',
    })
    const grace = JSON.parse(await fs.readFile(path.join(sb.dataDir, 'layout', 'grace.json'), 'utf8')) as {
      hosts: Record<string, { mode: string }>
    }
    assert.equal(grace.hosts['a.example.com']?.mode, 'nested', 'the grace is on disk, so a restart does not reset it')
    assert.ok(act.running.has('a.example.com'), 'still running through its grace')

    const stop = await stopped
    assert.ok(stop.at - t0 >= 4000, `stopped ${stop.at - t0} ms after the intent, within the 4s grace`)
    await agent.waitConverged(['a.example.com', 'b.example.com'], 'nested', 15_000)
    assert.equal(act.running.has('a.example.com'), false, 'stopped for its move')

    const again = await act.wake('a.example.com')
    assert.equal(again.status, 200)
    assert.equal(again.status, 200, JSON.stringify(again))
    assert.equal(again.grant.layout, 'nested')
    assert.equal(again.grant.dir, path.join(sb.dataDir, 'nested', 'a.example.com', 'data'))
    assert.equal(again.grant.socket, path.join(sb.dataDir, 'nested', 'a.example.com', 'run', 'app.sock'))
    assert.equal(await grantProblem(sb, 'a.example.com', again.grant), undefined)
    assert.match(
      await fs.readFile(path.join(again.grant.dir, 'instance.env'), 'utf8'),
      /^CARLOS_INSTANCE_KEY=[0-9a-f]{64}\n$/,
      'its key moved with it',
    )
    assert.deepEqual(act.errors, [])
  },
)

void test('a forced revert stops an awake tenant at once, with no grace', LIMIT, async (t) => {
  const { sb, start } = await sandbox(t)
  await addTenants(sb, ['a.example.com'], 'nested')
  // An hour of grace: only the force can explain a stop within the test.
  const { agent, act } = await start(QUICK)
  const woke = await act.wake('a.example.com')
  assert.equal(woke.status, 200, JSON.stringify(woke))
  assert.equal(woke.grant.layout, 'nested')

  const stopped = act.stopAsked('a.example.com')
  await recordIntent(sb, 'flat', { force: true })
  await stopped
  await agent.waitConverged(['a.example.com'], 'flat', 15_000)
  assert.equal(await agent.metric('carlos_layout_moves_total{to="flat",outcome="deferred"}'), 0, 'never deferred')
  assert.equal(await agent.metric('carlos_layout_moves_total{to="flat",outcome="moved"}'), 1)

  const again = await act.wake('a.example.com')
  assert.equal(again.status, 200, JSON.stringify(again))
  assert.equal(again.grant.dir, path.join(sb.dataDir, 'apps', 'a.example.com'))
  assert.equal(await grantProblem(sb, 'a.example.com', again.grant), undefined)
  assert.deepEqual(act.errors, [])
})

void test('claims hammering a migrate and a revert never get a grant for a tenant mid-move', LIMIT, async (t) => {
  const hosts = Array.from({ length: 24 }, (_, i) => `t${i}.example.com`)
  const { sb, start } = await sandbox(t)
  await addTenants(sb, hosts)
  const { agent, act } = await start({ ...QUICK, CARLOS_LAYOUT_AWAKE_GRACE: '300ms' })

  const wrong: string[] = []
  const refusals = new Map<string, number>()
  let grants = 0
  let moving = false
  let grantsWhileMoving = 0
  let stop = false
  let pick = 7
  const worker = async (): Promise<void> => {
    while (!stop) {
      pick = (pick * 1103515245 + 12345) % 2 ** 31
      const host = hosts[pick % hosts.length] ?? 't0.example.com'
      const c = await act.cycle(host, async (g) => {
        const problem = await grantProblem(sb, host, g)
        if (problem !== undefined) wrong.push(problem)
      })
      if (c.status === 200) {
        grants++
        if (moving) grantsWhileMoving++
      } else {
        const kind = c.refusal.reason.split(':')[0] ?? ''
        refusals.set(kind, (refusals.get(kind) ?? 0) + 1)
      }
    }
  }
  const workers = Array.from({ length: 4 }, () => worker())
  try {
    for (const mode of ['nested', 'flat'] as const) {
      moving = true
      await recordIntent(sb, mode)
      await agent.waitConverged(hosts, mode, 30_000, 100)
      moving = false
    }
  } finally {
    stop = true
    await Promise.all(workers)
  }
  assert.deepEqual(wrong, [])
  assert.deepEqual(act.errors, [])
  assert.ok(grantsWhileMoving > 0, `claims were granted while the box converged (${grants} in all)`)
  assert.equal(await agent.metric('carlos_layout_wake_claims_total{result="error"}'), 0)
  assert.equal(await agent.metric('carlos_layout_wake_claims_total{result="granted"}'), grants)
  // Every refusal was for a reason of the contract.
  for (const kind of refusals.keys())
    assert.ok(['fenced'].includes(kind), `refused as ${kind}: ${JSON.stringify([...refusals])}`)
  for (const h of hosts) assert.equal(await fs.readFile(path.join(sb.dataDir, 'apps', h, 'host.txt'), 'utf8'), h)
})

void test(
  'the activator sends its awake set at its start: claims it no longer holds end, and it is told what to stop',
  LIMIT,
  async (t) => {
    const { sb, start } = await sandbox(t)
    await addTenants(sb, ['a.example.com', 'b.example.com'])
    const { agent, act } = await start(QUICK)
    assert.equal((await act.wake('a.example.com')).status, 200)
    assert.equal((await act.wake('b.example.com')).status, 200)

    // The activator restarts: b did not survive it, and it picked up an
    // instance layoutd knows nothing of.
    act.running.delete('b.example.com')
    act.running.set('z.example.com', { host: 'z.example.com', layout: 'flat', dir: '', socket: '', db: '' })
    const set = await act.announce()
    assert.deepEqual(set.awake, ['a.example.com', 'z.example.com'])
    assert.deepEqual(set.stop, [
      { host: 'z.example.com', code: 'unknown_host', reason: 'unknown host: z.example.com is not in the registry' },
    ])

    // b's claim ended: a migrate moves it straight away, and defers a.
    await recordIntent(sb, 'nested')
    const r = await agent.waitFor(
      'b moved, a deferred',
      async () => {
        const s = await agent.status()
        return s.rows['b.example.com']?.layout === 'nested' && s.rows['a.example.com']?.code === 'awake_grace'
          ? s
          : undefined
      },
      15_000,
    )
    assert.equal(r.rows['a.example.com']?.layout, 'flat')
  },
)

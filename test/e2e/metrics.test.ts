// Every metric the agent updates (design §9), through the real agent
// process on a temp box, scraped from GET /metrics over its real socket:
// the rows by layout, the mode it works under, the default, each run of the
// leg (its count, its histogram, whether one is under way) and the hosts a
// run deferred as awake. Each test drives the agent the way an operator and
// the activator do: rows added with the CLI, intents recorded, wakes
// claimed and released, and converge asked for.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import http from 'node:http'
import type net from 'node:net'
import path from 'node:path'
import { test, type TestContext } from 'node:test'
import { request } from 'undici'
import { AgentProcess, makeSandbox, recordIntent, runCli, type Sandbox } from '../helpers/agent-process.js'
import { tmpDir } from '../helpers/tmp.js'
import { until } from '../helpers/until.js'

const HOSTS = ['a.example.com', 'b.example.com']
const AWAKE = 'a.example.com'

/** Quick clocks, and flat when no intent is recorded, unless a test says otherwise. */
const QUICK = { CARLOS_LAYOUT_DEFAULT: 'flat', CARLOS_LAYOUT_POLL: '100ms' }

/** A hang fails the test instead of the run. */
const LIMIT = { timeout: 60_000 }

/**
 * A box holding hosts as sleeping tenants, added with `layoutd routes add`
 * (minted flat: no agent answers the mint yet, and no intent is recorded),
 * and its agent running with env, ready, stopped when the test ends.
 */
async function box(
  t: TestContext,
  env: Record<string, string>,
  hosts: readonly string[] = HOSTS,
): Promise<{ sb: Sandbox; agent: AgentProcess }> {
  const sb = await makeSandbox(await tmpDir(t), 'kass-1')
  for (const host of hosts) {
    const added = await runCli(sb, ['routes', 'add', host, '--hibernate'])
    assert.equal(added.exit.code, 0, added.stderr)
    assert.match(added.stdout, /minted flat/)
  }
  const agent = await AgentProcess.start(sb, { env })
  t.after(() => agent.stop())
  await agent.waitReady()
  return { sb, agent }
}

/** One scrape of GET /metrics; `sample(series)` is the value of one series as written (name and labels), or undefined. */
async function scrape(agent: AgentProcess): Promise<(series: string) => number | undefined> {
  const res = await request(`${agent.url}/metrics`)
  const text = await res.body.text()
  assert.equal(res.statusCode, 200, text)
  const lines = text.split('\n')
  return (series) => {
    const line = lines.find((l) => l.startsWith(`${series} `))
    return line === undefined ? undefined : Number(line.slice(series.length + 1))
  }
}

/** A request to the agent's API; answers the status. */
async function call(agent: AgentProcess, method: 'POST' | 'DELETE', pathname: string): Promise<number> {
  const res = await request(`${agent.url}${pathname}`, { method, headers: agent.authorization() })
  await res.body.dump()
  return res.statusCode
}

/** The activator claims a wake for host: it is awake from now until released. */
async function claimWake(agent: AgentProcess, host: string): Promise<void> {
  assert.equal(await call(agent, 'POST', `/wakes/${host}`), 200, `the claim for ${host} is granted`)
}

/** Waits until the leg is idle (nothing running, nothing pending) and the report satisfies done. */
async function waitIdle(
  agent: AgentProcess,
  what: string,
  done: (r: Awaited<ReturnType<AgentProcess['status']>>) => boolean,
) {
  return until(what, async () => {
    const r = await agent.status()
    return !r.leg.running && !r.leg.pending && done(r) ? r : undefined
  })
}

void test(
  'rows{layout} counts the rows by layout and intent_mode{mode} is 1 for the current mode, through a migrate and a revert',
  LIMIT,
  async (t) => {
    const { sb, agent } = await box(t, QUICK)
    await agent.converge()
    let sample = await scrape(agent)
    assert.equal(sample('carlos_layout_rows{layout="flat"}'), 2)
    assert.equal(sample('carlos_layout_rows{layout="nested"}'), 0)

    await recordIntent(sb, 'nested')
    await agent.waitConverged(HOSTS, 'nested', 20_000)
    sample = await scrape(agent)
    assert.equal(sample('carlos_layout_rows{layout="nested"}'), 2, 'both rows counted nested after the migrate')
    assert.equal(sample('carlos_layout_rows{layout="flat"}'), 0)
    for (const layout of ['fenced', 'conflict', 'foreign', 'external'])
      assert.equal(sample(`carlos_layout_rows{layout="${layout}"}`), 0, layout)
    assert.equal(
      sample('carlos_layout_intent_mode{mode="nested"}'),
      1,
      'the box works under the recorded nested intent',
    )
    for (const mode of ['flat', 'none', 'unreadable', 'unmanaged'])
      assert.equal(sample(`carlos_layout_intent_mode{mode="${mode}"}`), 0, mode)

    await recordIntent(sb, 'flat')
    await agent.waitConverged(HOSTS, 'flat', 20_000)
    sample = await scrape(agent)
    assert.equal(sample('carlos_layout_rows{layout="flat"}'), 2, 'both rows counted flat after the revert')
    assert.equal(sample('carlos_layout_rows{layout="nested"}'), 0)
    assert.equal(sample('carlos_layout_intent_mode{mode="flat"}'), 1)
    assert.equal(sample('carlos_layout_intent_mode{mode="nested"}'), 0, 'only the current mode is 1')
  },
)

void test(
  'default_applied is 1 while the box is nested by default, and 0 once an intent is recorded',
  LIMIT,
  async (t) => {
    // No intent, the default nested (CARLOS_LAYOUT_DEFAULT unset), and the
    // gate open: no mount required, and the sandbox's probe says `ready: true`.
    const { sb, agent } = await box(t, { CARLOS_LAYOUT_POLL: '100ms' }, [])
    await waitIdle(agent, 'the box nested by default', (r) => r.default && r.mode === 'nested')
    let sample = await scrape(agent)
    assert.equal(sample('carlos_layout_default_applied'), 1)
    assert.equal(sample('carlos_layout_intent_mode{mode="nested"}'), 1)

    await recordIntent(sb, 'nested')
    await waitIdle(agent, 'the box nested by its recorded intent', (r) => !r.default && r.mode === 'nested')
    sample = await scrape(agent)
    assert.equal(sample('carlos_layout_default_applied'), 0, 'nested by the recorded intent, not by the default')
    assert.equal(sample('carlos_layout_intent_mode{mode="nested"}'), 1)
  },
)

void test(
  'each run of the leg counts once in leg_runs_total and in the leg_run_seconds histogram',
  LIMIT,
  async (t) => {
    // A run over a box of no rows is a run all the same.
    const { agent } = await box(t, QUICK, [])
    let before = await scrape(agent)
    for (let run = 1; run <= 3; run++) {
      await agent.converge()
      const after = await scrape(agent)
      const runs = after('carlos_layout_leg_runs_total') ?? NaN
      assert.ok(
        runs >= (before('carlos_layout_leg_runs_total') ?? NaN) + 1,
        `run ${run}: leg_runs_total went from ${String(before('carlos_layout_leg_runs_total'))} to ${runs}`,
      )
      const observed = after('carlos_layout_leg_run_seconds_count') ?? NaN
      assert.ok(
        observed >= (before('carlos_layout_leg_run_seconds_count') ?? NaN) + 1,
        `run ${run}: leg_run_seconds_count went to ${observed}`,
      )
      assert.equal(observed, runs, 'one observation of the histogram per run counted')
      assert.equal(after('carlos_layout_leg_run_seconds_bucket{le="+Inf"}'), observed)
      assert.ok((after('carlos_layout_leg_run_seconds_sum') ?? NaN) >= 0)
      before = after
    }
  },
)

void test(
  'deferred_hosts counts the hosts the last run deferred as awake, and drops once the host is released and moved',
  LIMIT,
  async (t) => {
    const { sb, agent } = await box(t, QUICK)
    await agent.converge()
    await claimWake(agent, AWAKE)
    await recordIntent(sb, 'nested')
    await waitIdle(
      agent,
      'the run that deferred the awake host',
      (r) => r.rows['b.example.com']?.layout === 'nested' && r.rows[AWAKE]?.layout === 'flat',
    )
    let sample = await scrape(agent)
    assert.equal(sample('carlos_layout_deferred_hosts'), 1, `${AWAKE} deferred, awake within its grace`)

    assert.equal(await call(agent, 'DELETE', `/wakes/${AWAKE}`), 204)
    await agent.converge()
    await agent.waitConverged(HOSTS, 'nested', 20_000)
    sample = await scrape(agent)
    assert.equal(sample('carlos_layout_deferred_hosts'), 0, 'nothing deferred once the host slept and moved')
  },
)

/**
 * A loopback activator that takes the agent's stop request for a host
 * (POST /instances/:host/stop, see wake-claims.ts) and answers it only when
 * told: what holds a run of the leg open for as long as a test needs.
 */
async function heldActivator(
  t: TestContext,
): Promise<{ url: string; stopAsked: () => string | undefined; answer: () => void }> {
  let asked: string | undefined
  const held: http.ServerResponse[] = []
  const sockets = new Set<net.Socket>()
  const srv = http.createServer((req, res) => {
    req.resume()
    const m = /^\/instances\/([^/]+)\/stop$/.exec(req.url ?? '')
    if (req.method !== 'POST' || m?.[1] === undefined) {
      res.writeHead(404).end()
      return
    }
    asked = decodeURIComponent(m[1])
    held.push(res)
  })
  srv.on('connection', (s) => sockets.add(s))
  const answer = (): void => {
    for (const res of held.splice(0)) res.writeHead(202).end()
  }
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve))
  t.after(() => {
    answer()
    for (const s of sockets) s.destroy()
    return new Promise<void>((resolve) => srv.close(() => resolve()))
  })
  const { port } = srv.address() as net.AddressInfo
  return { url: `http://127.0.0.1:${port}`, stopAsked: () => asked, answer }
}

void test(
  'leg_running is 1 while a run is under way (held at the stop of an awake host) and 0 once it ends',
  LIMIT,
  async (t) => {
    const activator = await heldActivator(t)
    const { sb, agent } = await box(t, { ...QUICK, CARLOS_ACTIVATOR_URL: activator.url }, [AWAKE])
    await agent.converge()
    // A run the start-up kicks (the first read of the intent, the gate's first checks) may follow the one
    // converge waited for: the gauge must come to 0 once none is under way.
    await until(
      'no run under way',
      async () => (await scrape(agent))('carlos_layout_leg_running') === 0 && !(await agent.status()).leg.running,
    )

    // A forced intent stops an awake host at once: the run asks the
    // activator for the stop and waits for the host's release.
    await claimWake(agent, AWAKE)
    await recordIntent(sb, 'nested', { force: true })
    assert.equal(await until('the run to ask the activator for the stop', () => activator.stopAsked()), AWAKE)
    assert.equal((await agent.status()).leg.running, true, 'the run is under way')
    assert.equal((await scrape(agent))('carlos_layout_leg_running'), 1)

    // The activator stops the instance: the release ends the wait, then the stop is answered.
    assert.equal(await call(agent, 'DELETE', `/wakes/${AWAKE}`), 204)
    activator.answer()
    await agent.waitConverged([AWAKE], 'nested', 20_000)
    assert.equal((await scrape(agent))('carlos_layout_leg_running'), 0, 'the run has ended')
  },
)

void test('intent_mode says unmanaged on a box with no activator, where no intent is ever read', LIMIT, async (t) => {
  const { agent } = await box(t, { ...QUICK, CARLOS_ACTIVATOR: 'none' }, [])
  assert.equal((await agent.status()).mode, 'unmanaged')
  const sample = await scrape(agent)
  assert.equal(
    sample('carlos_layout_intent_mode{mode="unmanaged"}'),
    1,
    'no activator is armed: the report is unmanaged, and so is the gauge',
  )
  for (const mode of ['flat', 'nested', 'none', 'unreadable'])
    assert.equal(sample(`carlos_layout_intent_mode{mode="${mode}"}`), 0, mode)
})

void test(
  'build_info names the version and CARLOS_BUILD; gate_check is each gate check; intent_readable and the last clean run follow the intent',
  LIMIT,
  async (t) => {
    const { sb, agent } = await box(t, { ...QUICK, CARLOS_BUILD: 'v0.25.3', CARLOS_PROBE_EVERY: '200ms' })
    const { version } = JSON.parse(await fs.readFile(new URL('../../../package.json', import.meta.url), 'utf8')) as {
      version: string
    }
    let sample = await scrape(agent)
    assert.equal(sample(`carlos_layout_build_info{version="${version}",build="v0.25.3"}`), 1)
    // The sandbox needs no mount and its probe says ready: every check passes once the gate has run them.
    const passing = async () => {
      const s = await scrape(agent)
      return ['selfcheck', 'mounts', 'probe'].every((check) => s(`carlos_layout_gate_check{check="${check}"}`) === 1)
        ? true
        : undefined
    }
    await until('every gate check to pass', passing, 30_000)
    await recordIntent(sb, 'nested')
    await waitIdle(agent, 'the nested run', (r) => r.mode === 'nested')
    sample = await scrape(agent)
    assert.equal(sample('carlos_layout_intent_readable'), 1)
    const clean = sample('carlos_layout_leg_last_success_timestamp_seconds') ?? 0
    assert.ok(clean > Date.now() / 1000 - 60 && clean <= Date.now() / 1000 + 1, `a clean run just now: ${clean}`)
    // A record that is not an intent: the box fails closed, and the gauges say so.
    await fs.writeFile(
      path.join(sb.deployDir, 'layout', 'intents', '99999999T999999.999Z-zzzzzz.json'),
      '{"not": "an intent"}',
    )
    await waitIdle(agent, 'the unreadable intent', (r) => r.mode === 'unreadable')
    sample = await scrape(agent)
    assert.equal(sample('carlos_layout_intent_readable'), 0)
    assert.equal(
      sample('carlos_layout_leg_last_success_timestamp_seconds'),
      clean,
      'a run that could not read the intent is not a clean run',
    )
    // The probe stops saying ready: its check drops at the next read of the verdict.
    await fs.writeFile(sb.probeFile, 'ready: false\n')
    await fs.rm(path.join(sb.deployDir, 'layout', 'intents', '99999999T999999.999Z-zzzzzz.json'))
    await until(
      'the probe check to fail',
      async () => ((await scrape(agent))('carlos_layout_gate_check{check="probe"}') === 0 ? true : undefined),
      30_000,
    )
  },
)

// contrib/layoutd.rules.yml in a real Prometheus (the `prometheus` binary,
// Debian's 2.42) scraping a real agent every second and evaluating every
// second, under a job that is not called layoutd: the agent is driven into
// each of the 8 alerts and out again, and the state is read from
// Prometheus's own API (/api/v1/alerts).
//
// The shipped file is rendered with every `for:` scaled down to 1s, and
// the time in every expression scaled by one factor, an hour to HOUR_S
// seconds (`[6h]` and `6 * 3600` to 24s, `[30m]` and `offset 30m` to 2s,
// `[1d]` to 96s): the expressions are otherwise the shipped ones (their
// metrics, operators and thresholds), and the alerts that look back hours
// (LayoutdNoCleanRun, LayoutdHostsFailing) fire and go in seconds, on the
// agent's own clocks (its last clean run, process_start_time_seconds).
//
// The first test drives the box: LayoutdGateCheckFailing (and that it
// stays quiet on a flat box), LayoutdRowsNeedAnOperator,
// LayoutdIntentUnreadable and LayoutdDown. The second drives its tenants'
// moves: LayoutdHostsHeld (a file with a second name), LayoutdLegStuck (an
// awake tenant the activator does not stop), LayoutdHostsFailing and
// LayoutdNoCleanRun (a tenant whose files are missing); each goes once its
// cause is cleared as the runbook says. contrib/layoutd.rules.test.yml
// holds the same rules at their full durations, with promtool.
import assert from 'node:assert/strict'
import type { ChildProcess } from 'node:child_process'
import fs from 'node:fs/promises'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import { test, type TestContext } from 'node:test'
import { fileURLToPath } from 'node:url'
import { request } from 'undici'
import { AgentProcess, freePort, makeSandbox, recordIntent, runCli, type Sandbox } from '../helpers/agent-process.js'
import { spawnFor } from '../helpers/child.js'

const ROOT = fileURLToPath(new URL('../../../', import.meta.url))
const PROMETHEUS = process.env.PROMETHEUS_BIN ?? 'prometheus'
/** The instance label every target of the test carries, whichever port the agent listens on. */
const INSTANCE = 'box-1'

interface Alert {
  labels: Record<string, string>
  state: 'pending' | 'firing'
}

class Prometheus {
  constructor(
    readonly url: string,
    readonly child: ChildProcess,
    readonly targets: string,
  ) {}

  /** Points the scrape at the agent's address now (file service discovery, watched by Prometheus). */
  async target(address: string): Promise<void> {
    const tmp = `${this.targets}.tmp`
    await fs.writeFile(tmp, JSON.stringify([{ targets: [address], labels: { instance: INSTANCE } }]))
    await fs.rename(tmp, this.targets)
  }

  async alerts(): Promise<Alert[]> {
    const res = await request(`${this.url}/api/v1/alerts`)
    const body = (await res.body.json()) as { data: { alerts: Alert[] } }
    return body.data.alerts
  }

  /** Waits until name is firing (with labels), or no longer there at all; answers how long it took. */
  async until(name: string, want: 'firing' | 'gone', labels: Record<string, string> = {}, ms = 30_000) {
    const start = performance.now()
    for (;;) {
      const found = (await this.alerts()).filter(
        (a) => a.labels.alertname === name && Object.entries(labels).every(([k, v]) => a.labels[k] === v),
      )
      if (want === 'firing' ? found.some((a) => a.state === 'firing') : found.length === 0)
        return performance.now() - start
      if (performance.now() - start > ms)
        assert.fail(`${name} did not become ${want} within ${ms} ms: ${JSON.stringify(await this.alerts())}`)
      await delay(250)
    }
  }
}

/**
 * Seconds of the test for an hour of the rules' time. Every duration an
 * expression looks back over (`[1d]`, `[6h]`, `[30m]`, `offset 30m`) and
 * every hour it counts in seconds (`6 * 3600`) is scaled by this one
 * factor: the shortest look-back, 30m, becomes 2s, still two scrapes of
 * the test's 1s, so increase() has its two samples; NoCleanRun's 6 hours
 * become 24s.
 */
const HOUR_S = 4
const UNIT_S = { s: 1, m: 60, h: 3600, d: 86_400 } as const

/** A duration of the rules in the test's time, in milliseconds (`30m` is `2000ms`). */
function scaled(n: string, unit: keyof typeof UNIT_S): string {
  return `${Math.round((Number(n) * UNIT_S[unit] * HOUR_S * 1000) / 3600)}ms`
}

/**
 * The shipped rules with every `for:` made 1s and the time in every
 * expression scaled by HOUR_S; nothing else changes (the metrics, the
 * operators, the thresholds that are not time).
 */
async function renderRules(to: string): Promise<void> {
  const shipped = await fs.readFile(path.join(ROOT, 'contrib/layoutd.rules.yml'), 'utf8')
  const rendered = shipped
    .replace(/^(\s+for:) \S+$/gm, '$1 1s')
    .replace(/(\[|offset )([0-9]+)([smhd])\b/g, (_, before: string, n: string, unit: keyof typeof UNIT_S) => {
      return before + scaled(n, unit)
    })
    .replace(/\b3600\b/g, String(HOUR_S))
  assert.notEqual(rendered, shipped, 'the shipped rules have durations to scale')
  // A look-back left at its shipped length would wait hours here, silently.
  assert.doesNotMatch(rendered, /(\[|offset )[0-9]+[mhdwy]\b/, 'every look-back of the rules is scaled')
  assert.doesNotMatch(rendered, /\b(3600|86400)\b/, 'every hour the rules count in seconds is scaled')
  await fs.writeFile(to, rendered)
}

/** Where a test registers what it stops or removes at its end. */
interface Ends {
  after(fn: () => Promise<unknown>): void
}

/**
 * A test's ends, run last first. t.after runs its hooks first in, first
 * out, and the sandbox must go after the processes writing into it
 * (Prometheus's TSDB, the agent's data dir and deploy store) have stopped:
 * removed before, it was made again in part and left in the temp dir.
 * Every end runs; the first failure fails the test.
 */
function lastFirst(t: TestContext): Ends {
  const fns: Array<() => Promise<unknown>> = []
  t.after(async () => {
    const failures: unknown[] = []
    for (const fn of fns.reverse()) await fn().catch((err: unknown) => failures.push(err))
    if (failures.length > 0) throw failures[0]
  })
  return { after: (fn) => void fns.push(fn) }
}

async function startPrometheus(ends: Ends, dir: string): Promise<Prometheus> {
  await fs.mkdir(dir, { recursive: true })
  const rules = path.join(dir, 'rules.yml')
  await renderRules(rules)
  const targets = path.join(dir, 'targets.json')
  await fs.writeFile(targets, '[]')
  const config = path.join(dir, 'prometheus.yml')
  await fs.writeFile(
    config,
    [
      'global: { scrape_interval: 1s, evaluation_interval: 1s, scrape_timeout: 900ms }',
      `rule_files: [${JSON.stringify(rules)}]`,
      'scrape_configs:',
      // The job LayoutdDown names (contrib/layoutd.rules.yml): a target down since its first scrape is still known.
      '  - job_name: layoutd',
      `    file_sd_configs: [{ files: [${JSON.stringify(targets)}], refresh_interval: 1s }]`,
      '',
    ].join('\n'),
  )
  const port = await freePort()
  // Killed (its group) at the end, before the sandbox it writes into goes.
  const child = spawnFor(
    ends,
    PROMETHEUS,
    [
      `--config.file=${config}`,
      `--storage.tsdb.path=${path.join(dir, 'tsdb')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  )
  let stderr = ''
  child.stderr?.setEncoding('utf8').on('data', (s: string) => (stderr = (stderr + s).slice(-4000)))
  const prom = new Prometheus(`http://127.0.0.1:${port}`, child, targets)
  for (let i = 0; ; i++) {
    const up = await request(`${prom.url}/-/ready`).then(
      async (r) => (await r.body.text(), r.statusCode === 200),
      () => false,
    )
    if (up) return prom
    if (i > 100 || child.exitCode !== null) assert.fail(`prometheus did not start: ${stderr}`)
    await delay(200)
  }
}

async function sandbox(ends: Ends): Promise<Sandbox> {
  const root = await fs.mkdtemp(path.join(os.tmpdir(), 'layoutd-prom-'))
  ends.after(() => fs.rm(root, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 }))
  return makeSandbox(root)
}

async function cli(sb: Sandbox, ...args: string[]): Promise<void> {
  const r = await runCli(sb, args)
  assert.equal(r.exit.code, 0, `layoutd ${args.join(' ')}: ${r.stderr}`)
}

void test('a shut gate, a foreign row, an unreadable intent and a stopped agent: each alert fires and goes', async (t) => {
  const ends = lastFirst(t)
  const sb = await sandbox(ends)
  const prom = await startPrometheus(ends, path.join(sb.root, 'prom'))
  // The probe is read often, so the gate follows the file within a scrape or two.
  const env = { CARLOS_PROBE_EVERY: '200ms', CARLOS_LAYOUT_RETRY: '1s' }
  await fs.writeFile(sb.probeFile, 'ready: false\n')
  await recordIntent(sb, 'flat')
  let agent = await AgentProcess.start(sb, { env })
  ends.after(() => agent.stop())
  await agent.waitReady(20_000)
  await prom.target(new URL(agent.url).host)

  // A flat box whose gate is shut: nothing, for several evaluations past the (scaled) for.
  await delay(5_000)
  assert.deepEqual(
    (await prom.alerts()).map((a) => a.labels.alertname),
    [],
    'a flat box with its gate shut raises nothing',
  )

  // The box wants nested and its gate is shut: LayoutdGateCheckFailing; the probe passes: gone.
  await recordIntent(sb, 'nested')
  await prom.until('LayoutdGateCheckFailing', 'firing', { check: 'probe', instance: INSTANCE })
  await fs.writeFile(sb.probeFile, 'ready: true\n')
  await prom.until('LayoutdGateCheckFailing', 'gone')

  // A foreign row added by the CLI shows at the next scrape (no run of the leg needed): fires; removed: gone.
  await cli(sb, 'routes', 'add', 'f.example.com', '--hibernate', '--dir', '/srv/f', '--socket', '/run/f.sock')
  await prom.until('LayoutdRowsNeedAnOperator', 'firing', { layout: 'foreign' })
  await cli(sb, 'routes', 'rm', 'f.example.com')
  await prom.until('LayoutdRowsNeedAnOperator', 'gone')

  // A record that is not an intent: the box fails closed, LayoutdIntentUnreadable; removed: gone.
  const bad = path.join(sb.deployDir, 'layout', 'intents', '20991231T000000.000Z-ffffff.json')
  await fs.writeFile(bad, '{ not json')
  await prom.until('LayoutdIntentUnreadable', 'firing')
  await fs.rm(bad)
  await prom.until('LayoutdIntentUnreadable', 'gone')

  // The agent stops: LayoutdDown; back on a new port (same instance): gone.
  await agent.stop()
  await prom.until('LayoutdDown', 'firing', { instance: INSTANCE, job: 'layoutd' })
  agent = await AgentProcess.start(sb, { env })
  await agent.waitReady(20_000)
  await prom.target(new URL(agent.url).host)
  await prom.until('LayoutdDown', 'gone')
})

/**
 * An activator that takes every stop request and carries none out: the
 * instance stops when the test releases its claim, as the activator does
 * once an instance has stopped. `stops` names every host it was asked to stop.
 */
async function lingeringActivator(ends: Ends): Promise<{ url: string; stops: string[] }> {
  const stops: string[] = []
  const server = http.createServer((req, res) => {
    const m = /^\/instances\/([^/]+)\/stop$/.exec(req.url ?? '')
    if (req.method === 'POST' && m?.[1] !== undefined) stops.push(decodeURIComponent(m[1]))
    req.resume()
    res.writeHead(m === null ? 404 : 202).end()
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  ends.after(async () => {
    const closed = new Promise<void>((resolve) => server.close(() => resolve()))
    server.closeAllConnections()
    await closed
  })
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, stops }
}

/** A wake claim (POST) or its release (DELETE), as the activator sends them; answers the status. */
async function wake(agent: AgentProcess, method: 'POST' | 'DELETE', host: string): Promise<number> {
  const res = await request(`${agent.url}/wakes/${host}`, { method, headers: agent.authorization() })
  await res.body.dump()
  return res.statusCode
}

const HELD = 'held.example.com'
const AWAKE = 'awake.example.com'
const MISSING = 'missing.example.com'

void test('tenants held, awake and missing: each alert fires, and goes once its cause is cleared', async (t) => {
  const ends = lastFirst(t)
  const sb = await sandbox(ends)
  const prom = await startPrometheus(ends, path.join(sb.root, 'prom'))
  const activator = await lingeringActivator(ends)
  await recordIntent(sb, 'flat')
  for (const host of [HELD, AWAKE, MISSING]) await cli(sb, 'routes', 'add', host, '--hibernate')
  const flatDir = (host: string) => path.join(sb.dataDir, 'apps', host)
  // A run that could not finish is retried after 50ms, backing off to
  // 500ms at most: a move that keeps failing fails within every scrape, so
  // HostsFailing's (scaled) 30 minutes always hold a failure while it
  // does. (Under the shipped 10m, backing off to 100 minutes, they do not:
  // there the alert goes and comes back while a host keeps failing.)
  const agent = await AgentProcess.start(sb, {
    env: { CARLOS_ACTIVATOR_URL: activator.url, CARLOS_LAYOUT_RETRY: '50ms' },
  })
  ends.after(() => agent.stop())
  await agent.waitReady(20_000)
  await agent.waitNestedAllowed(20_000)
  await prom.target(new URL(agent.url).host)

  // A file of HELD's has a second name outside its tree: on its way to
  // nested, preflight holds it (stopped and fenced), LayoutdHostsHeld.
  // The other name removed and a run asked for (runbook, "Clear a hold"):
  // it moves, and the alert goes.
  const secondName = path.join(sb.root, 'second-name')
  await fs.writeFile(path.join(flatDir(HELD), 'index.html'), 'held\n')
  await fs.link(path.join(flatDir(HELD), 'index.html'), secondName)
  await recordIntent(sb, 'nested')
  await prom.until('LayoutdHostsHeld', 'firing', { instance: INSTANCE })
  // The leg tries a held host again at each retry, so the report may show it mid-move for a moment.
  await agent.waitFor(
    `${HELD} held for its second name`,
    async () => ((await agent.status()).rows[HELD]?.code === 'second_name' ? true : undefined),
    5_000,
  )
  await fs.rm(secondName)
  await agent.converge()
  await prom.until('LayoutdHostsHeld', 'gone')
  await agent.waitConverged([HELD, AWAKE, MISSING], 'nested', 20_000)
  // The held host's retries kept a run going for longer than LegStuck's
  // (scaled) 1s: that firing must have gone before the next one is taken
  // for the stuck stop below, or it would be found firing at once.
  await prom.until('LayoutdLegStuck', 'gone', { instance: INSTANCE })

  // AWAKE is claimed (awake) and a forced revert stops it at once; the
  // activator takes the stop and the instance keeps running, so the run
  // waits on its claim: LayoutdLegStuck. The instance stops (its claim is
  // released): it moves, the run ends, and the alert goes.
  assert.equal(await wake(agent, 'POST', AWAKE), 200, `the claim for ${AWAKE} is granted`)
  await recordIntent(sb, 'flat', { force: true })
  // The stop first: on a loaded machine the sleepers' batch before it can
  // itself last LegStuck's (scaled) 1s.
  await agent.waitFor(
    `the activator asked to stop ${AWAKE}`,
    () => Promise.resolve(activator.stops.includes(AWAKE) ? true : undefined),
    20_000,
  )
  await prom.until('LayoutdLegStuck', 'firing', { instance: INSTANCE })
  assert.deepEqual(activator.stops, [AWAKE], 'the run waits on the activator stopping the awake tenant')
  assert.equal(await wake(agent, 'DELETE', AWAKE), 204)
  await prom.until('LayoutdLegStuck', 'gone')
  const reverted = await agent.waitConverged([HELD, AWAKE, MISSING], 'flat', 20_000)
  const revert = reverted.leg.lastRun
  assert.ok(revert?.finishedAt && !revert.results.some((r) => r.outcome === 'failed'), 'the revert is a clean run')
  const lastClean = Date.parse(revert.finishedAt)

  // MISSING's files are moved away by hand: its move toward nested fails
  // (`files missing`) at every run, LayoutdHostsFailing, and stands while
  // they are away. No run is clean from now: once the revert is 6 (scaled)
  // hours old, LayoutdNoCleanRun. The files put back and a run asked for
  // (runbook, "failed"): it is clean, NoCleanRun goes, and HostsFailing
  // once its (scaled) 30 minutes hold no failure.
  const misplaced = path.join(sb.root, 'misplaced')
  await fs.rename(flatDir(MISSING), misplaced)
  await recordIntent(sb, 'nested')
  await prom.until('LayoutdHostsFailing', 'firing', { instance: INSTANCE, to: 'nested' })
  await prom.until('LayoutdNoCleanRun', 'firing', { instance: INSTANCE }, 60_000)
  assert.ok(
    Date.now() - lastClean > 6 * HOUR_S * 1000,
    `LayoutdNoCleanRun fired ${Date.now() - lastClean} ms after the last clean run, not after 6 scaled hours`,
  )
  await fs.rename(misplaced, flatDir(MISSING))
  await agent.converge()
  await prom.until('LayoutdNoCleanRun', 'gone')
  await prom.until('LayoutdHostsFailing', 'gone')
  await agent.waitConverged([HELD, AWAKE, MISSING], 'nested', 20_000)
})

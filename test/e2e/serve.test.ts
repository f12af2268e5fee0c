// The operator's first session, against the real agent process on a real
// socket: routes added and intents recorded with the CLI, the report read
// with the CLI and over HTTP, the box converging without a restart.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import net, { type AddressInfo } from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { test, type TestContext } from 'node:test'
import { request } from 'undici'
import type { LayoutReport } from '../../src/domain/schemas.js'
import { SYNC_CONCURRENCY } from '../../src/infra/fsutil.js'
import {
  AgentExited,
  AgentProcess,
  MAIN_JS,
  makeSandbox,
  runCli,
  sandboxEnv,
  type Sandbox,
  type StartOptions,
} from '../helpers/agent-process.js'
import { ended, spawnFor } from '../helpers/child.js'

/**
 * A sandbox whose directory is removed only after every agent started in it
 * has stopped: t.after hooks run in the order they were added, so one hook
 * does both, in that order.
 */
async function sandbox(
  t: TestContext,
  box?: string,
): Promise<{ sb: Sandbox; start: (opts?: StartOptions) => Promise<AgentProcess> }> {
  const root = await fs.mkdtemp(path.join(os.tmpdir(), 'layoutd-e2e-'))
  const agents: AgentProcess[] = []
  t.after(async () => {
    await Promise.all(agents.map((a) => a.stop()))
    await fs.rm(root, { recursive: true, force: true })
  })
  const sb = await makeSandbox(root, box)
  return {
    sb,
    start: async (opts) => {
      const a = await AgentProcess.start(sb, opts)
      agents.push(a)
      return a
    },
  }
}

async function cli(sb: Sandbox, ...args: string[]): Promise<string> {
  const r = await runCli(sb, args)
  assert.equal(r.exit.code, 0, `layoutd ${args.join(' ')}: ${r.stderr}`)
  return r.stdout
}

async function statusJson(sb: Sandbox, agent: AgentProcess): Promise<LayoutReport> {
  return JSON.parse(await cli(sb, 'status', '--json', '--url', agent.url)) as LayoutReport
}

void test('routes add, intent migrate --box, status: the rows and the mode change without a restart', async (t) => {
  const { sb, start } = await sandbox(t, 'kass-1')
  // The CLI asks this agent's mint (D/agent.json names it): with the default
  // flat the rows start flat, and only the recorded intent moves them.
  const agent = await start({ env: { CARLOS_LAYOUT_DEFAULT: 'flat' } })
  await agent.waitReady()

  const live = await request(`${agent.url}/livez`)
  assert.equal(live.statusCode, 200)
  await live.body.dump()

  for (const h of ['a.example.com', 'b.example.com'])
    assert.match(await cli(sb, 'routes', 'add', h, '--hibernate'), /minted flat/)
  await fs.writeFile(path.join(sb.dataDir, 'apps', 'a.example.com', 'tenant.db'), 'rows')
  const before = await statusJson(sb, agent)
  assert.equal(before.rows['a.example.com']?.layout, 'flat')

  assert.match(await cli(sb, 'intent', 'migrate', '--box', 'kass-1'), /nested for box kass-1/)
  const nested = await agent.waitFor(
    'the box to converge nested',
    async () => {
      const r = await statusJson(sb, agent)
      return r.mode === 'nested' && Object.values(r.rows).every((row) => row.layout === 'nested') ? r : undefined
    },
    30_000,
  )
  assert.deepEqual(Object.keys(nested.rows).sort(), ['a.example.com', 'b.example.com'])
  assert.equal(await fs.readFile(path.join(sb.dataDir, 'nested', 'a.example.com', 'data', 'tenant.db'), 'utf8'), 'rows')

  // The table, and HTTP agreeing with it.
  const table = await cli(sb, 'status', '--url', agent.url)
  assert.match(table, /^HOST\s+LAYOUT\s+REASON\s+NOTE$/m)
  assert.match(table, /^a\.example\.com\s+nested$/m)
  const http = await request(`${agent.url}/layout/status`)
  assert.equal(((await http.body.json()) as LayoutReport).rows['b.example.com']?.layout, 'nested')

  // routes list agrees with where the files are.
  const rows = JSON.parse(await cli(sb, 'routes', 'list', '--json')) as Array<{ host: string; dir: string }>
  assert.equal(
    rows.find((r) => r.host === 'a.example.com')?.dir,
    path.join(sb.dataDir, 'nested', 'a.example.com', 'data'),
  )

  // And back, fleet-wide.
  await cli(sb, 'intent', 'revert', '--fleet')
  await agent.waitFor(
    'the box to converge flat',
    async () => {
      const r = await statusJson(sb, agent)
      return r.mode === 'flat' && Object.values(r.rows).every((row) => row.layout === 'flat') ? r : undefined
    },
    30_000,
  )
  assert.equal(await fs.readFile(path.join(sb.dataDir, 'apps', 'a.example.com', 'tenant.db'), 'utf8'), 'rows')

  // SIGTERM: a clean exit, the registry closed (SQLite folds its WAL back
  // in and removes it when the last connection closes).
  const exit = await agent.stop()
  assert.deepEqual(exit, { code: 0, signal: null })
  await assert.rejects(fs.stat(path.join(sb.dataDir, 'registry.db-wal')), { code: 'ENOENT' })
})

void test('routes add mints in the shape the running agent answers, gate and all', async (t) => {
  const { sb, start } = await sandbox(t, 'kass-1')
  const agent = await start()
  await agent.waitReady()
  // No intent recorded, the default nested, the gate open once the probe is read.
  await agent.waitFor(
    'the gate to open',
    async () => ((await agent.status()).defaultBlocked === '' ? true : undefined),
    20_000,
  )
  const listen = new URL(agent.url).host
  const child = spawnFor(t, process.execPath, [MAIN_JS, 'routes', 'add', 'n.example.com', '--hibernate'], {
    env: sandboxEnv(sb, { CARLOS_AGENT_LISTEN: listen }),
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()))
  const { code } = await ended(child, 'layoutd routes add')
  assert.equal(code, 0)
  assert.match(out, /minted nested/)
  const st = await fs.stat(path.join(sb.dataDir, 'nested', 'n.example.com', 'run'))
  assert.equal(st.mode & 0o7777, 0o2770)
})

void test('a bad value stops the agent at boot, naming the variable and the value', async (t) => {
  const { sb, start } = await sandbox(t)
  const r = await runCli(sb, ['serve', '--bogus'])
  assert.equal(r.exit.code, 2, 'serve takes no arguments: usage')
  const bad = await start({ env: { CARLOS_LAYOUT_POLL: 'soon' } }).then(
    () => assert.fail('the agent started with CARLOS_LAYOUT_POLL=soon'),
    (err: Error) => err,
  )
  assert.match(bad.message, /layoutd: CARLOS_LAYOUT_POLL=soon: a duration like 500ms, 5s, 10m, 1h/)
})

void test('an agent started with a small thread pool says its fsyncs will run that few at a time, and what to set', async (t) => {
  const { start } = await sandbox(t)
  const small = await start({ env: { UV_THREADPOOL_SIZE: '4' } })
  await small.waitReady(20_000)
  assert.match(
    small.tail(),
    new RegExp(
      `thread pool has 4 threads, so a converge runs its fsyncs 4 at a time.*UV_THREADPOOL_SIZE=${SYNC_CONCURRENCY}`,
    ),
  )
  await small.stop()
  const wide = await start()
  await wide.waitReady(20_000)
  assert.doesNotMatch(wide.tail(), /thread pool has/, 'no word when the pool is as large as the fsyncs it runs')
})

void test('without a token the agent refuses to listen beyond loopback', async (t) => {
  const { start } = await sandbox(t)
  const err = await start({ env: { CARLOS_AGENT_LISTEN: '0.0.0.0:9' } }).then(
    () => assert.fail('the agent listened on 0.0.0.0 without a token'),
    (e: Error) => e,
  )
  assert.match(err.message, /beyond loopback; set CARLOS_AGENT_TOKEN/)
})

void test('one agent per data root: a second refuses naming the holder; kill -9 leaves no stale lock; a clean stop releases it', async (t) => {
  const { sb, start } = await sandbox(t)
  const first = await start()
  await first.waitReady()
  const firstAddress = new URL(first.url).host

  // Another port, another box label by mistake: the same data root all the same.
  const refused = await start({ env: { CARLOS_BOX: 'other-box' } }).then(
    () => assert.fail('a second agent started on the same data root'),
    (err: unknown) => err,
  )
  assert.ok(refused instanceof AgentExited, String(refused))
  assert.equal(refused.exit.code, 1)
  assert.match(
    refused.message,
    new RegExp(
      `layoutd: .*${sb.dataDir}.* is in use by another layoutd serve \\(pid ${first.pid}, listening on ${firstAddress.replace(/\./g, '\\.')}\\)`,
    ),
  )
  assert.doesNotMatch(refused.message, /Server listening at/, 'the second agent never listened')
  assert.ok(await first.ready(), 'the first agent goes on')

  // The CLI's writers keep working beside the running agent.
  await cli(sb, 'routes', 'add', 'a.example.com', '--dir', path.join(sb.root, 'srv', 'a'))
  await cli(sb, 'intent', 'revert', '--fleet')

  // kill -9: the kernel drops the lock with the process.
  await first.kill()
  const second = await start()
  await second.waitReady()
  assert.equal((await statusJson(sb, second)).mode, 'flat')

  // A clean stop releases it too, and says who holds nothing any more.
  assert.deepEqual(await second.stop(), { code: 0, signal: null })
  const third = await start()
  await third.waitReady()
})

void test('a port in use: the refusal names the address and the process that holds it, with no stack, and the data root is free after', async (t) => {
  const { sb, start } = await sandbox(t)
  const holder = net.createServer()
  await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve))
  t.after(() => new Promise<void>((resolve) => holder.close(() => resolve())))
  const port = (holder.address() as AddressInfo).port
  const child = spawnFor(t, process.execPath, [MAIN_JS, 'serve'], {
    env: sandboxEnv(sb, { CARLOS_AGENT_LISTEN: `127.0.0.1:${port}` }),
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stderr = ''
  child.stderr?.setEncoding('utf8').on('data', (s: string) => (stderr += s))
  child.stdout?.resume()
  const { code } = await ended(child, 'layoutd serve on a port in use')
  assert.equal(code, 1, stderr)
  const line = stderr.split('\n').find((l) => l.startsWith('layoutd: ')) ?? ''
  assert.match(
    line,
    new RegExp(
      `^layoutd: cannot listen on 127\\.0\\.0\\.1:${port}: it is already in use by pid ${process.pid}: \\S*node\\b.*; stop that process, or set CARLOS_AGENT_LISTEN to a free address$`,
    ),
  )
  assert.doesNotMatch(stderr, /^\s+at /m, 'no stack')
  // The data root's lock went with the failed start: an agent on a free port starts.
  await (await start()).waitReady()
})

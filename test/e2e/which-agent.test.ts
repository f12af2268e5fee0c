// Which agent the CLI asks (design §8 "Which agent"), against real agents
// and a decoy on real sockets: the address D/agent.json names wins over the
// address the CLI would fall back to, and an agent of another data root on
// that address is refused by every command that would ask it, changing
// nothing. No test here dials the default port: the decoy and the agents
// listen on ports of their own.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import path from 'node:path'
import { test, type TestContext } from 'node:test'
import { AGENT_HOLDER_FILE } from '../../src/infra/agent-holder.js'
import { AgentProcess, makeSandbox, runCli, type Sandbox } from '../helpers/agent-process.js'
import { tmpDir } from '../helpers/tmp.js'

/** A hang fails the test instead of the run. */
const LIMIT = { timeout: 60_000 }

/** A pid above Linux's largest (2^22): no process has it, so an agent.json naming it names a dead agent. */
const DEAD_PID = 2 ** 22 + 1

/**
 * An HTTP server that answers every request 200 with JSON, as an agent of
 * another data root would (`GET /agent`, a report, a mint); it counts what
 * it was asked. Closed when the test ends.
 */
async function decoy(t: TestContext): Promise<{ listen: string; asked: string[] }> {
  const asked: string[] = []
  const server = http.createServer((req, res) => {
    asked.push(`${req.method} ${req.url}`)
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end(JSON.stringify({ dataDir: '/decoy/data', pid: 1, startId: 'decoy', mode: 'flat', box: 'decoy' }))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())))
  return { listen: `127.0.0.1:${(server.address() as AddressInfo).port}`, asked }
}

async function started(t: TestContext, sb: Sandbox): Promise<AgentProcess> {
  const agent = await AgentProcess.start(sb)
  t.after(() => agent.stop())
  await agent.waitReady()
  return agent
}

void test(
  'the CLI asks the agent D/agent.json names, not whatever answers on CARLOS_AGENT_LISTEN',
  LIMIT,
  async (t) => {
    const fake = await decoy(t)
    // The commands fall back to the decoy's address; the agent listens on another.
    const sb = { ...(await makeSandbox(await tmpDir(t, 'layoutd-which-'), 'kass-1')), listen: fake.listen }
    const agent = await started(t, sb)
    assert.notEqual(new URL(agent.url).host, fake.listen)
    await agent.waitNestedAllowed()

    const status = await runCli(sb, ['status', '--json'])
    assert.equal(status.exit.code, 0, status.stderr)
    // The real agent's report: no intent, so the nested default stands in (the decoy says box `decoy`).
    const report = JSON.parse(status.stdout) as { box: string; mode: string; default: boolean }
    assert.deepEqual([report.box, report.mode, report.default], ['kass-1', 'nested', true])

    // The mint is the real agent's: no intent, the nested default, the gate open.
    const added = await runCli(sb, ['routes', 'add', 'x.example.com', '--hibernate'])
    assert.equal(added.exit.code, 0, added.stderr)
    assert.match(added.stdout, /minted nested/)

    const kicked = await runCli(sb, ['converge'])
    assert.equal(kicked.exit.code, 0, kicked.stderr)
    assert.deepEqual(fake.asked, [], 'the decoy was never asked')
  },
)

void test(
  'an agent of another data root on the fallback address: status and routes add refuse naming both roots, and change nothing',
  LIMIT,
  async (t) => {
    const other = await makeSandbox(await tmpDir(t, 'layoutd-other-'), 'kass-2')
    const otherAgent = await started(t, other)
    const sb = {
      ...(await makeSandbox(await tmpDir(t, 'layoutd-which-'), 'kass-1')),
      listen: new URL(otherAgent.url).host,
    }
    // This data root's agent was killed: its file names a process that is gone.
    const stale = { pid: DEAD_PID, listen: '127.0.0.1:1', startedAt: '', dataDir: sb.dataDir, startId: 'gone' }
    await fs.writeFile(path.join(sb.dataDir, AGENT_HOLDER_FILE), JSON.stringify(stale))
    const theirs = await fs.realpath(other.dataDir)
    const refusal = `the agent at ${otherAgent.url} (CARLOS_AGENT_LISTEN or its default) serves ${theirs}, not this data root ${sb.dataDir}: nothing was asked of it;`

    const added = await runCli(sb, ['routes', 'add', 'x.example.com', '--hibernate'])
    assert.equal(added.exit.code, 1, added.stdout)
    assert.ok(added.stderr.includes(refusal), added.stderr)
    const status = await runCli(sb, ['status'])
    assert.equal(status.exit.code, 1, status.stdout)
    assert.ok(status.stderr.includes(refusal), status.stderr)
    assert.equal(status.stdout, '')

    const rows = await runCli(sb, ['routes', 'list', '--json'])
    assert.equal(rows.exit.code, 0, rows.stderr)
    assert.deepEqual(JSON.parse(rows.stdout), [], 'no row was added')
    for (const dir of ['apps', 'nested'])
      await assert.rejects(fs.stat(path.join(sb.dataDir, dir, 'x.example.com')), { code: 'ENOENT' })
    assert.deepEqual((await otherAgent.status()).rows, {}, "the other box's agent holds no new row either")
  },
)

// The CLI's HTTP client of the agent: where it finds the agent, the token it
// sends, an agent's refusal carried as the same coded error, and an agent
// that is not there or does not answer JSON.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import path from 'node:path'
import { test } from 'node:test'
import { AgentClient, agentUrl, findAgent } from '../../src/cli/agent-client.js'
import { loadConfig } from '../../src/config.js'
import { AgentUnreachable, AppError, errors, exitStatusOf } from '../../src/errors.js'
import { AGENT_HOLDER_FILE } from '../../src/infra/agent-holder.js'
import { AGENT_TOKEN_FILE, clientToken } from '../../src/infra/agent-token.js'
import { TEST_TOKEN } from '../helpers/authorised.js'
import { listen, sampleReport } from '../helpers/fake-agent.js'
import { tmpDir } from '../helpers/tmp.js'

void test('agentUrl: --url without trailing slashes, else the listen address, IPv6 bracketed', () => {
  const config = loadConfig({ CARLOS_AGENT_LISTEN: '[::1]:9741' })
  assert.equal(agentUrl(config, 'http://agent:1234//'), 'http://agent:1234')
  assert.equal(agentUrl(config, undefined), 'http://[::1]:9741')
  assert.equal(agentUrl(loadConfig({}), undefined), 'http://127.0.0.1:9740')
})

void test('status, kick, waitRun and mint read what the agent answers', async (t) => {
  const { agent, url } = await listen(t)
  const client = new AgentClient(url, TEST_TOKEN)
  assert.deepEqual(await client.status(), sampleReport())
  assert.deepEqual(await client.leg(), sampleReport().leg)
  assert.equal((await client.kick()).running, true)
  agent.mintValue = 'flat'
  assert.equal(await client.mint(1_000), 'flat')
  const waited = client.waitRun()
  ;(await agent.nextConverge()).finish(sampleReport().leg.lastRun)
  assert.deepEqual(await waited, { run: sampleReport().leg.lastRun, underWay: null })
})

void test('the token goes as a bearer; a mutation without the right one is the agent refusing, as a coded error', async (t) => {
  const { agent, url } = await listen(t, { token: 's3cret' })
  assert.equal((await new AgentClient(url, 's3cret').kick()).running, true)
  assert.equal(agent.kicks, 1)
  await assert.rejects(new AgentClient(url, 'wrong').kick(), (err: unknown) => {
    assert.ok(err instanceof AppError)
    assert.equal(err.code, 'unauthorized')
    assert.equal(err.statusCode, 401)
    assert.match(err.message, /^POST \/layout\/converge: 401 unauthorized: /)
    assert.equal(exitStatusOf(err), 1)
    return true
  })
  assert.equal(agent.kicks, 1)
})

void test('the CLI reads the token as the agent does, and a refusal for want of it says why none was sent', async (t) => {
  const dataDir = await tmpDir(t)
  const own = 'd'.repeat(64)
  // No agent has started here: no token, and why.
  const none = clientToken(loadConfig({ CARLOS_DATA_DIR: dataDir }))
  assert.equal(none.token, '')
  assert.match('missing' in none ? none.missing : '', /agent\.token does not exist/)
  await fs.writeFile(path.join(dataDir, AGENT_TOKEN_FILE), `${own}\n`, { mode: 0o600 })
  assert.deepEqual(clientToken(loadConfig({ CARLOS_DATA_DIR: dataDir })), { token: own })
  const file = path.join(dataDir, 'given.token')
  await fs.writeFile(file, `${'f'.repeat(32)}\n`, { mode: 0o640 })
  const fromFile = loadConfig({ CARLOS_DATA_DIR: dataDir, CARLOS_AGENT_TOKEN_FILE: file })
  assert.deepEqual(clientToken(fromFile), { token: 'f'.repeat(32) })
  const fromEnv = loadConfig({
    CARLOS_DATA_DIR: dataDir,
    CARLOS_AGENT_TOKEN_FILE: file,
    CARLOS_AGENT_TOKEN: TEST_TOKEN,
  })
  assert.deepEqual(clientToken(fromEnv), { token: TEST_TOKEN })

  const { agent, url } = await listen(t)
  const missing = clientToken(loadConfig({ CARLOS_DATA_DIR: path.join(dataDir, 'elsewhere') }))
  await assert.rejects(new AgentClient(url, missing).kick(), (err: unknown) => {
    assert.ok(err instanceof AppError)
    assert.equal(err.code, 'unauthorized')
    assert.match(err.message, /no token was sent: .*elsewhere\/agent\.token does not exist/)
    return true
  })
  assert.equal(agent.kicks, 0)
})

void test("the agent's own code comes through: intent_unreadable on mint", async (t) => {
  const { agent, url } = await listen(t)
  agent.mintValue = errors.intentUnreadable('etcd: no endpoint answered')
  await assert.rejects(new AgentClient(url, '').mint(1_000), {
    code: 'intent_unreadable',
    statusCode: 503,
    message: 'GET /layout/mint: 503 intent_unreadable: the layout intent is unreadable: etcd: no endpoint answered',
  })
})

void test('no agent, or something that does not answer JSON: AgentUnreachable, naming the address', async (t) => {
  await assert.rejects(new AgentClient('http://127.0.0.1:1', '').status(), (err: unknown) => {
    assert.ok(err instanceof AgentUnreachable)
    assert.equal(err.code, 'agent_unreachable')
    assert.match(err.message, /^cannot reach layoutd at http:\/\/127\.0\.0\.1:1: /)
    return true
  })
  const server = http.createServer((_req, res) =>
    res.writeHead(200, { 'content-type': 'text/html' }).end('<html>not an agent</html>'),
  )
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())))
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  await assert.rejects(new AgentClient(base, '').status(), {
    name: 'AgentUnreachable',
    message: `GET ${base}/layout/status: answered 200 with a body that is not JSON`,
  })
})

/** An identity a fake agent answers GET /agent with. */
const holding = (dataDir: string) => ({ dataDir, pid: 1, startId: 'fake', startedAt: new Date().toISOString() })

void test('findAgent: --url as given; else the address D/agent.json names while its agent runs; else the listen address', async (t) => {
  const dataDir = await tmpDir(t)
  const config = loadConfig({ CARLOS_DATA_DIR: dataDir, CARLOS_AGENT_LISTEN: '127.0.0.1:9741' })
  assert.deepEqual(findAgent(config, 'http://x:1/'), { url: 'http://x:1', via: '--url' })
  const fallback = { url: 'http://127.0.0.1:9741', via: 'CARLOS_AGENT_LISTEN or its default', dataDir }
  assert.deepEqual(findAgent(config, undefined), fallback, 'no agent.json')
  const file = path.join(dataDir, AGENT_HOLDER_FILE)
  const write = (h: object) => fs.writeFile(file, JSON.stringify(h))
  await write({ pid: process.pid, listen: '127.0.0.1:5555', dataDir, startId: 'a', startedAt: '' })
  const named = { url: 'http://127.0.0.1:5555', via: `named by ${file}`, dataDir, startId: 'a' }
  assert.deepEqual(findAgent(config, undefined), named)
  await write({ pid: process.pid, listen: '', dataDir, startId: 'a', startedAt: '' })
  assert.deepEqual(findAgent(config, undefined), { ...fallback, startId: 'a' }, 'not listening yet')
  // A pid no process has: the agent named was killed and left its file.
  await write({ pid: 2 ** 22 + 1, listen: '127.0.0.1:5555', dataDir, startId: 'a', startedAt: '' })
  assert.deepEqual(findAgent(config, undefined), { ...fallback, startId: 'a' }, 'a dead holder')
  await fs.writeFile(file, '{half')
  assert.deepEqual(findAgent(config, undefined), fallback, 'half a file')
})

void test('the client asks GET /agent first: this data root (through a symlink too) passes, another is refused, none is unidentified', async (t) => {
  const dataDir = await tmpDir(t)
  const link = path.join(await tmpDir(t), 'data')
  await fs.symlink(dataDir, link)
  const { url } = await listen(t, { identity: holding(dataDir) })
  const target = { url, via: 'test', dataDir: link }
  assert.deepEqual(await new AgentClient(target, '').status(), sampleReport())

  const other = await listen(t, { identity: holding('/elsewhere/data') })
  await assert.rejects(new AgentClient({ ...target, url: other.url }, TEST_TOKEN).kick(), (err: unknown) => {
    assert.ok(err instanceof AppError)
    assert.equal(err.code, 'agent_other_data_root')
    assert.ok(
      err.message.startsWith(`the agent at ${other.url} (test) serves /elsewhere/data, not this data root ${link}: `),
    )
    assert.equal(exitStatusOf(err), 1)
    return true
  })
  assert.equal(other.agent.kicks, 0, 'nothing was asked of it')

  const none = await listen(t)
  await assert.rejects(new AgentClient({ ...target, url: none.url }, TEST_TOKEN).kick(), { code: 'agent_unidentified' })
  assert.equal(none.agent.kicks, 0)

  // The start that wrote this root's agent.json, naming the root by another path (a container's mount): ours.
  const mounted = await listen(t, { identity: { ...holding('/data'), startId: 'this-start' } })
  const mine = { ...target, url: mounted.url, startId: 'this-start' }
  assert.equal((await new AgentClient(mine, TEST_TOKEN).kick()).running, true)
  await assert.rejects(new AgentClient({ ...mine, startId: 'another-start' }, TEST_TOKEN).kick(), {
    code: 'agent_other_data_root',
  })
})

// Only the activator changes a claim (design §6): the real agent, started
// with no token of the operator's, makes D/agent.token (0600, its own), and
// a local process of another uid, on the same loopback socket, can neither
// read that file nor end, make or kick anything. The activator, given the
// file, can; so can `layoutd converge`, which reads it as the agent does.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test, type TestContext } from 'node:test'
import { request } from 'undici'
import { AgentProcess, makeSandbox, runCli, type Sandbox } from '../helpers/agent-process.js'
import { tmpDir } from '../helpers/tmp.js'
import { run } from '../helpers/child.js'

const HOST = 'a.example.com'

/** nobody: a uid and gid that own nothing on the box, as any unprivileged local user. */
const NOBODY = ['--reuid=65534', '--regid=65534', '--clear-groups']

/** A command run as nobody (util-linux setpriv), bounded; answers its exit code and output. */
async function asNobody(cmd: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run('setpriv', [...NOBODY, '--', ...cmd], { timeout: 15_000 })
    return { code: 0, stdout, stderr }
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string }
    return { code: typeof e.code === 'number' ? e.code : -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' }
  }
}

/** curl as nobody: answers the HTTP status it got (-w), the body discarded. */
async function curlAsNobody(method: string, url: string, body?: string): Promise<number> {
  const args = ['curl', '-sS', '-o', '/dev/null', '-w', '%{http_code}', '--max-time', '10', '-X', method, url]
  if (body !== undefined) args.push('-H', 'content-type: application/json', '--data', body)
  const r = await asNobody(args)
  assert.equal(r.code, 0, `curl as nobody ran: ${r.stderr}`)
  return Number(r.stdout)
}

/** A box whose directories any user may traverse (the token file's own mode is what keeps it), one flat tenant. */
async function box(t: TestContext): Promise<{ sb: Sandbox; agent: AgentProcess }> {
  const root = await tmpDir(t)
  await fs.chmod(root, 0o755)
  const sb = await makeSandbox(root, 'kass-1')
  const added = await runCli(sb, ['routes', 'add', HOST, '--hibernate'])
  assert.equal(added.exit.code, 0, added.stderr)
  const agent = await AgentProcess.start(sb, { env: { CARLOS_LAYOUT_DEFAULT: 'flat' } })
  t.after(() => agent.stop())
  await agent.waitReady()
  return { sb, agent }
}

async function claims(agent: AgentProcess): Promise<string[]> {
  const res = await request(`${agent.url}/wakes`)
  assert.equal(res.statusCode, 200)
  return ((await res.body.json()) as { awake: string[] }).awake
}

void test('another uid cannot end, make or kick anything, nor read the token; the activator can', async (t) => {
  const { sb, agent } = await box(t)
  const file = path.join(sb.dataDir, 'agent.token')
  const st = await fs.lstat(file)
  assert.ok(st.isFile())
  assert.equal(st.mode & 0o777, 0o600, 'D/agent.token is 0600')
  assert.equal(st.uid, process.geteuid?.(), "it is the agent's")

  // The activator, given the file, claims the running tenant.
  const claimed = await request(`${agent.url}/wakes/${HOST}`, { method: 'POST', headers: agent.authorization() })
  await claimed.body.dump()
  assert.equal(claimed.statusCode, 200)
  assert.deepEqual(await claims(agent), [HOST])

  // Another uid on the same box, over the same loopback socket.
  assert.equal(await curlAsNobody('PUT', `${agent.url}/wakes`, '{"awake":[]}'), 401)
  assert.equal(await curlAsNobody('DELETE', `${agent.url}/wakes/${HOST}`), 401)
  assert.equal(await curlAsNobody('POST', `${agent.url}/wakes/${HOST}`), 401)
  assert.equal(await curlAsNobody('POST', `${agent.url}/layout/converge`), 401)
  assert.deepEqual(await claims(agent), [HOST], 'the claim persists')
  // Reads stay open on loopback, to any uid.
  assert.equal(await curlAsNobody('GET', `${agent.url}/wakes`), 200)

  const read = await asNobody(['cat', file])
  assert.notEqual(read.code, 0, 'nobody cannot read D/agent.token')
  assert.match(read.stderr, /Permission denied/)
  assert.equal(read.stdout, '')

  // The activator, with the token, ends its own claim.
  const released = await request(`${agent.url}/wakes/${HOST}`, { method: 'DELETE', headers: agent.authorization() })
  await released.body.dump()
  assert.equal(released.statusCode, 204)
  assert.deepEqual(await claims(agent), [])
})

void test('layoutd converge works against the agent with its own token; the token is kept across a restart', async (t) => {
  const { sb, agent } = await box(t)
  const token = agent.token
  assert.match(token, /^[0-9a-f]{64}$/)
  const converged = await runCli(sb, ['converge'])
  assert.equal(converged.exit.code, 0, converged.stderr)
  assert.doesNotMatch(converged.stdout + converged.stderr, new RegExp(token), 'the CLI never prints the token')

  await agent.stop()
  const again = await AgentProcess.start(sb, { env: { CARLOS_LAYOUT_DEFAULT: 'flat' } })
  t.after(() => again.stop())
  await again.waitReady()
  assert.equal(again.token, token, 'the next start reuses D/agent.token')
  const logged = again.tail()
  assert.ok(!logged.includes(token), 'no log line carries the token')
  assert.match(logged, /agent\.token/, 'the log says where the token is')
})

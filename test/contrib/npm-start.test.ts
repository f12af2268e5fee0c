// `npm start` runs the agent so that a SIGTERM to npm stops node itself:
// the start script execs node, npm forwards the signal to its child, and
// no agent is left serving with nobody to stop it.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { SYNC_CONCURRENCY } from '../../src/infra/fsutil.js'
import { freePort, makeSandbox, sandboxEnv } from '../helpers/agent-process.js'
import { ended, spawnFor } from '../helpers/child.js'
import { tmpDir } from '../helpers/tmp.js'
import { until } from '../helpers/until.js'

const ROOT = fileURLToPath(new URL('../../../', import.meta.url))

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    // ESRCH: no such process
    return false
  }
}

void test('a SIGTERM to npm start stops the agent it started', async (t) => {
  const sb = await makeSandbox(await tmpDir(t, 'layoutd-npm-start-'))
  const port = await freePort()
  // npm, its shell and the agent are one process group, killed whole when the test ends.
  const npm = spawnFor(t, 'npm', ['start'], {
    cwd: ROOT,
    env: sandboxEnv(sb, { CARLOS_AGENT_LISTEN: `127.0.0.1:${port}` }),
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  npm.stdout?.on('data', (b: Buffer) => (output += b.toString()))
  npm.stderr?.on('data', (b: Buffer) => (output += b.toString()))
  // The agent's own record of who holds the data root: node's pid, once it listens.
  const holder = path.join(sb.dataDir, 'agent.json')
  const agent = await until(
    `the agent under npm start to listen (${output})`,
    async () => {
      const text = await fs.readFile(holder, 'utf8').catch(() => '')
      const h = text === '' ? undefined : (JSON.parse(text) as { pid: number; listen: string })
      return h !== undefined && h.listen !== '' ? h : undefined
    },
    30_000,
  )
  t.after(() => {
    if (alive(agent.pid)) process.kill(agent.pid, 'SIGKILL')
  })
  assert.notEqual(agent.pid, npm.pid, 'node runs as its own process')
  assert.equal((await fetch(`http://127.0.0.1:${port}/livez`, { signal: AbortSignal.timeout(30_000) })).status, 200)

  npm.kill('SIGTERM')
  await ended(npm, 'npm start after SIGTERM', 30_000)
  await until(`node (pid ${agent.pid}) to exit after npm got SIGTERM`, () => !alive(agent.pid), 30_000)
  await assert.rejects(
    fetch(`http://127.0.0.1:${port}/livez`, { signal: AbortSignal.timeout(30_000) }),
    'nobody serves the port',
  )
  assert.match(output, /shutting down/, 'the agent shut down in order, on the signal')
})

void test('bin/layoutd serve with UV_THREADPOOL_SIZE unset starts the agent as npm start does: its pool and its flags', async (t) => {
  const sb = await makeSandbox(await tmpDir(t, 'layoutd-bin-serve-'))
  const port = await freePort()
  const env = sandboxEnv(sb, { CARLOS_AGENT_LISTEN: `127.0.0.1:${port}` })
  delete env.UV_THREADPOOL_SIZE
  delete env.MALLOC_ARENA_MAX
  const bin = spawnFor(t, process.execPath, [path.join(ROOT, 'bin/layoutd'), 'serve'], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  bin.stdout?.on('data', (b: Buffer) => (output += b.toString()))
  bin.stderr?.on('data', (b: Buffer) => (output += b.toString()))
  const holder = path.join(sb.dataDir, 'agent.json')
  let gone = false
  bin.once('exit', () => (gone = true))
  const agent = await until(
    'the agent under bin/layoutd to listen',
    async () => {
      // Its own words, should it stop first (a port another test's connection took since freePort, say).
      if (gone) throw new Error(`bin/layoutd serve exited before it listened: ${output}`)
      const text = await fs.readFile(holder, 'utf8').catch(() => '')
      const h = text === '' ? undefined : (JSON.parse(text) as { pid: number; listen: string })
      return h !== undefined && h.listen !== '' ? h : undefined
    },
    30_000,
  ).catch((err: unknown) => {
    throw new Error(`${(err as Error).message}; its output: ${output}`)
  })
  const environ = (await fs.readFile(`/proc/${agent.pid}/environ`, 'utf8')).split('\0')
  assert.ok(environ.includes(`UV_THREADPOOL_SIZE=${SYNC_CONCURRENCY}`), 'the pool npm start gives it')
  assert.ok(environ.includes('MALLOC_ARENA_MAX=2'), 'the arenas npm start gives it')
  const argv = (await fs.readFile(`/proc/${agent.pid}/cmdline`, 'utf8')).split('\0')
  assert.ok(argv.includes('--max-semi-space-size=4'), argv.join(' '))
  assert.ok(argv.includes('--heap-growing-percent=100'), argv.join(' '))
  await until('its start-up logged', () => output.includes('listening'), 30_000)
  assert.doesNotMatch(output, /start node with UV_THREADPOOL_SIZE/, 'no warning of a small thread pool')
})

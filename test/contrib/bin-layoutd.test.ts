// bin/layoutd replaces itself with the agent: the pid a shell's `&` or a
// supervisor holds is the agent's, whatever node is first on PATH, and
// UV_THREADPOOL_SIZE unset. `kill -9 $!` (the README's stop, made hard)
// leaves no agent holding the data root, and systemd-socket-activate's
// LISTEN_PID names the agent, which serves on the socket.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test, type TestContext } from 'node:test'
import { fileURLToPath } from 'node:url'
import { AgentLock } from '../../src/infra/agent-lock.js'
import { freePort, makeSandbox, sandboxEnv, type Sandbox } from '../helpers/agent-process.js'
import { ended, spawnFor } from '../helpers/child.js'
import { tmpDir } from '../helpers/tmp.js'
import { until } from '../helpers/until.js'

const ROOT = fileURLToPath(new URL('../../../', import.meta.url))
const BIN = path.join(ROOT, 'bin/layoutd')

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    // ESRCH: no such process
    return false
  }
}

/** The machine's own node when it is older than 24 (the case bin/layoutd runs Node 26 for), else undefined. */
function olderSystemNode(): string | undefined {
  for (const node of ['/usr/bin/node', '/usr/local/bin/node']) {
    try {
      const major = Number(execFileSync(node, ['-p', 'process.versions.node.split(".")[0]'], { encoding: 'utf8' }))
      if (major < 24) return node
    } catch {
      // Not there, or not a node: try the next.
    }
  }
  return undefined
}

/** Who holds the data root, once it listens: D/agent.json's pid. */
async function listeningHolder(sb: Sandbox, what: string, output: () => string): Promise<number> {
  const file = path.join(sb.dataDir, 'agent.json')
  const h = await until(
    what,
    async () => {
      const text = await fs.readFile(file, 'utf8').catch(() => '')
      const got = text === '' ? undefined : (JSON.parse(text) as { pid: number; listen: string })
      return got !== undefined && got.listen !== '' ? got : undefined
    },
    30_000,
  ).catch((err: unknown) => {
    throw new Error(`${(err as Error).message}; its output: ${output()}`)
  })
  return h.pid
}

/** Starts `bin/layoutd serve &` from sh with PATH led by pathFirst, UV_THREADPOOL_SIZE unset; kills -9 `$!`. */
async function killShellsPid(t: TestContext, pathFirst: string): Promise<void> {
  const sb = await makeSandbox(await tmpDir(t, 'layoutd-bin-kill-'))
  const env = sandboxEnv(sb, { PATH: `${pathFirst}:${process.env.PATH ?? ''}` })
  delete env.UV_THREADPOOL_SIZE
  const log = path.join(sb.root, 'agent.log')
  const shell = spawnFor(t, '/bin/sh', ['-c', '"$0" serve >>"$1" 2>&1 & echo $!', BIN, log], {
    env,
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  let out = ''
  shell.stdout?.setEncoding('utf8').on('data', (s: string) => (out += s))
  await ended(shell, 'the shell')
  const pid = Number(out.trim())
  assert.ok(Number.isInteger(pid) && pid > 0, `the shell's $!: ${out}`)
  const pids = new Set([pid])
  t.after(() => {
    for (const p of pids) if (alive(p)) process.kill(p, 'SIGKILL')
  })
  const output = () => `${out}${readFileSync(log, 'utf8')}`
  const holder = await listeningHolder(sb, 'the agent under bin/layoutd to listen', output)
  pids.add(holder)
  assert.equal(holder, pid, 'the agent is the process the shell started')

  process.kill(pid, 'SIGKILL')
  await until(`pid ${pid} to be gone after kill -9`, () => !alive(pid), 10_000)
  assert.equal(alive(holder), false, `no agent left running (pid ${holder})`)
  await until('the data root lock to be free', () => !AgentLock.held(sb.dataDir), 10_000)
  // A new agent can take the data root.
  AgentLock.acquire(sb.dataDir).release()
}

void test('kill -9 of the pid a shell got for bin/layoutd serve leaves no agent, and the data root free', async (t) => {
  await killShellsPid(t, path.dirname(process.execPath))
})

void test('the same with an older node first on PATH: bin/layoutd runs Node 26 in its own place', async (t) => {
  const old = olderSystemNode()
  if (old === undefined) {
    t.skip('no node older than 24 on this machine')
    return
  }
  await killShellsPid(t, path.dirname(old))
})

void test('systemd-socket-activate -l ADDR bin/layoutd serve: the agent takes the socket and serves on it', async (t) => {
  const sb = await makeSandbox(await tmpDir(t, 'layoutd-bin-socket-'))
  const port = await freePort()
  const env = sandboxEnv(sb, { CARLOS_AGENT_LISTEN: `127.0.0.1:${port}` })
  delete env.UV_THREADPOOL_SIZE
  // systemd-socket-activate passes its child little of its own environment: each variable by -E.
  const setenv = Object.entries(env).flatMap(([k, v]) => ['-E', `${k}=${v ?? ''}`])
  const activate = spawnFor(t, 'systemd-socket-activate', ['-l', `127.0.0.1:${port}`, ...setenv, '--', BIN, 'serve'], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  activate.stdout?.setEncoding('utf8').on('data', (s: string) => (output += s))
  activate.stderr?.setEncoding('utf8').on('data', (s: string) => (output += s))
  await until('systemd-socket-activate to listen', () => output.includes('Listening on'), 10_000)
  // It hands the socket over on the first connection.
  const first = fetch(`http://127.0.0.1:${port}/livez`, { signal: AbortSignal.timeout(30_000) })
  const holder = await listeningHolder(sb, 'the agent to listen on the socket', () => output)
  assert.equal(holder, activate.pid, 'LISTEN_PID, the pid systemd-socket-activate execs, is the agent')
  assert.equal((await first).status, 200)
  assert.match(output, /serving on the socket systemd passed/)
  assert.doesNotMatch(output, /is not this process/)
})

// The socket systemd passes (design §4.6), checked in a child process that
// is handed each kind of fd at 3 with the LISTEN_* variables set as systemd
// sets them: a listening TCP or Unix stream socket is taken, anything else
// refused naming what it is, and the variables never reach a child.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import net from 'node:net'
import path from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { listenBacklog, SOCKET_UNIT_BACKLOG, tcpAddress } from '../../src/infra/socket-activation.js'
import { MAIN_JS } from '../helpers/agent-process.js'
import { ended, spawnFor, spawnGroup } from '../helpers/child.js'
import { tmpDir } from '../helpers/tmp.js'
import { until } from '../helpers/until.js'

const MODULE = fileURLToPath(new URL('../../src/infra/socket-activation.js', import.meta.url))

const PROBE = `
import { inheritedSocket } from ${JSON.stringify(MODULE)}
let out
try { out = inheritedSocket() } catch (err) { out = { code: err.code, message: err.message } }
out = { ...out, left: Object.keys(process.env).filter((k) => k.startsWith('LISTEN_')) }
process.stdout.write(JSON.stringify(out))
`

/** The fd a Node handle holds (a listening server, a socket, a UDP socket). */
function fdOf(handle: unknown): number {
  const fd = (handle as { _handle?: { fd?: number } })._handle?.fd
  assert.ok(typeof fd === 'number' && fd > 2, 'the handle has an fd')
  return fd
}

/**
 * Runs the probe with fd at 3 and env; LISTEN_PID is the child's own pid unless pid says otherwise (the shell
 * execs node, so `$$` is node's pid, as systemd sets it after its fork).
 */
async function probe(fd: number | 'ignore', env: Record<string, string>, pid = '$$'): Promise<Record<string, unknown>> {
  const script = `LISTEN_PID=${pid} exec "$0" --input-type=module -e "$1"`
  const child = spawnGroup('/bin/sh', ['-c', script, process.execPath, PROBE], {
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'inherit', fd],
  })
  let out = ''
  child.stdout?.setEncoding('utf8').on('data', (s: string) => (out += s))
  await ended(child, 'the probe')
  return JSON.parse(out) as Record<string, unknown>
}

const ONE = { LISTEN_FDS: '1', LISTEN_FDNAMES: 'layoutd' }

async function listening(server: net.Server, ...args: unknown[]): Promise<net.Server> {
  await new Promise<void>((resolve) => server.listen(...(args as [number]), () => resolve()))
  return server
}

void test('a listening TCP socket of ours is taken, named, with its address; the variables are unset', async (t) => {
  const server = await listening(net.createServer(), 0, '127.0.0.1')
  t.after(() => server.close())
  const { port } = server.address() as net.AddressInfo
  const got = await probe(fdOf(server), ONE)
  assert.deepEqual(got, { fd: 3, name: 'layoutd', kind: 'tcp', address: `127.0.0.1:${port}`, loopback: true, left: [] })
})

void test('a listening Unix stream socket is taken, with its path', async (t) => {
  const dir = await tmpDir(t, 'layoutd-sock-')
  const file = path.join(dir, 'layoutd.sock')
  const server = await listening(net.createServer(), file)
  t.after(() => server.close())
  const got = await probe(fdOf(server), { LISTEN_FDS: '1' })
  assert.deepEqual(got, { fd: 3, name: 'unknown', kind: 'unix', address: file, loopback: true, left: [] })
})

void test('what is not a listening TCP or Unix stream socket is refused, naming what it is', async (t) => {
  const dir = await tmpDir(t, 'layoutd-sock-')
  const server = await listening(net.createServer(), 0, '127.0.0.1')
  const { port } = server.address() as net.AddressInfo
  const client = net.connect(port, '127.0.0.1')
  await new Promise((resolve) => client.once('connect', resolve))
  const file = fs.openSync(path.join(dir, 'plain'), 'w')
  t.after(() => {
    client.destroy()
    server.close()
    fs.closeSync(file)
  })
  const cases: Array<[number | 'ignore', Record<string, string>, RegExp, string?]> = [
    [file, ONE, /fd 3 is a regular file, not a socket/],
    [fdOf(client), ONE, /fd 3 is a TCP socket at 127\.0\.0\.1:\d+ that is not listening \(state 01\)/],
    // Nothing passed at 3: whatever node opened there itself (its event loop's fds).
    ['ignore', ONE, /fd 3 is (a character device|something else \(anon_inode:.*\)), not a socket/],
    [fdOf(server), { LISTEN_FDS: '2' }, /LISTEN_FDS=2: layoutd serves on exactly one socket/],
    [fdOf(server), { LISTEN_FDS: 'x' }, /LISTEN_FDS="x" is not a count/],
    [fdOf(server), ONE, /LISTEN_PID=1 is not this process \(\d+\)/, '1'],
  ]
  for (const [fd, env, message, pid] of cases) {
    const got = await probe(fd, env, pid)
    assert.equal(got.code, 'inherited_socket', String(message))
    assert.match(String(got.message), message)
    assert.deepEqual(got.left, [], 'the variables are unset even when refused')
  }
})

void test('no LISTEN_FDS: nothing was passed', async () => {
  assert.deepEqual(await probe('ignore', {}), { left: [] })
})

void test('tcpAddress reads /proc/net/tcp and tcp6 addresses', () => {
  assert.equal(tcpAddress('0100007F:2604'), '127.0.0.1:9732')
  assert.equal(tcpAddress('00000000000000000000000001000000:1F90'), '[::1]:8080')
  assert.equal(tcpAddress('00000000000000000000000000000000:0050'), '[::]:80')
})

void test('layoutd serve handed a socket that is not listening refuses to start, and listens on nothing of its own', async (t) => {
  const dir = await tmpDir(t, 'layoutd-sock-')
  const file = fs.openSync(path.join(dir, 'plain'), 'w')
  t.after(() => fs.closeSync(file))
  const own = await listening(net.createServer(), 0, '127.0.0.1')
  const { port } = own.address() as net.AddressInfo
  await new Promise((resolve) => own.close(resolve))
  const child = spawnFor(t, '/bin/sh', ['-c', 'LISTEN_PID=$$ exec "$0" "$1" serve', process.execPath, MAIN_JS], {
    env: {
      PATH: process.env.PATH ?? '',
      ...ONE,
      CARLOS_DATA_DIR: path.join(dir, 'data'),
      CARLOS_DEPLOYMENT_DIR: path.join(dir, 'deploy'),
      CARLOS_AGENT_LISTEN: `127.0.0.1:${port}`,
      CARLOS_BOX: 'kass-1',
      CARLOS_NESTED_MOUNTS: 'none',
    },
    stdio: ['ignore', 'pipe', 'pipe', file],
  })
  let stderr = ''
  child.stderr?.setEncoding('utf8').on('data', (s: string) => (stderr += s))
  child.stdout?.resume()
  const { code } = await ended(child, 'layoutd serve on a regular file')
  assert.equal(code, 1, stderr)
  assert.match(
    stderr,
    /refusing to start: the socket systemd passed is not one layoutd can serve on: fd 3 is a regular file/,
  )
  // It never listened on the configured address instead.
  const probeOwn = net.connect(port, '127.0.0.1')
  const refused = await new Promise((resolve) => {
    probeOwn.once('error', (err: NodeJS.ErrnoException) => resolve(err.code))
    probeOwn.once('connect', () => resolve('connected'))
  })
  probeOwn.destroy()
  assert.equal(refused, 'ECONNREFUSED')
  assert.equal(fs.existsSync(path.join(dir, 'data')), false, 'nothing under the data root was touched')
})

/** The backlog `ss -ltn` shows for the socket listening on port (its Send-Q), or undefined while none listens. */
function ssBacklog(port: number): number | undefined {
  const line = execFileSync('ss', ['-ltnH', `sport = :${port}`], { encoding: 'utf8' }).trim()
  const sendQ = line.split(/\s+/)[2]
  return line === '' || sendQ === undefined ? undefined : Number(sendQ)
}

void test('layoutd serve keeps the backlog of the socket systemd passed (Node would listen(2) it down to 511)', async (t) => {
  const dir = await tmpDir(t, 'layoutd-sock-backlog-')
  const own = await listening(net.createServer(), 0, '127.0.0.1')
  const { port } = own.address() as net.AddressInfo
  await new Promise((resolve) => own.close(resolve))
  const env = {
    PATH: process.env.PATH ?? '',
    CARLOS_DATA_DIR: path.join(dir, 'data'),
    CARLOS_DEPLOYMENT_DIR: path.join(dir, 'deploy'),
    CARLOS_AGENT_LISTEN: `127.0.0.1:${port}`,
    CARLOS_BOX: 'kass-1',
    CARLOS_NESTED_MOUNTS: 'none',
  }
  // systemd-socket-activate passes its child little of its own environment: each variable by -E.
  const setenv = Object.entries(env).flatMap(([k, v]) => ['-E', `${k}=${v}`])
  const activate = spawnFor(
    t,
    'systemd-socket-activate',
    ['-l', `127.0.0.1:${port}`, ...setenv, '--', process.execPath, MAIN_JS, 'serve'],
    { env, stdio: ['ignore', 'pipe', 'pipe'] },
  )
  let output = ''
  activate.stdout?.setEncoding('utf8').on('data', (s: string) => (output += s))
  activate.stderr?.setEncoding('utf8').on('data', (s: string) => (output += s))
  const before = await until('systemd-socket-activate to listen', () => ssBacklog(port), 10_000)
  assert.notEqual(before, 511, 'the socket starts with a backlog of its own')
  // It hands the socket over on the first connection; the agent listens on it then.
  const first = await fetch(`http://127.0.0.1:${port}/livez`, { signal: AbortSignal.timeout(30_000) })
  assert.equal(first.status, 200, output)
  assert.match(output, /serving on the socket systemd passed/)
  assert.ok(fs.existsSync(path.join(dir, 'data', 'agent.json')), 'the agent holds the test’s data root')
  assert.equal(ssBacklog(port), before, `ss -ltn: the backlog after the agent listened (${output})`)
  assert.equal(listenBacklog('/nonexistent'), SOCKET_UNIT_BACKLOG, 'without /proc/sys: the unit’s Backlog=')
})

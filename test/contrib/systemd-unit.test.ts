// contrib/layoutd.service and contrib/layoutd.socket: systemd accepts both
// (`systemd-analyze verify`, where a warning fails as an error does), the
// service carries the hardening and the paths the README promises, and it
// is started by the socket, which listens where the agent would.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { SYNC_CONCURRENCY } from '../../src/infra/fsutil.js'
import { tmpDir } from '../helpers/tmp.js'
import { run } from '../helpers/child.js'

const ROOT = fileURLToPath(new URL('../../../', import.meta.url))
const UNIT = path.join(ROOT, 'contrib/layoutd.service')
const SOCKET = path.join(ROOT, 'contrib/layoutd.socket')

/** The unit's `Key=value` lines, by key (a key may repeat). */
function directives(text: string): Map<string, string[]> {
  const out = new Map<string, string[]>()
  for (const line of text.split('\n')) {
    const m = /^([A-Za-z]+)=(.*)$/.exec(line)
    if (m?.[1] === undefined || m[2] === undefined) continue
    out.set(m[1], [...(out.get(m[1]) ?? []), m[2]])
  }
  return out
}

void test('the unit runs node directly, hardened, writing only the data and deploy roots', async () => {
  const d = directives(await fs.readFile(UNIT, 'utf8'))
  const one = (key: string) => {
    const v = d.get(key)
    assert.equal(v?.length, 1, `${key}= once`)
    return v?.[0] ?? ''
  }
  assert.match(one('Type'), /^(simple|notify)$/)
  assert.match(
    one('ExecStart'),
    /^\/usr\/bin\/node --max-semi-space-size=4 --heap-growing-percent=100 \/opt\/layoutd\/dist\/src\/main\.js serve$/,
    'node itself, never npm: a SIGTERM must reach the agent',
  )
  assert.equal(one('EnvironmentFile'), '/etc/layoutd/layoutd.env')
  assert.equal(
    one('Environment'),
    `UV_THREADPOOL_SIZE=${SYNC_CONCURRENCY} MALLOC_ARENA_MAX=2`,
    'a thread pool as large as the fsyncs a converge keeps in flight (design §3.3), its threads sharing two arenas (§9)',
  )
  assert.equal(one('NoNewPrivileges'), 'yes')
  assert.equal(one('ProtectSystem'), 'strict')
  assert.deepEqual(one('ReadWritePaths').split(/\s+/).sort(), ['/data', '/deploy'])
  assert.equal(one('ProtectHome'), 'yes')
  assert.equal(one('PrivateTmp'), 'yes')
  // The loop's thread real-time, and only it (design §3.6): reset on fork, so no thread it starts inherits it.
  assert.equal(one('CPUSchedulingPolicy'), 'rr')
  assert.ok(Number(one('CPUSchedulingPriority')) >= 1 && Number(one('CPUSchedulingPriority')) <= 49)
  assert.equal(one('CPUSchedulingResetOnFork'), 'yes')
  assert.equal(one('RestrictRealtime'), 'yes', 'nothing in the unit raises itself beyond what systemd set')
  // The agent's shutdown grace is 90 s (src/server.ts): systemd must not kill it first.
  assert.ok(Number(/^(\d+)s$/.exec(one('TimeoutStopSec'))?.[1]) > 90)
})

void test('systemd-analyze verify accepts the unit, with no warning', async (t) => {
  // verify checks that ExecStart's program exists and is executable, so the
  // copy it reads names this machine's node and the built entry point; every
  // other line is the shipped file's, and the test says so.
  const shipped = await fs.readFile(UNIT, 'utf8')
  const main = path.join(ROOT, 'dist/src/main.js')
  await fs.access(main)
  const copy = shipped.replace(
    /^ExecStart=\/usr\/bin\/node --max-semi-space-size=4 --heap-growing-percent=100 \/opt\/layoutd\/dist\/src\/main\.js /m,
    `ExecStart=${process.execPath} --max-semi-space-size=4 --heap-growing-percent=100 ${main} `,
  )
  const changed = copy.split('\n').filter((line, i) => line !== shipped.split('\n')[i])
  assert.deepEqual(
    changed,
    [`ExecStart=${process.execPath} --max-semi-space-size=4 --heap-growing-percent=100 ${main} serve`],
    'only ExecStart differs from the shipped unit',
  )
  const dir = await tmpDir(t, 'layoutd-unit-')
  const unit = path.join(dir, 'layoutd.service')
  await fs.writeFile(unit, copy)
  // The socket as shipped, beside it: the service requires it.
  const socket = path.join(dir, 'layoutd.socket')
  await fs.copyFile(SOCKET, socket)
  const { stdout, stderr } = await run('systemd-analyze', ['verify', socket, unit])
  // verify exits 0 on an unknown key or a value it cannot parse, and only
  // says so on stderr: any word from it about the unit is a failure.
  assert.equal(`${stdout}${stderr}`.trim(), '')
})

void test('the socket listens where the agent would, named, and starts the service, which requires it', async () => {
  const socket = directives(await fs.readFile(SOCKET, 'utf8'))
  assert.deepEqual(socket.get('ListenStream'), ['127.0.0.1:9740'], "one address, CARLOS_AGENT_LISTEN's default")
  assert.deepEqual(socket.get('FileDescriptorName'), ['layoutd'])
  assert.deepEqual(socket.get('Service'), ['layoutd.service'])
  assert.deepEqual(socket.get('Accept'), undefined, 'one socket for the one agent, never a process per connection')
  const service = directives(await fs.readFile(UNIT, 'utf8'))
  assert.deepEqual(service.get('Requires'), ['layoutd.socket'])
  assert.ok(service.get('After')?.[0]?.split(/\s+/).includes('layoutd.socket'))
})

void test('the check sees a misspelt directive and a missing program', async (t) => {
  const dir = await tmpDir(t, 'layoutd-unit-')
  const unit = path.join(dir, 'layoutd.service')
  const shipped = await fs.readFile(UNIT, 'utf8')
  const execStart = /^ExecStart=\/usr\/bin\/node /m
  await fs.writeFile(
    unit,
    shipped.replace(execStart, `ExecStart=${process.execPath} `).replace('NoNewPrivileges=', 'NoNewPrivilege='),
  )
  await fs.copyFile(SOCKET, path.join(dir, 'layoutd.socket'))
  const typo = await run('systemd-analyze', ['verify', unit])
  assert.match(typo.stderr, /Unknown key 'NoNewPrivilege'/)
  const socket = path.join(dir, 'layoutd.socket')
  await fs.writeFile(socket, (await fs.readFile(SOCKET, 'utf8')).replace(/^ListenStream=/m, 'ListenStreem='))
  await assert.rejects(run('systemd-analyze', ['verify', socket]), /Unknown key 'ListenStreem'[^]*no Listen setting/)
  await fs.writeFile(unit, shipped.replace(execStart, `ExecStart=${path.join(dir, 'no-such-node')} `))
  await assert.rejects(run('systemd-analyze', ['verify', unit]), /is not executable/)
})

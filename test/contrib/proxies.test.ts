// contrib/proxy/: stock nginx (auth_request) and Caddy (forward_auth), run
// for real with the shipped configuration (its ports substituted) in front
// of a real agent on a loopback socket: a ready host is proxied to its
// instance's socket, a fenced one is told to retry (503 with Retry-After),
// a held one is refused, an unknown one is 404, no path reaches the client,
// and the proxy keeps its connections to layoutd; with layoutd down, each
// says retry rather than an error page. Run as an unprivileged user in the
// sockets group, as an edge is, each reaches a nested tenant's socket and
// nothing else under the tenant's root (design §2), and an instance whose
// socket it cannot reach is a 502 the proxy logs, not a retry.
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import fs from 'node:fs/promises'
import http from 'node:http'
import net from 'node:net'
import path from 'node:path'
import { test, type TestContext } from 'node:test'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { nestedPaths, nestedRoot } from '../../src/domain/paths.js'
import { SOCKETS_GROUP } from '../../src/infra/groups.js'
import { freePort } from '../helpers/agent-process.js'
import { spawnFor } from '../helpers/child.js'
import { addFlat, agentBox, type AgentBox } from '../helpers/agent.js'
import { until } from '../helpers/until.js'

const ROOT = fileURLToPath(new URL('../../../', import.meta.url))
const NGINX_CONF = path.join(ROOT, 'contrib/proxy/nginx-layoutd.conf')
const CADDYFILE = path.join(ROOT, 'contrib/proxy/Caddyfile')

const READY = 'ok.example.com'
const FENCED = 'moving.example.com'
const HELD = 'held.example.com'

/** The edge's user in the tests: a system user in the sockets group, fixed names that are safe to leave. */
const EDGE_USER = 'layoutd-edge-test'

const exec = promisify(execFile)

interface EdgeUser {
  name: string
  uid: number
  gid: number
  /** setpriv's arguments that run a command as this user with its groups (the sockets group among them). */
  as: string[]
}

/**
 * The edge's user and the sockets group, made on this machine when missing
 * (as root: the suite's machine is a test box). Idempotent; the sockets
 * group must exist before the agent starts, which gives it run/.
 */
async function edgeUser(): Promise<EdgeUser> {
  const bounded = { timeout: 10_000, encoding: 'utf8' } as const
  const known = await exec('id', ['-u', EDGE_USER], bounded).then(
    () => true,
    () => false,
  )
  if (!known || (await exec('id', ['-nG', EDGE_USER], bounded)).stdout.split(/\s+/).indexOf(SOCKETS_GROUP) < 0) {
    assert.equal(process.getuid?.(), 0, `making ${EDGE_USER} in ${SOCKETS_GROUP} needs root`)
    await exec('groupadd', ['-f', '--system', SOCKETS_GROUP], bounded)
    if (!known)
      await exec(
        'useradd',
        [
          '--system',
          '--user-group',
          '--no-create-home',
          '--home-dir',
          '/nonexistent',
          '--shell',
          '/usr/sbin/nologin',
          EDGE_USER,
        ],
        bounded,
      ).catch((err: { code?: number }) => {
        // 9: made meanwhile by another run.
        if (err.code !== 9) throw err
      })
    await exec('usermod', ['-a', '-G', SOCKETS_GROUP, EDGE_USER], bounded)
  }
  const uid = Number((await exec('id', ['-u', EDGE_USER], bounded)).stdout.trim())
  const gid = Number((await exec('id', ['-g', EDGE_USER], bounded)).stdout.trim())
  return { name: EDGE_USER, uid, gid, as: ['--reuid', String(uid), '--regid', String(gid), '--init-groups', '--'] }
}

/** Runs argv as the edge's user; answers its exit code and what it wrote. */
async function asEdge(edge: EdgeUser, argv: string[]): Promise<{ code: number; out: string }> {
  try {
    const r = await exec('setpriv', [...edge.as, ...argv], { timeout: 10_000, encoding: 'utf8' })
    return { code: 0, out: r.stdout + r.stderr }
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string }
    return { code: typeof e.code === 'number' ? e.code : -1, out: `${e.stdout ?? ''}${e.stderr ?? ''}` }
  }
}

interface Box {
  b: AgentBox
  agentPort: number
  /** Connections the agent accepted, counted on its side. */
  connections: () => number
  /** Headers the instance was sent, for each request it answered. */
  upstreamSaw: http.IncomingHttpHeaders[]
  /** The ready host's instance socket. */
  socket: string
  /** Ends the instance's open connections: the proxy's next request connects anew. */
  dropConnections: () => void
}

/**
 * A real agent with a ready host (and its instance on the row's socket), a
 * fenced one and a held one. Flat, the rows stay where they were added;
 * nested (the default), the agent's pass moves them nested, making their
 * roots and run/ directories as it does on a box.
 */
async function box(t: TestContext, layout: 'flat' | 'nested' = 'flat'): Promise<Box> {
  const b = await agentBox(t, { env: layout === 'flat' ? { CARLOS_LAYOUT_DEFAULT: 'flat' } : {} })
  // The path down to the data root is open to search, as /data is on a box: the temp dir is 0700.
  await fs.chmod(b.dir, 0o711)
  for (const host of [READY, FENCED, HELD]) await addFlat(b, host)
  // A hold marker that does not read back stands until an operator removes it (design §4.2).
  await fs.mkdir(path.join(b.config.dataDir, 'layout'), { recursive: true })
  await fs.writeFile(path.join(b.config.dataDir, 'layout', `${HELD}.hold`), 'not a marker')
  await b.agent.start()
  if (layout === 'nested')
    await until('the pass moved the ready host nested', () => {
      const row = b.registry.get(READY)
      return row?.socket === nestedPaths(b.config, READY).socket && !b.agent.legState().running
    })
  await until('the first run', () => b.agent.legState().lastRun !== null && !b.agent.legState().running)
  b.fence.fence([FENCED], 9)

  const upstreamSaw: http.IncomingHttpHeaders[] = []
  const socket = b.registry.get(READY)?.socket ?? ''
  await fs.mkdir(path.dirname(socket), { recursive: true })
  const instance = http.createServer((req, res) => {
    upstreamSaw.push(req.headers)
    res.end(`hello from ${req.headers.host ?? '?'}\n`)
  })
  await new Promise<void>((resolve) => instance.listen(socket, resolve))
  // connect(2) needs write permission on the socket: the instance's group
  // (run/'s, by its setgid bit) may connect, as an instance must allow.
  await fs.chmod(socket, 0o660)
  t.after(() => instance.close())

  let accepted = 0
  b.app.server.on('connection', () => accepted++)
  await b.app.listen({ host: '127.0.0.1', port: 0 })
  const agentPort = (b.app.server.address() as net.AddressInfo).port
  return {
    b,
    agentPort,
    connections: () => accepted,
    upstreamSaw,
    socket,
    dropConnections: () => instance.closeAllConnections(),
  }
}

/** The shipped file with its two addresses replaced, each found exactly once. */
async function render(file: string, swaps: Array<[string, string]>): Promise<string> {
  let text = await fs.readFile(file, 'utf8')
  for (const [from, to] of swaps) {
    assert.equal(text.split(from).length, 2, `${path.basename(file)} names ${from} once`)
    text = text.replace(from, to)
  }
  return text
}

function get(port: number, host: string): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/some/page', headers: { host }, agent: false }, (res) => {
      let body = ''
      res.setEncoding('utf8').on('data', (c: string) => (body += c))
      res.once('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }))
    })
    req.once('error', reject)
  })
}

async function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1')
    s.once('connect', () => {
      s.destroy()
      resolve(true)
    })
    s.once('error', () => resolve(false))
  })
}

function run(t: TestContext, cmd: string, args: string[], env: NodeJS.ProcessEnv = process.env): () => string {
  // The proxy and its workers are one process group, killed whole when the test ends.
  const child = spawnFor(t, cmd, args, { env, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  child.stdout?.setEncoding('utf8').on('data', (s: string) => (out += s))
  child.stderr?.setEncoding('utf8').on('data', (s: string) => (out += s))
  return () => out
}

/** What every proxy must do with the four hosts. */
async function assertGated(port: number, bx: Box, proxy: string): Promise<void> {
  const ok = await get(port, READY)
  assert.equal(ok.status, 200, `${proxy}: ${ok.body}`)
  assert.equal(ok.body, `hello from ${READY}\n`, 'routed to the instance on the socket layoutd named')

  const fenced = await get(port, FENCED)
  assert.equal(fenced.status, 503, `${proxy}: ${fenced.body}`)
  assert.match(String(fenced.headers['retry-after']), /^[1-9][0-9]*$/, `${proxy}: Retry-After reaches the client`)
  assert.equal(fenced.headers['layoutd-state'], 'fenced')

  const held = await get(port, HELD)
  assert.equal(held.status, 403, `${proxy}: ${held.body}`)
  assert.equal(held.headers['layoutd-state'], 'held')
  assert.equal(held.headers['retry-after'], undefined)

  const unknown = await get(port, 'nobody.example.com')
  assert.equal(unknown.status, 404, `${proxy}: ${unknown.body}`)

  // Nothing the client got names a path of the data root, and the instance was not handed layoutd's headers.
  for (const res of [ok, fenced, held, unknown]) {
    assert.ok(!res.body.includes(bx.b.dir), `${proxy}: a body names a path: ${res.body}`)
    for (const [name, value] of Object.entries(res.headers))
      assert.ok(!String(value).includes(bx.b.dir), `${proxy}: header ${name} names a path`)
  }
  for (const seen of bx.upstreamSaw)
    assert.deepEqual(
      Object.keys(seen).filter((h) => h.startsWith('layoutd-')),
      [],
      `${proxy}: the instance is not sent layoutd's headers`,
    )

  // Keep-alive between the proxy and layoutd: 30 more asks, a few connections.
  const before = bx.connections()
  for (let i = 0; i < 30; i++) assert.equal((await get(port, READY)).status, 200)
  const opened = bx.connections() - before
  assert.ok(opened <= 3, `${proxy}: 30 gate asks opened ${opened} connections to layoutd`)
}

interface Proxy {
  port: number
  /** What the proxy logged so far. */
  log: () => Promise<string>
}

/**
 * nginx with the shipped site, foreground, under the temp dir. Its workers
 * run as user: root, or the edge's user (the master starts as root and
 * hands its workers to that user and its groups, as Debian's nginx does
 * with www-data).
 */
async function startNginx(t: TestContext, bx: Box, user: string): Promise<Proxy> {
  const dir = path.join(bx.b.dir, 'nginx')
  await fs.mkdir(dir)
  const port = await freePort()
  const site = await render(NGINX_CONF, [
    ['listen 80;', `listen 127.0.0.1:${port};`],
    ['server 127.0.0.1:9740;', `server 127.0.0.1:${bx.agentPort};`],
  ])
  await fs.writeFile(path.join(dir, 'site.conf'), site)
  // The test's own main context: a foreground nginx under the temp dir; the site is the shipped file.
  const temp = (k: string) => `${k}_temp_path ${path.join(dir, k)};`
  await fs.writeFile(
    path.join(dir, 'nginx.conf'),
    [
      'daemon off;',
      `user ${user};`,
      'worker_processes 1;',
      `pid ${path.join(dir, 'nginx.pid')};`,
      `error_log ${path.join(dir, 'error.log')} warn;`,
      'events { worker_connections 128; }',
      'http {',
      '  access_log off;',
      ...['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((k) => `  ${temp(k)}`),
      `  include ${path.join(dir, 'site.conf')};`,
      '}',
      '',
    ].join('\n'),
  )
  const out = run(t, 'nginx', ['-p', dir, '-c', path.join(dir, 'nginx.conf'), '-e', path.join(dir, 'error.log')])
  await until(`nginx listening (${out()})`, () => listening(port))
  return { port, log: () => fs.readFile(path.join(dir, 'error.log'), 'utf8') }
}

/** Caddy with the shipped Caddyfile, run as root or (edge given) as the edge's user with its groups. */
async function startCaddy(t: TestContext, bx: Box, edge?: EdgeUser): Promise<Proxy> {
  const dir = path.join(bx.b.dir, 'caddy')
  await fs.mkdir(dir)
  // Caddy keeps its state under HOME: the edge's user must be able to write there.
  if (edge !== undefined) await fs.chown(dir, edge.uid, edge.gid)
  const port = await freePort()
  const file = path.join(dir, 'Caddyfile')
  await fs.writeFile(
    file,
    await render(CADDYFILE, [
      [':80 {', `:${port} {`],
      ['forward_auth 127.0.0.1:9740 {', `forward_auth 127.0.0.1:${bx.agentPort} {`],
    ]),
  )
  const env = { ...process.env, HOME: dir, XDG_DATA_HOME: dir, XDG_CONFIG_HOME: dir }
  const argv = ['caddy', 'run', '--config', file, '--adapter', 'caddyfile']
  const out =
    edge === undefined ? run(t, argv[0] ?? '', argv.slice(1), env) : run(t, 'setpriv', [...edge.as, ...argv], env)
  await until(`caddy listening (${out()})`, () => listening(port))
  return { port, log: () => Promise.resolve(out()) }
}

/**
 * The edge's user reaches the nested tenant through the proxy and nothing
 * else under its root: not a listing of the root, not data/, not a file in
 * it (design §2). Then an instance socket it may not connect to is the
 * client's 502, and the proxy's log says why.
 */
async function assertEdgeReach(bx: Box, edge: EdgeUser, proxy: Proxy, name: string): Promise<void> {
  const root = nestedRoot(bx.b.config, READY)
  const data = nestedPaths(bx.b.config, READY).dir
  assert.equal(
    (await fs.stat(path.dirname(bx.socket))).gid,
    await groupGid(SOCKETS_GROUP),
    'run/ has the sockets group',
  )
  for (const argv of [
    ['ls', root],
    ['ls', data],
    ['cat', path.join(data, 'host.txt')],
  ]) {
    const r = await asEdge(edge, argv)
    assert.notEqual(r.code, 0, `${name}'s user: ${argv.join(' ')} answered ${r.out}`)
    assert.match(r.out, /Permission denied/, `${argv.join(' ')}`)
  }
  assert.equal((await asEdge(edge, ['test', '-w', bx.socket])).code, 0, "the socket is the group's to connect to")

  // The instance's socket closed to the group: the gate says ready, the instance cannot be reached.
  await fs.chmod(bx.socket, 0o600)
  bx.dropConnections()
  const refused = await get(proxy.port, READY)
  assert.equal(refused.status, 502, `${name}: ${refused.body}`)
  assert.equal(refused.headers['retry-after'], undefined, `${name}: not a retry`)
  assert.ok(!refused.body.includes(bx.b.dir), `${name}: the body names a path: ${refused.body}`)
  await until(`${name} logs why`, async () => /permission denied/i.test(await proxy.log()))
  await fs.chmod(bx.socket, 0o660)
}

async function groupGid(name: string): Promise<number> {
  const { stdout } = await exec('getent', ['group', name], { timeout: 10_000, encoding: 'utf8' })
  return Number(stdout.split(':')[2])
}

void test(
  'nginx auth_request with contrib/proxy/nginx-layoutd.conf gates, routes and keeps its connections',
  { timeout: 60_000 },
  async (t) => {
    const bx = await box(t)
    const nginx = await startNginx(t, bx, 'root')
    const port = nginx.port
    await assertGated(port, bx, 'nginx')
    assert.doesNotMatch(
      await nginx.log(),
      /auth request unexpected status/,
      'every gate answer is one auth_request takes',
    )
    // layoutd gone (down, or restarting without its socket unit): not a 500 error page, a retry.
    await bx.b.app.close()
    const down = await get(port, READY)
    assert.equal(down.status, 503, down.body)
    assert.equal(down.headers['retry-after'], '1')
  },
)

void test(
  'nginx whose workers are an unprivileged user in carlos-sockets reaches a nested tenant the pass made, and not its data',
  { timeout: 60_000 },
  async (t) => {
    const edge = await edgeUser()
    const bx = await box(t, 'nested')
    const nginx = await startNginx(t, bx, edge.name)
    await assertGated(nginx.port, bx, 'nginx')
    await assertEdgeReach(bx, edge, nginx, 'nginx')
    assert.equal((await get(nginx.port, READY)).status, 200)
  },
)

void test(
  'Caddy forward_auth with contrib/proxy/Caddyfile gates, routes, and takes the host in any case',
  { timeout: 60_000 },
  async (t) => {
    const bx = await box(t)
    const { port } = await startCaddy(t, bx)
    await assertGated(port, bx, 'caddy')
    for (const host of ['OK.Example.COM', `${READY}.`]) {
      const res = await get(port, host)
      assert.equal(res.status, 200, `${host}: ${res.body}`)
    }
    // layoutd gone: a retry, never a 502 page.
    await bx.b.app.close()
    const down = await get(port, READY)
    assert.equal(down.status, 503, down.body)
    assert.equal(down.headers['retry-after'], '1')
  },
)

void test(
  'Caddy as an unprivileged user in carlos-sockets reaches a nested tenant the pass made, and not its data',
  { timeout: 60_000 },
  async (t) => {
    const edge = await edgeUser()
    const bx = await box(t, 'nested')
    const caddy = await startCaddy(t, bx, edge)
    await assertGated(caddy.port, bx, 'caddy')
    await assertEdgeReach(bx, edge, caddy, 'caddy')
    assert.equal((await get(caddy.port, READY)).status, 200)
    // layoutd gone: still a retry.
    await bx.b.app.close()
    const down = await get(caddy.port, READY)
    assert.equal(down.status, 503, down.body)
    assert.equal(down.headers['retry-after'], '1')
  },
)

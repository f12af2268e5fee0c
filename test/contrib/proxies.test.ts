// contrib/proxy/: stock nginx (auth_request) and Caddy (forward_auth), run
// for real with the shipped configuration (its ports substituted) in front
// of a real agent on a loopback socket: a ready host is proxied to its
// instance's socket, a fenced one is told to retry (503 with Retry-After),
// a held one is refused, an unknown one is 404, no path reaches the client,
// and the proxy keeps its connections to layoutd; with layoutd down, each
// says retry rather than an error page.
import assert from 'node:assert/strict'
import { spawn, type ChildProcess } from 'node:child_process'
import fs from 'node:fs/promises'
import http from 'node:http'
import net from 'node:net'
import path from 'node:path'
import { test, type TestContext } from 'node:test'
import { fileURLToPath } from 'node:url'
import { flatPaths } from '../../src/domain/paths.js'
import { freePort } from '../helpers/agent-process.js'
import { addFlat, agentBox, type AgentBox } from '../helpers/agent.js'
import { until } from '../helpers/until.js'

const ROOT = fileURLToPath(new URL('../../../', import.meta.url))
const NGINX_CONF = path.join(ROOT, 'contrib/proxy/nginx-layoutd.conf')
const CADDYFILE = path.join(ROOT, 'contrib/proxy/Caddyfile')

const READY = 'ok.example.com'
const FENCED = 'moving.example.com'
const HELD = 'held.example.com'

interface Box {
  b: AgentBox
  agentPort: number
  /** Connections the agent accepted, counted on its side. */
  connections: () => number
  /** Headers the instance was sent, for each request it answered. */
  upstreamSaw: http.IncomingHttpHeaders[]
}

/** A real agent with a ready host (and its instance on the row's socket), a fenced one and a held one. */
async function box(t: TestContext): Promise<Box> {
  const b = await agentBox(t, { env: { CARLOS_LAYOUT_DEFAULT: 'flat' } })
  for (const host of [READY, FENCED, HELD]) await addFlat(b, host)
  // A hold marker that does not read back stands until an operator removes it (design §4.2).
  await fs.mkdir(path.join(b.config.dataDir, 'layout'), { recursive: true })
  await fs.writeFile(path.join(b.config.dataDir, 'layout', `${HELD}.hold`), 'not a marker')
  await b.agent.start()
  await until('the first run', () => b.agent.legState().lastRun !== null && !b.agent.legState().running)
  b.fence.fence([FENCED], 9)

  const upstreamSaw: http.IncomingHttpHeaders[] = []
  const socket = flatPaths(b.config, READY).socket
  await fs.mkdir(path.dirname(socket), { recursive: true })
  const instance = http.createServer((req, res) => {
    upstreamSaw.push(req.headers)
    res.end(`hello from ${req.headers.host ?? '?'}\n`)
  })
  await new Promise<void>((resolve) => instance.listen(socket, resolve))
  t.after(() => instance.close())

  let accepted = 0
  b.app.server.on('connection', () => accepted++)
  await b.app.listen({ host: '127.0.0.1', port: 0 })
  const agentPort = (b.app.server.address() as net.AddressInfo).port
  return { b, agentPort, connections: () => accepted, upstreamSaw }
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
  const child: ChildProcess = spawn(cmd, args, { env, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  child.stdout?.setEncoding('utf8').on('data', (s: string) => (out += s))
  child.stderr?.setEncoding('utf8').on('data', (s: string) => (out += s))
  t.after(async () => {
    if (child.exitCode !== null) return
    const gone = new Promise((resolve) => child.once('exit', resolve))
    child.kill('SIGTERM')
    await gone
  })
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

void test(
  'nginx auth_request with contrib/proxy/nginx-layoutd.conf gates, routes and keeps its connections',
  { timeout: 60_000 },
  async (t) => {
    const bx = await box(t)
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
        'user root;',
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
    await assertGated(port, bx, 'nginx')
    const errors = await fs.readFile(path.join(dir, 'error.log'), 'utf8')
    assert.doesNotMatch(errors, /auth request unexpected status/, 'every gate answer is one auth_request takes')
    // layoutd gone (down, or restarting without its socket unit): not a 500 error page, a retry.
    await bx.b.app.close()
    const down = await get(port, READY)
    assert.equal(down.status, 503, down.body)
    assert.equal(down.headers['retry-after'], '1')
  },
)

void test(
  'Caddy forward_auth with contrib/proxy/Caddyfile gates, routes, and takes the host in any case',
  { timeout: 60_000 },
  async (t) => {
    const bx = await box(t)
    const dir = path.join(bx.b.dir, 'caddy')
    await fs.mkdir(dir)
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
    const out = run(t, 'caddy', ['run', '--config', file, '--adapter', 'caddyfile'], env)
    await until(`caddy listening (${out()})`, () => listening(port))
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

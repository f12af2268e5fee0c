// The command line as a process (bin/layoutd runs dist/src/main.js): help on
// every command and subcommand, --version, usage errors, and a command that
// loads only what it uses.
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import fs, { readFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { MAIN_JS } from '../helpers/agent-process.js'

interface Ran {
  code: number
  out: string
  err: string
}

/**
 * Where a command here would look, were it to get that far (none does):
 * never the machine's ./data or an agent on the default port.
 */
const NOWHERE = {
  CARLOS_DATA_DIR: path.join(os.tmpdir(), 'layoutd-dispatch-unused', 'data'),
  CARLOS_DEPLOYMENT_DIR: path.join(os.tmpdir(), 'layoutd-dispatch-unused', 'deploy'),
  CARLOS_AGENT_LISTEN: '127.0.0.1:1',
}

/** How long one command may run before it is killed and fails: a bound, not a measure of speed. */
const RUN_MS = 60_000

function layoutd(
  args: readonly string[],
  env: Record<string, string> = {},
  nodeArgs: readonly string[] = [],
): Promise<Ran> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [...nodeArgs, MAIN_JS, ...args],
      { env: { PATH: process.env.PATH, ...NOWHERE, ...env }, timeout: RUN_MS, killSignal: 'SIGKILL' },
      (err, out, errText) => {
        resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : -1, out, err: errText })
      },
    )
  })
}

const HELPS = [
  ['serve'],
  ['status'],
  ['converge'],
  ['routes'],
  ['routes', 'add'],
  ['routes', 'list'],
  ['routes', 'rm'],
  ['intent'],
  ['intent', 'migrate'],
  ['intent', 'revert'],
  ['intent', 'prune'],
  ['intent', 'status'],
  ['fleet'],
  ['fleet', 'status'],
  ['journal'],
  ['journal', 'list'],
  ['journal', 'show'],
  ['journal', 'release'],
  ['registry'],
  ['registry', 'backup'],
  ['registry', 'restore'],
]

void test('--help and -h work on every command and subcommand, exit 0, with a bad value in the environment', async () => {
  const bad = { CARLOS_LAYOUT_POLL: '5' }
  const top = await layoutd(['--help'], bad)
  assert.equal(top.code, 0, top.err)
  assert.match(top.out, /^usage:\n {2}layoutd serve/)
  await Promise.all(
    HELPS.flatMap((cmd) =>
      ['--help', '-h'].map(async (flag) => {
        const r = await layoutd([...cmd, flag], bad)
        assert.equal(r.code, 0, `${cmd.join(' ')} ${flag}: ${r.err}`)
        assert.match(r.out, new RegExp(`^usage:\\n {2}layoutd ${cmd[0]}`), `${cmd.join(' ')} ${flag}`)
        assert.equal(r.err, '')
      }),
    ),
  )
})

void test('--version prints the version of package.json', async () => {
  const pkg = JSON.parse(await readFile(new URL('../../../package.json', import.meta.url), 'utf8')) as {
    version: string
  }
  const r = await layoutd(['--version'])
  assert.equal(r.code, 0)
  assert.equal(r.out, `${pkg.version}\n`)
})

void test('no command prints the usage and exits 2; an unknown one is a usage error; a bad environment exits 1', async () => {
  const none = await layoutd([])
  assert.equal(none.code, 2)
  assert.match(none.out, /^usage:\n/)
  const unknown = await layoutd(['frob'])
  assert.equal(unknown.code, 2)
  assert.match(unknown.err, /^layoutd: unknown command "frob"\nusage:\n/)
  const serve = await layoutd(['serve', 'now'])
  assert.equal(serve.code, 2)
  assert.match(serve.err, /^layoutd: serve takes no arguments\nusage:\n/)
  const env = await layoutd(['routes', 'list'], { CARLOS_LAYOUT_POLL: '5' })
  assert.equal(env.code, 1)
  assert.equal(env.err, 'layoutd: CARLOS_LAYOUT_POLL=5: a duration like 500ms, 5s, 10m, 1h\n')
})

// Records every module the process resolves, on stderr: Node 24's
// in-thread hooks (module.registerHooks), which see require() as well as
// import, with no loader thread (module.register is deprecated on 26).
const TRACE = `data:text/javascript,${encodeURIComponent(`
import { registerHooks } from 'node:module'
registerHooks({ resolve(s, c, next) { const r = next(s, c); process.stderr.write('loaded ' + r.url + '\\n'); return r } })
`)}`

void test('layoutd status and converge load node:http, not undici, the agent, Fastify, pino, SQLite or TypeBox; routes loads SQLite', async () => {
  const heavy = [
    '/node_modules/undici/',
    '/node_modules/fastify/',
    '/node_modules/typebox/',
    '/node_modules/pino',
    '/node_modules/better-sqlite3/',
    '/src/agent',
    '/src/server.js',
  ]
  for (const command of ['status', 'converge']) {
    const r = await layoutd([command, '--url', 'http://127.0.0.1:1'], {}, ['--import', TRACE])
    assert.equal(r.code, 1)
    const loaded = r.err.split('\n').filter((l) => l.startsWith('loaded '))
    assert.ok(
      loaded.some((l) => l.includes(`/cli/commands/${command}.js`)),
      r.err,
    )
    assert.ok(
      loaded.some((l) => l === 'loaded node:http'),
      r.err,
    )
    for (const h of heavy) assert.equal(loaded.filter((l) => l.includes(h)).length, 0, `${command} loaded ${h}`)
  }
  // The trace sees a heavy module when one is loaded: routes opens the registry.
  const data = await fs.mkdtemp(path.join(os.tmpdir(), 'layoutd-trace-'))
  try {
    const r = await layoutd(['routes', 'list'], { CARLOS_DATA_DIR: data }, ['--import', TRACE])
    assert.ok(
      r.err.split('\n').some((l) => l.startsWith('loaded ') && l.includes('/node_modules/better-sqlite3/')),
      r.err,
    )
  } finally {
    await fs.rm(data, { recursive: true, force: true })
  }
})

void test('layoutd serve loads TypeBox as one file, and neither undici nor the etcd client on a box whose deploy store is a directory', async () => {
  const data = await fs.mkdtemp(path.join(os.tmpdir(), 'layoutd-trace-'))
  try {
    // Beyond loopback with no token: serve refuses once its modules are loaded, before it opens anything.
    const env = {
      CARLOS_DATA_DIR: data,
      CARLOS_DEPLOYMENT_DIR: path.join(data, 'deploy'),
      CARLOS_AGENT_LISTEN: '0.0.0.0:1',
    }
    const r = await layoutd(['serve'], env, ['--import', TRACE])
    assert.equal(r.code, 1, r.err)
    const loaded = r.err.split('\n').filter((l) => l.startsWith('loaded '))
    assert.ok(
      loaded.some((l) => l.endsWith('/src/server.js')),
      r.err,
    )
    assert.ok(
      loaded.some((l) => l.endsWith('/src/domain/typebox.js')),
      r.err,
    )
    for (const h of ['/node_modules/typebox/', '/node_modules/undici/', '/deploy-etcd/'])
      assert.equal(loaded.filter((l) => l.includes(h)).length, 0, `serve loaded ${h}`)
  } finally {
    await fs.rm(data, { recursive: true, force: true })
  }
})

void test('bin/layoutd with no build beside it says to run npm ci or npm run build, with no stack', async () => {
  const root = await fs.mkdtemp(path.join(os.tmpdir(), 'layoutd-nobuild-'))
  try {
    await fs.mkdir(path.join(root, 'bin'))
    const bin = path.join(root, 'bin', 'layoutd')
    await fs.copyFile(fileURLToPath(new URL('../../../bin/layoutd', import.meta.url)), bin)
    const r = await new Promise<Ran>((resolve) => {
      execFile(
        process.execPath,
        [bin, 'status'],
        { env: { PATH: process.env.PATH, ...NOWHERE }, timeout: RUN_MS, killSignal: 'SIGKILL' },
        (err, out, errText) => {
          resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : -1, out, err: errText })
        },
      )
    })
    assert.equal(r.code, 1)
    assert.match(r.err, /^layoutd: Cannot find module '.*\/dist\/src\/main\.js' imported from .*\n/)
    assert.match(
      r.err,
      /\nlayoutd: the build or a dependency is missing: run `\.\/nodew npm ci` \(installs and builds\) or `npm run build` in .*layoutd-nobuild-.*\/\n$/,
    )
    assert.doesNotMatch(r.err, /^\s+at /m)
  } finally {
    await fs.rm(root, { recursive: true, force: true })
  }
})

void test('layoutd --help lists every routes subcommand, routes import among them, and status --problems', async () => {
  const top = await layoutd(['--help'], {})
  assert.equal(top.code, 0)
  assert.match(top.out, /layoutd routes import FILE\|- \[--skip-existing\]/)
  assert.match(top.out, /--problems/)
})

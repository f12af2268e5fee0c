// The environment as one table: defaults, durations, and a refusal that
// names the variable, the value and what is wanted.
import assert from 'node:assert/strict'
import path from 'node:path'
import { test } from 'node:test'
import { configWarnings, ENVIRONMENT, loadConfig, parseDuration, unknownVariables } from '../src/config.js'
import { ConfigError, exitStatusOf } from '../src/errors.js'

void test('the embedded defaults: ./data, ./deploy, loopback, claims, the seed durations', () => {
  const c = loadConfig({})
  assert.equal(c.dataDir, path.resolve('data'))
  assert.equal(c.runDir, path.resolve('data', 'run'))
  assert.equal(c.deploymentDir, path.resolve('deploy'))
  assert.deepEqual(c.listen, { host: '127.0.0.1', port: 9740 })
  assert.equal(c.activator, 'claims')
  assert.equal(c.pollMs, 5_000)
  assert.equal(c.retryMs, 600_000)
  assert.equal(c.graceMs, 3_600_000)
  assert.equal(c.probeEveryMs, 300_000)
  assert.deepEqual(c.nestedMounts, [path.resolve('data')])
  assert.deepEqual(c.etcdEndpoints, [])
})

void test('durations are 500ms, 5s, 10m, 1h', () => {
  assert.equal(parseDuration('500ms', 'X'), 500)
  assert.equal(parseDuration('5s', 'X'), 5_000)
  assert.equal(parseDuration('10m', 'X'), 600_000)
  assert.equal(parseDuration('1h', 'X'), 3_600_000)
  assert.throws(() => parseDuration('0s', 'X'), { message: 'X=0s: a duration above zero, like 500ms, 5s, 10m, 1h' })
})

void test('one duration rule: every duration variable refuses with the same friendly message, and nothing else comes first', () => {
  for (const env of ['CARLOS_LAYOUT_POLL', 'CARLOS_LAYOUT_RETRY', 'CARLOS_LAYOUT_AWAKE_GRACE', 'CARLOS_PROBE_EVERY']) {
    assert.throws(() => loadConfig({ [env]: '5' }), {
      name: 'ConfigError',
      message: `${env}=5: a duration like 500ms, 5s, 10m, 1h`,
    })
    assert.throws(() => loadConfig({ [env]: '1.5s' }), { message: `${env}=1.5s: a duration like 500ms, 5s, 10m, 1h` })
    assert.throws(() => loadConfig({ [env]: '0ms' }), {
      message: `${env}=0ms: a duration above zero, like 500ms, 5s, 10m, 1h`,
    })
  }
})

void test('a refused environment is a coded error of the catalogue: config_invalid, exit status 1', () => {
  assert.throws(
    () => loadConfig({ CARLOS_LAYOUT_POLL: '5' }),
    (err: unknown) => err instanceof ConfigError && err.code === 'config_invalid' && exitStatusOf(err) === 1,
  )
})

void test('every variable of the table is a CARLOS_* variable with a description, read once', () => {
  const names = Object.values(ENVIRONMENT).map((v) => v.env)
  assert.equal(new Set(names).size, names.length)
  for (const v of Object.values(ENVIRONMENT)) {
    assert.match(v.env, /^CARLOS_[A-Z_]+$/)
    assert.ok(v.description.length > 0, v.env)
  }
})

void test('CARLOS_BOX is a box label: upper case folded, as intent --box folds it', () => {
  assert.equal(loadConfig({ CARLOS_BOX: 'WEB-01' }).box, 'web-01')
  assert.equal(loadConfig({ CARLOS_BOX: 'kass-1' }).box, 'kass-1')
})

void test('a refused value names the variable and the value', () => {
  // One shape, NAME=value: what is wanted; the value is quoted only where it would not read on its own.
  const cases: Array<[Record<string, string>, string]> = [
    [{ CARLOS_LAYOUT_POLL: '5' }, 'CARLOS_LAYOUT_POLL=5: a duration like 500ms, 5s, 10m, 1h'],
    [
      { CARLOS_LAYOUT_AWAKE_GRACE: 'an hour' },
      'CARLOS_LAYOUT_AWAKE_GRACE="an hour": a duration like 500ms, 5s, 10m, 1h',
    ],
    [{ CARLOS_ACTIVATOR: 'systemd' }, 'CARLOS_ACTIVATOR=systemd: one of claims, none'],
    [{ CARLOS_LOG_LEVEL: 'loud' }, 'CARLOS_LOG_LEVEL=loud: one of trace, debug, info, warn, error, fatal, silent'],
    [
      { CARLOS_AGENT_LISTEN: 'localhost' },
      'CARLOS_AGENT_LISTEN=localhost: host:port, like 127.0.0.1:9740 or [::1]:9740',
    ],
    [{ CARLOS_AGENT_LISTEN: '127.0.0.1:70000' }, 'CARLOS_AGENT_LISTEN=127.0.0.1:70000: port 70000 is out of range'],
    [
      { CARLOS_DEPLOYMENT_ETCD: 'http://a:2379,etcd-1:2379' },
      'CARLOS_DEPLOYMENT_ETCD=http://a:2379,etcd-1:2379: "etcd-1:2379" is not an http(s) URL',
    ],
    [{ CARLOS_ACTIVATOR_URL: 'not a url' }, 'CARLOS_ACTIVATOR_URL="not a url": an http(s) URL'],
    [{ CARLOS_EDGE_RELOAD_URL: 'ftp://edge' }, 'CARLOS_EDGE_RELOAD_URL=ftp://edge: an http(s) URL'],
    [{ CARLOS_NESTED_MOUNTS: '/a,none' }, 'CARLOS_NESTED_MOUNTS=/a,none: none stands alone'],
    [
      { CARLOS_BOX: 'web_01' },
      'CARLOS_BOX=web_01: a box label, as a hostname is (label "web_01" is not a-z, 0-9 and inner hyphens); set CARLOS_BOX',
    ],
  ]
  for (const [env, message] of cases)
    assert.throws(() => loadConfig(env), { name: 'ConfigError', message }, JSON.stringify(env))
})

void test('an empty variable counts as unset; CARLOS_NESTED_MOUNTS=none is the only way to require no mount', () => {
  const empty = loadConfig({ CARLOS_NESTED_MOUNTS: '', CARLOS_LAYOUT_POLL: '' })
  assert.deepEqual(empty.nestedMounts, [path.resolve('data')])
  assert.equal(empty.pollMs, 5_000)
  assert.deepEqual(loadConfig({ CARLOS_NESTED_MOUNTS: 'none' }).nestedMounts, [])
  assert.deepEqual(loadConfig({ CARLOS_NESTED_MOUNTS: '/m1, /m2' }).nestedMounts, ['/m1', '/m2'])
})

void test('CARLOS_LAYOUT_DEFAULT is not refused at boot: an invalid value is reported by the rule', () => {
  assert.equal(loadConfig({ CARLOS_LAYOUT_DEFAULT: 'nestd' }).layoutDefault, 'nestd')
})

void test('listen takes a bracketed IPv6 address; the log level and activator keep their words', () => {
  assert.deepEqual(loadConfig({ CARLOS_AGENT_LISTEN: '[::1]:9741' }).listen, { host: '::1', port: 9741 })
  const c = loadConfig({ CARLOS_LOG_LEVEL: 'debug', CARLOS_ACTIVATOR: 'none' })
  assert.equal(c.logLevel, 'debug')
  assert.equal(c.activator, 'none')
})

void test('etcd endpoints are a comma-separated list', () => {
  assert.deepEqual(loadConfig({ CARLOS_DEPLOYMENT_ETCD: 'http://a:2379, http://b:2379' }).etcdEndpoints, [
    'http://a:2379',
    'http://b:2379',
  ])
})

void test('the default mount is the data dir, whole, even when the data dir names a comma or is called none', () => {
  assert.deepEqual(loadConfig({ CARLOS_DATA_DIR: '/srv/a,b' }).nestedMounts, ['/srv/a,b'])
  assert.deepEqual(loadConfig({ CARLOS_DATA_DIR: '/srv/none' }).nestedMounts, ['/srv/none'])
})

void test('a bearer token shorter than 16 bytes, or not one header word, is refused at boot, naming the variable but never the token', () => {
  for (const token of ['short', 'x'.repeat(15), `${'x'.repeat(20)}\n`, `two ${'words'.repeat(4)}`]) {
    assert.throws(
      () => loadConfig({ CARLOS_AGENT_TOKEN: token }),
      (err: unknown) => {
        assert.ok(err instanceof ConfigError)
        assert.match(err.message, /^CARLOS_AGENT_TOKEN=\(hidden, \d+ bytes\): /)
        assert.ok(!err.message.includes(token.trim()), `the token is not echoed: ${err.message}`)
        return true
      },
      JSON.stringify(token),
    )
  }
  assert.throws(() => loadConfig({ CARLOS_AGENT_TOKEN: 'short' }), {
    message: 'CARLOS_AGENT_TOKEN=(hidden, 5 bytes): a bearer token of at least 16 bytes',
  })
  assert.equal(loadConfig({ CARLOS_AGENT_TOKEN: 'x'.repeat(16) }).token, 'x'.repeat(16))
  assert.equal(loadConfig({}).token, '', 'unset: no token, loopback only')
})

void test('CARLOS_BUILD takes a version, a commit id or dev without a word; unset is none', () => {
  for (const build of ['v0.25.0', '0.24.9', 'v0.25.0-rc.1', 'v1.2.3+build.7', 'dev', 'deadbee', 'a'.repeat(40), '']) {
    const config = loadConfig({ CARLOS_BUILD: build })
    assert.equal(config.build, build)
    assert.deepEqual(configWarnings(config), [], build)
  }
  assert.equal(loadConfig({}).build, '')
})

void test('a CARLOS_BUILD the floor cannot place is taken as given, with a warning naming it', () => {
  // The seed passes these (design §5.2): a mis-tagged build must not take a box down.
  for (const build of ['v0.25', '2024.06.01', 'release-0.25', 'latest', 'abc12']) {
    const config = loadConfig({ CARLOS_BUILD: build })
    assert.equal(config.build, build)
    const [warning, ...more] = configWarnings(config)
    assert.deepEqual(more, [], build)
    assert.ok(warning?.startsWith(`CARLOS_BUILD=${build} cannot be placed against the layout floor`), warning)
  }
  assert.match(configWarnings(loadConfig({ CARLOS_BUILD: 'v 0.25' }))[0] ?? '', /^CARLOS_BUILD="v 0\.25" /)
})

void test('a user or password in an etcd endpoint is refused, naming the variable, never the password', () => {
  for (const value of [
    'http://layoutd:pa55-word@127.0.0.1:2379',
    'https://127.0.0.1:2379,https://root:pa55-word@10.0.0.2:2379',
    'http://layoutd@127.0.0.1:2379',
    'layoutd:pa55-word@127.0.0.1:2379',
  ]) {
    assert.throws(
      () => loadConfig({ CARLOS_DEPLOYMENT_ETCD: value }),
      (err: unknown) => {
        assert.ok(err instanceof ConfigError)
        assert.match(err.message, /^CARLOS_DEPLOYMENT_ETCD=\(hidden/)
        assert.match(err.message, /CARLOS_ETCD_USER/)
        assert.match(err.message, /CARLOS_ETCD_PASSWORD_FILE/)
        assert.ok(!err.message.includes('pa55-word'), err.message)
        assert.ok(!err.message.includes('layoutd:'), err.message)
        return true
      },
      value,
    )
  }
  assert.deepEqual(loadConfig({ CARLOS_DEPLOYMENT_ETCD: 'http://127.0.0.1:2379' }).etcdEndpoints, [
    'http://127.0.0.1:2379',
  ])
})

void test('a close misspelling of a known variable is refused naming both; any other CARLOS_* is named by unknownVariables', () => {
  for (const [slip, meant] of [
    ['CARLOS_DATADIR', 'CARLOS_DATA_DIR'],
    ['CARLOS_DATA_DIRS', 'CARLOS_DATA_DIR'],
    ['CARLOS_AGENTTOKEN', 'CARLOS_AGENT_TOKEN'],
    ['CARLOS_LAYOUT_DEFUALT', 'CARLOS_LAYOUT_DEFAULT'],
    ['CARLOS_DEPLOYMENTETCD', 'CARLOS_DEPLOYMENT_ETCD'],
    ['CARLOS_AGENT_TOKEN_FIEL', 'CARLOS_AGENT_TOKEN_FILE'],
  ] as const) {
    assert.throws(
      () => loadConfig({ [slip]: '/data' }),
      {
        name: 'ConfigError',
        message: `${slip} is not a layoutd variable; did you mean ${meant}? (unset ${slip}, or rename it)`,
      },
      slip,
    )
  }
  // Not a slip of any: read on, and named for the start's warning.
  const environ = { CARLOS_FROBNICATE: '1', CARLOS_SOMETHING_ELSE: 'x', CARLOS_EMPTY_ONE: '', NOT_CARLOS: '1' }
  assert.doesNotThrow(() => loadConfig(environ))
  assert.deepEqual(unknownVariables(environ), ['CARLOS_FROBNICATE', 'CARLOS_SOMETHING_ELSE'])
  // Every variable of the table, and the instance key the activator hands a tenant, is known.
  const known = Object.fromEntries(Object.values(ENVIRONMENT).map((v) => [v.env, 'x']))
  assert.deepEqual(unknownVariables({ ...known, CARLOS_INSTANCE_KEY: 'k', CARLOS_BUILD: 'v0.25.0' }), [])
  assert.equal(loadConfig({ CARLOS_BUILD: 'v0.25.0' }).build, 'v0.25.0')
})

void test('every CARLOS_* name the deployment, the image, the benches and the test harness set is known', async () => {
  const fs = await import('node:fs')
  const root = path.resolve(import.meta.dirname, '../..')
  const names = new Set<string>()
  const scan = (p: string): void => {
    const st = fs.statSync(p, { throwIfNoEntry: false })
    if (st === undefined) return
    if (st.isDirectory()) {
      for (const name of fs.readdirSync(p)) scan(path.join(p, name))
      return
    }
    for (const m of fs.readFileSync(p, 'utf8').matchAll(/\bCARLOS_[A-Z0-9]+(?:_[A-Z0-9]+)*\b/g)) names.add(m[0])
  }
  for (const p of ['src', 'contrib', 'bench', 'scripts', 'bin', 'test/helpers', 'Dockerfile', 'README.md'])
    scan(path.join(root, p))
  assert.ok(names.has('CARLOS_BUILD') && names.has('CARLOS_DATA_DIR'), [...names].join(' '))
  assert.deepEqual(
    unknownVariables(Object.fromEntries([...names].map((n) => [n, 'x']))),
    [],
    'a name the repository sets that layoutd would warn of',
  )
  const read = new Set(Object.values(ENVIRONMENT).map((v) => v.env))
  for (const name of [...names].filter((n) => !read.has(n)))
    assert.doesNotThrow(() => loadConfig({ [name]: 'x' }), `${name} is taken for a slip of a variable`)
})

// The environment as one schema: defaults, durations, and a refusal that
// names the variable and the value.
import assert from 'node:assert/strict'
import path from 'node:path'
import { test } from 'node:test'
import { ConfigError, loadConfig, parseDuration } from '../src/config.js'

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
  assert.deepEqual(c.nestedMounts, [path.resolve('data', 'nested')])
  assert.deepEqual(c.etcdEndpoints, [])
})

void test('durations are 500ms, 5s, 10m, 1h', () => {
  assert.equal(parseDuration('X', '500ms'), 500)
  assert.equal(parseDuration('X', '5s'), 5_000)
  assert.equal(parseDuration('X', '10m'), 600_000)
  assert.equal(parseDuration('X', '1h'), 3_600_000)
  assert.throws(() => parseDuration('X', '0s'), /X="0s" must be a positive duration/)
})

void test('a refused value names the variable and the value', () => {
  const cases: Array<[Record<string, string>, RegExp]> = [
    [{ CARLOS_LAYOUT_POLL: '5' }, /^CARLOS_LAYOUT_POLL="5" is refused/],
    [{ CARLOS_LAYOUT_AWAKE_GRACE: 'an hour' }, /^CARLOS_LAYOUT_AWAKE_GRACE="an hour" is refused/],
    [{ CARLOS_ACTIVATOR: 'systemd' }, /^CARLOS_ACTIVATOR="systemd" is refused/],
    [{ CARLOS_AGENT_LISTEN: 'localhost' }, /^CARLOS_AGENT_LISTEN="localhost" is refused/],
    [{ CARLOS_AGENT_LISTEN: '127.0.0.1:70000' }, /CARLOS_AGENT_LISTEN="127.0.0.1:70000": port 70000 is out of range/],
    [{ CARLOS_DEPLOYMENT_ETCD: 'etcd-1:2379' }, /CARLOS_DEPLOYMENT_ETCD: "etcd-1:2379" is not http\(s\)/],
    [{ CARLOS_ACTIVATOR_URL: 'not a url' }, /CARLOS_ACTIVATOR_URL="not a url" is not an http\(s\) URL/],
    [{ CARLOS_NESTED_MOUNTS: '/a,none' }, /CARLOS_NESTED_MOUNTS="\/a,none": none stands alone/],
  ]
  for (const [env, want] of cases) assert.throws(() => loadConfig(env), (err: unknown) => err instanceof ConfigError && want.test(err.message), JSON.stringify(env))
})

void test('an empty variable counts as unset; CARLOS_NESTED_MOUNTS=none is the only way to require no mount', () => {
  const empty = loadConfig({ CARLOS_NESTED_MOUNTS: '', CARLOS_LAYOUT_POLL: '' })
  assert.deepEqual(empty.nestedMounts, [path.resolve('data', 'nested')])
  assert.equal(empty.pollMs, 5_000)
  assert.deepEqual(loadConfig({ CARLOS_NESTED_MOUNTS: 'none' }).nestedMounts, [])
  assert.deepEqual(loadConfig({ CARLOS_NESTED_MOUNTS: '/m1, /m2' }).nestedMounts, ['/m1', '/m2'])
})

void test('CARLOS_LAYOUT_DEFAULT is not refused at boot: an invalid value is reported by the rule', () => {
  assert.equal(loadConfig({ CARLOS_LAYOUT_DEFAULT: 'nestd' }).layoutDefault, 'nestd')
})

void test('etcd endpoints are a comma-separated list', () => {
  assert.deepEqual(loadConfig({ CARLOS_DEPLOYMENT_ETCD: 'http://a:2379, http://b:2379' }).etcdEndpoints, ['http://a:2379', 'http://b:2379'])
})

// The environment as a hostile (or careless) operator writes it: bad
// CARLOS_* values are refused before anything is opened, naming the variable
// and the value, and the data root stays as it was (not even a registry is
// made); values that are valid but say "do not move" (an invalid default,
// an old build, a symlinked D/nested) move nothing and say why.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { after, before, test } from 'node:test'
import { dispatch } from '../../src/cli/dispatch.js'
import { AgentProcess, freePort, MAIN_JS, makeSandbox, sandboxEnv, type Sandbox } from '../helpers/agent-process.js'
import { assertUnchanged, fingerprint, type Fingerprint } from '../helpers/fingerprint.js'
import { ended, spawnGroup } from '../helpers/child.js'
import { Sink } from '../helpers/sink.js'
import { addFlat, converge, fileScope, hostileBox, recordIntent, report } from './box.js'
import { packageVersion } from '../../src/infra/package-version.js'
import { tmpDir } from '../helpers/tmp.js'
import { until } from '../helpers/until.js'

const file = fileScope(after)
let dataDir: string
let env: NodeJS.ProcessEnv

before(async () => {
  const root = await tmpDir(file, 'layoutd-hostile-')
  dataDir = path.join(root, 'data')
  await fs.mkdir(dataDir)
  await fs.writeFile(path.join(dataDir, 'tenant-file'), 'kept')
  env = { CARLOS_DATA_DIR: dataDir, CARLOS_DEPLOYMENT_DIR: path.join(root, 'deploy'), CARLOS_BOX: 'kass-1' }
})

/** `layoutd routes list` under env + bad: exit 1, stderr naming the variable, and no registry made. */
async function refusedEnv(bad: NodeJS.ProcessEnv, stderr: RegExp): Promise<void> {
  const before = fingerprint(dataDir)
  const out = new Sink()
  const err = new Sink()
  const code = await dispatch(['routes', 'list'], { environ: { ...env, ...bad }, stdout: out, stderr: err })
  assert.equal(code, 1, `stdout: ${out.text}\nstderr: ${err.text}`)
  assert.match(err.text, stderr)
  assert.match(err.text, /^layoutd: /, 'the program refuses it, not the command')
  assertUnchanged(before, fingerprint(dataDir))
}

const CASES: Array<[string, NodeJS.ProcessEnv, RegExp]> = [
  ['a poll with no unit', { CARLOS_LAYOUT_POLL: '5' }, /CARLOS_LAYOUT_POLL=5: a duration like 500ms, 5s, 10m, 1h/],
  ['a retry of zero', { CARLOS_LAYOUT_RETRY: '0s' }, /CARLOS_LAYOUT_RETRY=0s: a duration above zero/],
  ['a negative grace', { CARLOS_LAYOUT_AWAKE_GRACE: '-1h' }, /CARLOS_LAYOUT_AWAKE_GRACE=-1h: a duration/],
  [
    'a probe interval past any clock',
    { CARLOS_PROBE_EVERY: '99999999999999999h' },
    /CARLOS_PROBE_EVERY=99999999999999999h: a duration above zero/,
  ],
  [
    'a listen port out of range',
    { CARLOS_AGENT_LISTEN: '127.0.0.1:99999' },
    /CARLOS_AGENT_LISTEN=127\.0\.0\.1:99999: port 99999 is out of range/,
  ],
  [
    'a listen address with a shell in it',
    { CARLOS_AGENT_LISTEN: '127.0.0.1:9740; rm -rf /' },
    /CARLOS_AGENT_LISTEN="127\.0\.0\.1:9740; rm -rf \/": host:port/,
  ],
  ['an activator that is not one', { CARLOS_ACTIVATOR: 'maybe' }, /CARLOS_ACTIVATOR=maybe: one of claims, none/],
  [
    'an activator URL that is a file',
    { CARLOS_ACTIVATOR_URL: 'file:///etc/passwd' },
    /CARLOS_ACTIVATOR_URL=file:\/\/\/etc\/passwd: an http\(s\) URL/,
  ],
  [
    'an edge reload URL that is script',
    { CARLOS_EDGE_RELOAD_URL: 'javascript:alert(1)' },
    /CARLOS_EDGE_RELOAD_URL=javascript:alert\(1\): an http\(s\) URL/,
  ],
  [
    'an etcd endpoint that is not http',
    { CARLOS_DEPLOYMENT_ETCD: 'http://127.0.0.1:2379,gopher://x' },
    /CARLOS_DEPLOYMENT_ETCD=.*"gopher:\/\/x" is not an http\(s\) URL/,
  ],
  [
    'none beside a mount',
    { CARLOS_NESTED_MOUNTS: 'none,/data/nested' },
    /CARLOS_NESTED_MOUNTS=none,\/data\/nested: none stands alone/,
  ],
  ['a log level pino does not know', { CARLOS_LOG_LEVEL: 'verbose' }, /CARLOS_LOG_LEVEL=verbose: one of trace/],
]

for (const [what, bad, why] of CASES) {
  void test(`refused before anything is opened: ${what}`, async () => {
    await refusedEnv(bad, why)
  })
}

void test('a CARLOS_BOX that is no box label is refused, naming it', async () => {
  await refusedEnv({ CARLOS_BOX: '../../etc' }, /CARLOS_BOX=/)
  await refusedEnv({ CARLOS_BOX: 'kass-1\nmode: flat' }, /CARLOS_BOX=/)
})

void test('CARLOS_DATA_DIR naming a file: exit 1, naming it, the file untouched', async () => {
  const before = fingerprint(dataDir)
  const err = new Sink()
  const code = await dispatch(['routes', 'list'], {
    environ: { ...env, CARLOS_DATA_DIR: path.join(dataDir, 'tenant-file') },
    stdout: new Sink(),
    stderr: err,
  })
  assert.equal(code, 1, err.text)
  assert.match(err.text, /tenant-file/)
  assertUnchanged(before, fingerprint(dataDir))
})

// ---- serve, for real ------------------------------------------------------------

/** Runs `layoutd serve` until it exits or says it listens (then it is killed); answers which, and its output. */
async function serveOutcome(
  sb: Sandbox,
  extra: Record<string, string>,
): Promise<{ exit: number | null; listening: boolean; output: string }> {
  const child = spawnGroup(process.execPath, [MAIN_JS, 'serve'], {
    env: sandboxEnv(sb, extra),
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  let listening = false
  const seen = (s: string): void => {
    output += s
    if (!listening && output.includes('Server listening at')) {
      listening = true
      child.kill('SIGKILL')
    }
  }
  child.stdout?.setEncoding('utf8').on('data', seen)
  child.stderr?.setEncoding('utf8').on('data', seen)
  const { code } = await ended(child, 'layoutd serve').catch((err: unknown) => {
    throw new Error(`${(err as Error).message}; its output:\n${output}`)
  })
  return { exit: listening ? null : code, listening, output }
}

void test('serve beyond loopback without a token: exit 1 naming the address, no registry made', async (t) => {
  const sb = await makeSandbox(await tmpDir(t, 'layoutd-hostile-'), 'kass-1')
  const before = fingerprint(sb.dataDir)
  const r = await serveOutcome(sb, { CARLOS_AGENT_LISTEN: `0.0.0.0:${await freePort()}` })
  assert.equal(r.listening, false)
  assert.equal(r.exit, 1)
  assert.match(r.output, /CARLOS_AGENT_LISTEN=0\.0\.0\.0:\d+ is beyond loopback; set CARLOS_AGENT_TOKEN/)
  assertUnchanged(before, fingerprint(sb.dataDir))
})

void test('serve with a bad value: exit 1 naming it, no registry made', async (t) => {
  const sb = await makeSandbox(await tmpDir(t, 'layoutd-hostile-'), 'kass-1')
  const before = fingerprint(sb.dataDir)
  const r = await serveOutcome(sb, { CARLOS_LAYOUT_POLL: 'often' })
  assert.equal(r.exit, 1)
  assert.match(r.output, /^layoutd: CARLOS_LAYOUT_POLL=often: a duration/m)
  assertUnchanged(before, fingerprint(sb.dataDir))
})

void test('serve with a bearer token under 16 bytes is refused at boot, naming the variable', async (t) => {
  const sb = await makeSandbox(await tmpDir(t, 'layoutd-hostile-'), 'kass-1')
  const before = fingerprint(sb.dataDir)
  const r = await serveOutcome(sb, {
    CARLOS_AGENT_LISTEN: `127.0.0.1:${await freePort()}`,
    CARLOS_AGENT_TOKEN: 'short',
  })
  assert.equal(r.listening, false, 'it must not listen')
  assert.notEqual(r.exit, 0)
  assert.match(r.output, /CARLOS_AGENT_TOKEN/)
  assert.doesNotMatch(r.output, /short/, 'the token itself is never printed')
  assertUnchanged(before, fingerprint(sb.dataDir))
})

void test('serve with a password in the etcd URL: exit 1 naming the variable, the password in no output', async (t) => {
  const sb = await makeSandbox(await tmpDir(t, 'layoutd-hostile-'), 'kass-1')
  const before = fingerprint(sb.dataDir)
  const password = 'hunter2-Zq9pW'
  const r = await serveOutcome(sb, {
    CARLOS_AGENT_LISTEN: `127.0.0.1:${await freePort()}`,
    CARLOS_DEPLOYMENT_ETCD: `http://layoutd:${password}@127.0.0.1:2379`,
  })
  assert.equal(r.listening, false, 'it must not listen')
  assert.equal(r.exit, 1)
  assert.match(r.output, /^layoutd: CARLOS_DEPLOYMENT_ETCD=\(hidden/m)
  assert.match(r.output, /CARLOS_ETCD_USER/)
  assert.match(r.output, /CARLOS_ETCD_PASSWORD_FILE/)
  assert.ok(!r.output.includes(password), `the password is in no output: ${r.output}`)
  assertUnchanged(before, fingerprint(sb.dataDir))

  // Nor does a command print it.
  const out = new Sink()
  const err = new Sink()
  const environ = { ...sandboxEnv(sb), CARLOS_DEPLOYMENT_ETCD: `https://u:${password}@etcd.example:2379` }
  assert.equal(await dispatch(['intent', 'status'], { environ, stdout: out, stderr: err }), 1)
  assert.match(err.text, /CARLOS_DEPLOYMENT_ETCD/)
  assert.ok(!(out.text + err.text).includes(password), err.text)
})

void test('serve with a misspelt variable: exit 1 naming it and the variable meant; an unknown one is a warning', async (t) => {
  const sb = await makeSandbox(await tmpDir(t, 'layoutd-hostile-'), 'kass-1')
  const before = fingerprint(sb.dataDir)
  const r = await serveOutcome(sb, { CARLOS_DATADIR: '/data', CARLOS_AGENT_LISTEN: `127.0.0.1:${await freePort()}` })
  assert.equal(r.listening, false, 'it must not serve an empty ./data')
  assert.equal(r.exit, 1)
  assert.match(r.output, /^layoutd: CARLOS_DATADIR is not a layoutd variable; did you mean CARLOS_DATA_DIR\?/m)
  assertUnchanged(before, fingerprint(sb.dataDir))

  const agent = await AgentProcess.start(sb, { env: { CARLOS_FROBNICATE: 'yes' } })
  t.after(() => agent.stop())
  await agent.waitReady()
  await until('the warning', () => /"variable":"CARLOS_FROBNICATE"/.test(agent.tail()))
  const line = agent
    .tail()
    .split('\n')
    .find((l) => l.includes('"variable":"CARLOS_FROBNICATE"'))
  assert.match(line ?? '', /"level":40/, 'a warning')
  assert.match(line ?? '', /CARLOS_FROBNICATE is set but is no layoutd variable/)
})

void test('serve with a CARLOS_BUILD the floor cannot place: a warning, and build_info carries it', async (t) => {
  const sb = await makeSandbox(await tmpDir(t, 'layoutd-hostile-'), 'kass-1')
  const agent = await AgentProcess.start(sb, { env: { CARLOS_BUILD: 'release-0.25' } })
  t.after(() => agent.stop())
  await agent.waitReady()
  const version = await packageVersion()
  assert.equal(await agent.metric(`carlos_layout_build_info{version="${version}",build="release-0.25"}`), 1)
  await until('the warning', () => /"build":"release-0.25"/.test(agent.tail()))
  const line = agent
    .tail()
    .split('\n')
    .find((l) => l.includes('"build":"release-0.25"'))
  assert.match(line ?? '', /"level":40/, 'a warning')
  assert.match(line ?? '', /CARLOS_BUILD=release-0\.25 cannot be placed against the layout floor/)
})

void test('a second serve on the same data root refuses to start, naming the holder', async (t) => {
  const sb = await makeSandbox(await tmpDir(t, 'layoutd-hostile-'), 'kass-1')
  const first = await AgentProcess.start(sb)
  t.after(() => first.stop())
  await first.waitReady()
  const r = await serveOutcome(sb, { CARLOS_AGENT_LISTEN: `127.0.0.1:${await freePort()}`, CARLOS_BOX: 'kass-2' })
  assert.equal(r.listening, false, 'the second agent must not listen')
  assert.notEqual(r.exit, 0)
  assert.match(r.output, new RegExp(String(first.pid)), "the holder's pid is named")
})

// ---- valid values that say "do not move" -----------------------------------------------

const BLOCKED_DEFAULTS: Array<[string, Record<string, string>, RegExp]> = [
  [
    'CARLOS_LAYOUT_DEFAULT=bogus: the default is flat and says why',
    { CARLOS_LAYOUT_DEFAULT: 'bogus' },
    /CARLOS_LAYOUT_DEFAULT=bogus is not nested or flat; staying flat/,
  ],
  [
    'CARLOS_BUILD below the layout floor: the nested default is blocked, naming the build',
    { CARLOS_BUILD: 'v0.24.9' },
    /v0\.24\.9/,
  ],
]

for (const [what, blocking, why] of BLOCKED_DEFAULTS) {
  void test(`${what}; nothing moves`, async (t) => {
    let before: Fingerprint | undefined
    const b = await hostileBox(t, {
      env: blocking,
      before: async (x) => {
        await addFlat(x, 'a.example.com')
        await fs.mkdir(path.join(x.config.dataDir, 'nested'))
        before = x.fp()
      },
    })
    await converge(b)
    const r = await report(b)
    assert.equal(r.rows['a.example.com']?.layout, 'flat')
    assert.match(r.defaultBlocked, why)
    assert.ok(before !== undefined, 'the box was fingerprinted before its start')
    assertUnchanged(before, b.fp())
  })
}

void test('D/nested as a symlink is refused at start, naming it; nothing behind it is touched', async (t) => {
  const away = await tmpDir(t, 'layoutd-hostile-away-')
  const b = await hostileBox(t, {
    start: false,
    before: async (x) => {
      await addFlat(x, 'a.example.com')
      await recordIntent(x, 'nested')
      await fs.symlink(away, path.join(x.config.dataDir, 'nested'))
    },
  })
  const before = b.fp({ also: { away } })
  await assert.rejects(b.agent.start(), (err: unknown) => {
    assert.equal((err as { code?: unknown }).code, 'data_root_not_directory')
    assert.match(String(err), /nested is a symlink/)
    return true
  })
  assertUnchanged(before, b.fp({ also: { away } }))
})

void test('D/apps as a symlink is refused at start, naming it', async (t) => {
  const away = await tmpDir(t, 'layoutd-hostile-away-')
  const b = await hostileBox(t, {
    start: false,
    before: async (x) => {
      await recordIntent(x, 'nested')
      await fs.mkdir(path.join(away, 'a.example.com'))
      await fs.symlink(away, path.join(x.config.dataDir, 'apps'))
      x.registry.add({
        host: 'a.example.com',
        kind: 'instance',
        hibernate: true,
        dir: path.join(x.config.dataDir, 'apps', 'a.example.com'),
        socket: path.join(x.config.runDir, 'a.example.com.sock'),
        db: '',
      })
    },
  })
  const before = b.fp({ also: { away } })
  await assert.rejects(b.agent.start(), /apps/)
  assertUnchanged(before, b.fp({ also: { away } }))
})

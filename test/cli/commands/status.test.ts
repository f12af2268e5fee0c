// `layoutd status` against a fake agent on a real loopback port: the table,
// the JSON, the agent's refusals and an agent that is not there, each with
// its exit status.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { main } from '../../../src/cli/commands/status.js'
import { errors } from '../../../src/errors.js'
import { HOST, listen, sampleReport } from '../../helpers/fake-agent.js'
import { Sink } from '../../helpers/sink.js'
import { tmpDir } from '../../helpers/tmp.js'

async function status(environ: NodeJS.ProcessEnv, ...argv: string[]) {
  const stdout = new Sink()
  const stderr = new Sink()
  const code = await main(argv, { environ, stdout, stderr })
  return { code, out: stdout.text, err: stderr.text }
}

void test('status prints the summary line, why the default is blocked, the warnings, then the rows as a table', async (t) => {
  const { agent, url } = await listen(t)
  const now = Date.now()
  agent.reportValue = {
    ...sampleReport(),
    mode: 'none',
    defaultBlocked: 'isolation not ready: probe: no verdict',
    rows: {
      'b.example.com': { layout: 'flat', code: 'awake_grace', reason: 'awake: 42m of grace left', note: '' },
      [HOST]: { layout: 'nested', code: '', reason: '', note: 'moved' },
      'c.example.com': { layout: 'fenced', code: 'second_name', reason: 'held down after a refused move', note: '' },
    },
    leg: {
      running: false,
      pending: false,
      lastRun: {
        startedAt: new Date(now - 185_000).toISOString(),
        finishedAt: new Date(now - 182_000).toISOString(),
        results: [
          { host: HOST, outcome: 'moved', code: '', reason: '', to: 'nested' },
          { host: 'b.example.com', outcome: 'deferred', code: 'awake_grace', reason: 'awake', to: 'nested' },
        ],
      },
      retryAt: new Date(now + 9 * 60_000 + 30_000).toISOString(),
    },
    warnings: ['nested instances share this box with flat ones'],
  }
  const r = await status({}, '--url', url)
  assert.equal(r.code, 0, r.err)
  assert.equal(
    r.out,
    'box kass-1  intent none  3 rows: 1 nested, 1 flat, 1 fenced  leg idle, last run 3m ago (1 moved, 1 deferred), retry in 9m\n' +
      'default: isolation not ready: probe: no verdict\n' +
      'warning: nested instances share this box with flat ones\n' +
      '\n' +
      'HOST           LAYOUT  REASON                          NOTE\n' +
      'a.example.com  nested                                  moved\n' +
      'b.example.com  flat    awake: 42m of grace left\n' +
      'c.example.com  fenced  held down after a refused move\n',
  )
  assert.equal(r.err, '')
})

void test('colour only on a terminal, and never with NO_COLOR', async (t) => {
  const { agent, url } = await listen(t)
  agent.reportValue = {
    ...sampleReport(),
    rows: { [HOST]: { layout: 'fenced', code: 'second_name', reason: 'held down', note: '' } },
  }
  const run = async (environ: NodeJS.ProcessEnv, tty: boolean) => {
    const stdout = Object.assign(new Sink(), { isTTY: tty })
    const code = await main(['--url', url], { environ, stdout, stderr: new Sink() })
    assert.equal(code, 0)
    return stdout.text
  }
  const coloured = await run({}, true)
  const ESC = '\x1b'
  assert.ok(coloured.includes(`a.example.com  ${ESC}[33mfenced${ESC}[0m  held down`), JSON.stringify(coloured))
  assert.ok(coloured.includes(`${ESC}[33m1 fenced${ESC}[0m`), JSON.stringify(coloured))
  for (const text of [await run({}, false), await run({ NO_COLOR: '1' }, true), await run({ NO_COLOR: '' }, true)]) {
    assert.equal(text.includes('\x1b'), false, JSON.stringify(text))
  }
})

void test('status --json prints the report as the agent answered it', async (t) => {
  const { url } = await listen(t)
  const r = await status({}, '--json', '--url', `${url}/`)
  assert.equal(r.code, 0, r.err)
  assert.deepEqual(JSON.parse(r.out), sampleReport())
})

void test('an agent that refuses: exit 1, its status, code and message on stderr', async (t) => {
  const { agent, url } = await listen(t)
  agent.reportError = errors.notReady('recovering')
  const r = await status({}, '--url', url)
  assert.equal(r.code, 1)
  assert.equal(r.out, '')
  assert.equal(r.err, 'layoutd: GET /layout/status: 503 not_ready: layoutd is recovering\n')
})

void test('an agent that is not there: exit 1, naming the address', async () => {
  const r = await status({}, '--url', 'http://127.0.0.1:1')
  assert.equal(r.code, 1)
  assert.match(r.err, /^layoutd: cannot reach layoutd at http:\/\/127\.0\.0\.1:1: /)
})

void test('without --url, status asks the address the agent listens on, once it says it holds this data root', async (t) => {
  const dataDir = await tmpDir(t)
  const identity = { dataDir, pid: 1, startId: 'fake', startedAt: new Date().toISOString() }
  const { url } = await listen(t, { identity })
  const r = await status({ CARLOS_AGENT_LISTEN: new URL(url).host, CARLOS_DATA_DIR: dataDir }, '--json')
  assert.equal(r.code, 0, r.err)
  assert.equal((JSON.parse(r.out) as { box: string }).box, 'kass-1')
})

void test('without --url, an agent of another data root is refused naming both, and nothing is asked of it', async (t) => {
  const [ours, theirs] = [await tmpDir(t), await tmpDir(t)]
  const identity = { dataDir: theirs, pid: 1, startId: 'fake', startedAt: new Date().toISOString() }
  const { agent, url } = await listen(t, { identity })
  const environ = { CARLOS_AGENT_LISTEN: new URL(url).host, CARLOS_DATA_DIR: ours }
  const before = agent.reportReads
  for (const argv of [['--json'], ['--wait-ready', '--timeout', '5']]) {
    const r = await status(environ, ...argv)
    assert.equal(r.code, 1, r.err)
    assert.ok(
      r.err.startsWith(
        `layoutd: the agent at ${url} (CARLOS_AGENT_LISTEN or its default) serves ${theirs}, not this data root ${ours}: `,
      ),
      r.err,
    )
  }
  assert.equal(agent.reportReads, before, 'the report was never asked')
  // With --url the operator names the agent: asked as it is.
  assert.equal((await status(environ, '--json', '--url', url)).code, 0)
})

void test('--help and -h print the usage and exit 0, even when the environment holds a bad value', async () => {
  for (const flag of ['--help', '-h']) {
    const r = await status({ CARLOS_LAYOUT_POLL: '5' }, flag)
    assert.equal(r.code, 0)
    assert.match(r.out, /^usage:\n {2}layoutd status \[--url URL\] \[--json\]/)
    assert.equal(r.err, '')
  }
})

void test('a bad environment is refused by the program, exit 1; a bad option is a usage error, exit 2', async () => {
  const env = await status({ CARLOS_LAYOUT_POLL: '5' })
  assert.equal(env.code, 1)
  assert.equal(env.err, 'layoutd: CARLOS_LAYOUT_POLL=5: a duration like 500ms, 5s, 10m, 1h\n')
  const usage = await status({}, '--bogus')
  assert.equal(usage.code, 2)
  assert.match(usage.err, /^layoutd: Unknown option '--bogus'.*\nusage:\n/)
  const extra = await status({}, 'a.example.com', 'extra')
  assert.equal(extra.code, 2)
  assert.match(extra.err, /^layoutd: unexpected argument "extra"\n/)
  for (const [argv, why] of [
    [['--watch', '--wait-ready'], 'HOST, --watch and --wait-ready go one at a time'],
    [['--timeout', '5'], '--timeout goes with --wait-ready'],
    [['--wait-ready', '--timeout', '0'], '--timeout "0": a number of seconds above zero, like 30'],
    [['--wait-ready', '--timeout', 'soon'], '--timeout "soon": a number of seconds above zero, like 30'],
    [['--watch', '--json'], '--json goes with the report or HOST, not --watch or --wait-ready'],
  ] as const) {
    const r = await status({}, ...argv)
    assert.equal(r.code, 2, argv.join(' '))
    assert.equal(r.err.split('\n')[0], `layoutd: ${why}`)
  }
})

void test('status --check exits 1 naming the rows a person must act on; 0 while rows only wait out their grace', async (t) => {
  const { agent, url } = await listen(t)
  const nested = Object.fromEntries(
    Array.from({ length: 149 }, (_, i) => [`t${i}.example.com`, { layout: 'nested', code: '', reason: '', note: '' }]),
  )
  agent.reportValue = {
    ...sampleReport(),
    rows: {
      ...nested,
      'held.example.com': { layout: 'fenced', code: 'second_name', reason: 'held down', note: '' },
    },
  }
  const r = await status({}, '--url', url, '--check')
  assert.equal(r.code, 1, r.err)
  assert.match(r.out, /^box kass-1 .* 150 rows: 149 nested, 1 fenced /)
  assert.equal(r.err, 'layoutd: 1 row needs an operator: held.example.com (second_name)\n')
  assert.equal((await status({}, '--url', url)).code, 0, 'without --check the report alone, as before')
  const json = await status({}, '--url', url, '--check', '--json')
  assert.equal(json.code, 1)
  assert.equal((JSON.parse(json.out) as { box: string }).box, 'kass-1')

  agent.reportValue = {
    ...sampleReport(),
    rows: {
      ...nested,
      'awake.example.com': { layout: 'flat', code: 'awake_grace', reason: 'awake: 42m of grace left', note: '' },
    },
  }
  const waiting = await status({}, '--url', url, '--check')
  assert.equal(waiting.code, 0, waiting.err)
  assert.equal(waiting.err, '')

  agent.reportValue = { ...sampleReport(), mode: 'unreadable' }
  const unreadable = await status({}, '--url', url, '--check')
  assert.equal(unreadable.code, 1, "an unreadable intent is an operator's to end")
  assert.match(unreadable.err, /^layoutd: the intent is unreadable: nothing moves until an operator acts/)
})

void test('status --check goes with the report alone: with HOST, --watch or --wait-ready it is a usage error', async () => {
  for (const extra of [['a.example.com'], ['--watch'], ['--wait-ready']]) {
    const r = await status({}, '--check', ...extra)
    assert.equal(r.code, 2, `${extra.join(' ')}: ${r.err}`)
    assert.match(r.err, /--check goes with the report/)
  }
})

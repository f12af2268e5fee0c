// `layoutd status` against a fake agent on a real loopback port: the table,
// the JSON, the agent's refusals and an agent that is not there, each with
// its exit status.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { main } from '../../../src/cli/commands/status.js'
import { errors } from '../../../src/errors.js'
import { HOST, listen, sampleReport } from '../../helpers/fake-agent.js'
import { Sink } from '../../helpers/sink.js'

async function status(environ: NodeJS.ProcessEnv, ...argv: string[]) {
  const stdout = new Sink()
  const stderr = new Sink()
  const code = await main(argv, { environ, stdout, stderr })
  return { code, out: stdout.text, err: stderr.text }
}

void test('status prints the report as a table: the box line, the leg, one row a host, the warnings', async (t) => {
  const { agent, url } = await listen(t)
  agent.reportValue = {
    ...sampleReport(),
    default: true,
    rows: {
      'b.example.com': { layout: 'flat', reason: 'awake: 42m of grace left', note: '' },
      [HOST]: { layout: 'nested', reason: '', note: 'moved' },
    },
    leg: { running: false, pending: true, lastRun: null, retryAt: '2025-01-01T00:10:00.000Z' },
    warnings: ['nested instances share this box with flat ones'],
  }
  const r = await status({}, '--url', url)
  assert.equal(r.code, 0, r.err)
  assert.equal(
    r.out,
    'box kass-1  mode nested (nested by default)\n' +
      'leg pending, retry at 2025-01-01T00:10:00.000Z\n' +
      '\n' +
      'HOST           LAYOUT  REASON                    NOTE\n' +
      'a.example.com  nested                            moved\n' +
      'b.example.com  flat    awake: 42m of grace left\n' +
      '\n' +
      'warning: nested instances share this box with flat ones\n',
  )
  assert.equal(r.err, '')
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

void test('without --url, status asks the address the agent listens on', async (t) => {
  const { url } = await listen(t)
  const r = await status({ CARLOS_AGENT_LISTEN: new URL(url).host }, '--json')
  assert.equal(r.code, 0, r.err)
  assert.equal((JSON.parse(r.out) as { box: string }).box, 'kass-1')
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
  const extra = await status({}, 'extra')
  assert.equal(extra.code, 2)
  assert.match(extra.err, /^layoutd: unexpected argument "extra"\n/)
})

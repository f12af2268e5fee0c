// `layoutd status HOST`, `--watch` and `--wait-ready` against the app on a
// real loopback port: one host with its paths, hold marker and journal read
// from a real data root, the watch's conditional requests on the report's
// ETag, and the wait for readiness, each with its exit status.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import net from 'node:net'
import path from 'node:path'
import { test } from 'node:test'
import { AgentClient } from '../../../src/cli/agent-client.js'
import { main, waitReady, watch, type StatusContext } from '../../../src/cli/commands/status.js'
import { plain } from '../../../src/cli/status-view.js'
import { loadConfig } from '../../../src/config.js'
import { HOST, listen, sampleReport } from '../../helpers/fake-agent.js'
import { Sink } from '../../helpers/sink.js'
import { tmpDir } from '../../helpers/tmp.js'
import { until } from '../../helpers/until.js'

async function status(environ: NodeJS.ProcessEnv, ...argv: string[]) {
  const stdout = new Sink()
  const stderr = new Sink()
  const code = await main(argv, { environ, stdout, stderr })
  return { code, out: stdout.text, err: stderr.text }
}

void test('status HOST: word, reason, note, the paths it would wake at, and what to do', async (t) => {
  const { agent, url } = await listen(t)
  agent.reportValue = {
    ...sampleReport(),
    rows: {
      [HOST]: { layout: 'flat', code: 'awake_grace', reason: 'awake: 42m of grace left', note: 'aside: 1 file' },
    },
  }
  agent.wakeAnswers.set(HOST, {
    granted: true,
    grant: { host: HOST, layout: 'flat', dir: '/data/apps/a.example.com', socket: '/data/run/a.sock', db: '' },
  })
  const r = await status({}, HOST, '--url', url)
  assert.equal(r.code, 0, r.err)
  assert.equal(
    r.out,
    'a.example.com  flat\n' +
      '  code    awake_grace\n' +
      '  reason  awake: 42m of grace left\n' +
      '  note    aside: 1 file\n' +
      '  paths   dir /data/apps/a.example.com, socket /data/run/a.sock\n' +
      '  to do   nothing; to move now, a forced intent (deferred (docs/runbook.md#deferred))\n',
  )
  const unknown = await status({}, 'z.example.com', '--url', url)
  assert.equal(unknown.code, 1)
  assert.equal(
    unknown.err,
    "layoutd: z.example.com is not a row of kass-1's report (only instance rows are; `layoutd routes list` shows every row)\n",
  )
})

void test("status HOST on the agent's own box reads the host's hold marker and journal from the data root", async (t) => {
  const dataDir = await tmpDir(t)
  const { agent, url } = await listen(t, {
    identity: { dataDir, pid: 1, startId: 'fake', startedAt: new Date().toISOString() },
  })
  await fs.mkdir(path.join(dataDir, 'layout'))
  const heldAt = new Date(Date.now() - 3 * 3_600_000).toISOString()
  await fs.writeFile(
    path.join(dataDir, 'layout', `${HOST}.hold`),
    JSON.stringify({ v: 1, host: HOST, to: 'nested', reason: 'db outside dir', heldAt }),
  )
  agent.reportValue = {
    ...sampleReport(),
    rows: {
      [HOST]: {
        layout: 'fenced',
        code: 'second_name',
        reason: 'held down after a refused move: db outside dir',
        note: '',
      },
    },
  }
  agent.wakeAnswers.set(HOST, {
    granted: false,
    refusal: { host: HOST, layout: 'fenced', code: 'second_name', reason: 'held down after a refused move' },
  })
  const environ = { CARLOS_AGENT_LISTEN: new URL(url).host, CARLOS_DATA_DIR: dataDir }
  const r = await status(environ, HOST)
  assert.equal(r.code, 0, r.err)
  assert.equal(
    r.out,
    'a.example.com  fenced\n' +
      '  code    second_name\n' +
      '  reason  held down after a refused move: db outside dir\n' +
      '  note    -\n' +
      '  wake    refused: held down after a refused move\n' +
      '  hold    toward nested, held 3h ago: db outside dir\n' +
      // Toward nested, the files are still flat; the reason names no file, so PATH stays for the operator to fill.
      `  to do   find the other name and remove one (\`find ${dataDir} -samefile ${dataDir}/apps/a.example.com/PATH\`: ` +
      `the directory its files are in now, \`${dataDir}/apps/a.example.com\` or ` +
      `\`${dataDir}/nested/a.example.com/data\`, and the file the reason names); clear the hold ` +
      '(docs/runbook.md#clear-a-hold)\n',
  )
  await fs.rm(path.join(dataDir, 'layout', `${HOST}.hold`))
  const from = { dir: '/data/apps/a.example.com', socket: '/data/run/a.sock', db: '' }
  const dest = { dir: '/data/nested/a.example.com/data', socket: '/data/nested/a.example.com/run/a.sock', db: '' }
  const startedAt = new Date(Date.now() - 120_000).toISOString()
  await fs.writeFile(
    path.join(dataDir, 'layout', `${HOST}.journal`),
    JSON.stringify({ v: 1, host: HOST, to: 'nested', from, dest, generation: 4, startedAt }),
  )
  agent.reportValue = {
    ...sampleReport(),
    rows: {
      [HOST]: { layout: 'fenced', code: 'files_missing', reason: 'files missing: neither side holds them', note: '' },
    },
  }
  const j = await status(environ, HOST, '--json')
  assert.equal(j.code, 0, j.err)
  const parsed = JSON.parse(j.out) as { layout: string; journal: { generation: number }; hold: unknown; todo: string }
  assert.equal(parsed.layout, 'fenced')
  assert.equal(parsed.journal.generation, 4)
  assert.equal(parsed.hold, null)
  // The runbook's advice for files_missing: find the files first, then the kept journal.
  assert.match(parsed.todo, /^find the tenant's files first .*docs\/runbook\.md#a-kept-journal\)/)
  // With --url the agent may be another box's: the local data root is not read.
  const remote = await status(environ, HOST, '--url', url)
  assert.doesNotMatch(remote.out, /^ {2}journal /m)
})

void test('status HOST for a hold on its way to flat names the real file under D/nested/HOST/data to look for', async (t) => {
  const dataDir = await tmpDir(t)
  const { agent, url } = await listen(t, {
    identity: { dataDir, pid: 1, startId: 'fake', startedAt: new Date().toISOString() },
  })
  await fs.mkdir(path.join(dataDir, 'layout'))
  const reason = 'a file of its has a second name: www/index.html has 2 links'
  await fs.writeFile(
    path.join(dataDir, 'layout', `${HOST}.hold`),
    JSON.stringify({ v: 1, host: HOST, to: 'flat', code: 'second_name', reason, heldAt: new Date().toISOString() }),
  )
  agent.reportValue = {
    ...sampleReport(),
    rows: {
      [HOST]: {
        layout: 'fenced',
        code: 'second_name',
        reason: `held down after a refused move to flat: ${reason}`,
        note: '',
      },
    },
  }
  const environ = { CARLOS_AGENT_LISTEN: new URL(url).host, CARLOS_DATA_DIR: dataDir }
  const r = await status(environ, HOST, '--json')
  assert.equal(r.code, 0, r.err)
  const { todo } = JSON.parse(r.out) as { todo: string }
  assert.ok(
    todo.startsWith(
      `find the other name and remove one (\`find ${dataDir} -samefile ` +
        `${dataDir}/nested/a.example.com/data/www/index.html\`: `,
    ),
    todo,
  )
  assert.doesNotMatch(todo, /\bD\/|\bHOST\b|\bPATH\b|\bDIR\b|D\/apps\/HOST/, 'no placeholder left')
})

void test('--watch draws the report, asks with its ETag (304 while unchanged) and draws again only when it changed', async (t) => {
  const { agent, url } = await listen(t)
  const stdout = new Sink()
  const ctx: StatusContext = {
    config: loadConfig({}),
    stdout,
    stderr: new Sink(),
    paint: plain,
    tty: false,
    now: Date.now,
  }
  const stop = new AbortController()
  const done = watch(new AgentClient(url, ''), ctx, 20, stop.signal)
  await until('the first draw', () => stdout.text.includes('box kass-1'))
  const reads = agent.reportReads
  await until('a few more asks', () => agent.reportReads >= reads + 3)
  assert.equal(stdout.text.match(/^--- /gm)?.length, 1, 'unchanged: drawn once')
  agent.reportValue = {
    ...sampleReport(),
    rows: { [HOST]: { layout: 'fenced', code: 'in_flight', reason: 'layout move to nested in flight', note: '' } },
  }
  await until('the second draw', () => stdout.text.includes('layout move to nested in flight'))
  stop.abort()
  assert.equal(await done, 0)
  assert.equal(stdout.text.match(/^--- /gm)?.length, 2)
})

void test("--wait-ready names what the agent last answered, not an ask the wait's own end cut short", async (t) => {
  // The agent answers the first ask (recovering) and no other: the next
  // ask is given what is left of the wait and is still unanswered at its
  // end. That is not news of the agent; its last answer is.
  const { url } = await listen(t)
  const agent = new URL(url)
  const unanswered: net.Socket[] = []
  let asks = 0
  const relay = net.createServer((socket) => {
    if (asks++ > 0) {
      unanswered.push(socket)
      return
    }
    const upstream = net.connect(Number(agent.port), agent.hostname)
    socket.pipe(upstream).pipe(socket)
  })
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve))
  t.after(() => {
    for (const socket of unanswered) socket.destroy()
    relay.close()
  })
  const { port } = relay.address() as net.AddressInfo
  // One ask's bound as long as the wait (6 s, not the command's 2 s): every ask is given what is
  // left of the wait, and the first is answered inside it however loaded the machine.
  const stderr = new Sink()
  const origin = `http://127.0.0.1:${port}`
  const code = await waitReady(
    new AgentClient(origin, ''),
    origin,
    6,
    { config: loadConfig({}), stdout: new Sink(), stderr },
    6_000,
  )
  assert.equal(code, 1)
  assert.ok(asks >= 2, `asked ${asks} times`)
  assert.equal(stderr.text, 'layoutd: not ready after 6s: layoutd is recovering\n')
})

void test('--wait-ready returns 0 once /ready answers 200, and 1 naming what it last saw after the timeout', async (t) => {
  const { agent, url } = await listen(t)
  const waiting = status({}, '--wait-ready', '--url', url)
  await until('a few asks', () => true)
  agent.readinessValue = { ...agent.readinessValue, ready: true, phase: 'ready' }
  const r = await waiting
  assert.equal(r.code, 0, r.err)
  assert.equal(r.out, `layoutd at ${url} is ready\n`)
  agent.readinessValue = { ...agent.readinessValue, ready: false, phase: 'recovering' }
  const slow = await status({}, '--wait-ready', '--timeout', '5', '--url', url)
  assert.equal(slow.code, 1)
  assert.equal(slow.err, 'layoutd: not ready after 5s: layoutd is recovering\n')
  const gone = await status({}, '--wait-ready', '--timeout', '5', '--url', 'http://127.0.0.1:1')
  assert.equal(gone.code, 1)
  assert.match(
    gone.err,
    /^layoutd: not ready after 5s: cannot reach layoutd at http:\/\/127\.0\.0\.1:1: connect ECONNREFUSED .*; is the agent running\? start it with `layoutd serve`/,
  )
})

// `layoutd converge` against a fake agent on a real loopback port: the kick,
// --wait following the run to its results, the agent's bounded wait running
// out, and the exit status a failed host gives.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { main, summarize } from '../../../src/cli/commands/converge.js'
import type { LegRun } from '../../../src/domain/schemas.js'
import { TEST_TOKEN } from '../../helpers/authorised.js'
import { listen, sampleRun } from '../../helpers/fake-agent.js'
import { Sink } from '../../helpers/sink.js'
import { until } from '../../helpers/until.js'

function converge(...argv: string[]) {
  const stdout = new Sink()
  const stderr = new Sink()
  // The token the fake agent requires, as an operator's environment gives it.
  const done = main(argv, { environ: { CARLOS_AGENT_TOKEN: TEST_TOKEN }, stdout, stderr })
  return { done, stdout, stderr }
}

const run = (results: LegRun['results']): LegRun => ({ ...sampleRun(), results })

void test('summarize counts the outcomes in the order they came', () => {
  assert.equal(summarize([]), 'no host to move')
  assert.equal(
    summarize([
      { host: 'a', outcome: 'moved', code: '', reason: '', to: 'nested' },
      { host: 'b', outcome: 'deferred', code: 'awake_grace', reason: 'awake', to: 'nested' },
      { host: 'c', outcome: 'moved', code: '', reason: '', to: 'nested' },
    ]),
    '2 moved, 1 deferred',
  )
})

void test('converge kicks the leg once and says what the leg is doing', async (t) => {
  const { agent, url } = await listen(t)
  agent.legValue = { running: false, pending: true, lastRun: null, retryAt: null }
  const c = converge('--url', url)
  assert.equal(await c.done, 0, c.stderr.text)
  assert.equal(c.stdout.text, 'converge requested (leg running, another run pending)\n')
  assert.equal(agent.kicks, 1)
})

void test('converge --wait shows progress, then the hosts that need an operator and the summary; a failed host exits 1', async (t) => {
  const { agent, url } = await listen(t)
  const c = converge('--wait', '--url', url)
  const call = await agent.nextConverge()
  agent.reportValue = {
    ...agent.reportValue,
    leg: {
      running: true,
      pending: false,
      lastRun: { ...run([sampleRun().results[0]!]), finishedAt: null },
      retryAt: null,
    },
  }
  await until('the progress line', () => c.stdout.text.includes('running: 1 of 1 host done\n'))
  call.finish(
    run([
      { host: 'a.example.com', outcome: 'moved', code: '', reason: '', to: 'nested' },
      { host: 'b.example.com', outcome: 'failed', code: 'stop_timeout', reason: 'stop timed out', to: 'nested' },
      { host: 'c.example.com', outcome: 'unchanged', code: '', reason: '', to: 'nested' },
    ]),
  )
  assert.equal(await c.done, 1, c.stderr.text)
  assert.equal(
    c.stdout.text,
    'running: 1 of 1 host done\nb.example.com: failed -> stop timed out\ndone: 1 moved, 1 failed, 1 unchanged\n' +
      '1 host failed, refused or held: `layoutd status HOST` says what to do (docs/runbook.md#outcomes)\n',
  )
  assert.equal(c.stderr.text, '')
})

void test("when the agent's wait runs out (504), converge --wait follows the leg until it is idle", async (t) => {
  const { agent, url } = await listen(t)
  agent.reportValue = { ...agent.reportValue, leg: { running: true, pending: false, lastRun: null, retryAt: null } }
  const c = converge('--wait', '--url', url)
  const call = await agent.nextConverge()
  const readsBefore = agent.reportReads
  call.finish(null)
  // The command now polls the report while the leg runs; the run ends while it does.
  await until('polls after the timeout', () => agent.reportReads >= readsBefore + 2)
  assert.equal(c.stdout.text.includes('done:'), false, 'still following the running leg')
  agent.reportValue = { ...agent.reportValue, leg: { running: false, pending: false, lastRun: run([]), retryAt: null } }
  assert.equal(await c.done, 0, c.stderr.text)
  assert.match(c.stdout.text, /done: no host to move\n$/)
})

void test('converge against no agent: exit 1 with the address; --help exits 0 whatever the environment', async () => {
  const gone = converge('--url', 'http://127.0.0.1:1')
  assert.equal(await gone.done, 1)
  assert.match(gone.stderr.text, /^layoutd: cannot reach layoutd at http:\/\/127\.0\.0\.1:1: /)
  const stdout = new Sink()
  const stderr = new Sink()
  assert.equal(await main(['--help'], { environ: { CARLOS_AGENT_LISTEN: 'nowhere' }, stdout, stderr }), 0)
  assert.match(stdout.text, /^usage:\n {2}layoutd converge \[--url URL\] \[--wait\]/)
})

void test('converge --wait says what the run waits on; refused or held exits 1 with the summary, deferred alone exits 0', async (t) => {
  const { agent, url } = await listen(t)
  const running = (waiting?: string) => ({
    ...agent.reportValue,
    leg: {
      running: true,
      pending: false,
      lastRun: { ...run([]), finishedAt: null },
      retryAt: null,
      ...(waiting === undefined ? {} : { waiting }),
    },
  })
  const c = converge('--wait', '--url', url)
  const call = await agent.nextConverge()
  agent.reportValue = running('the activator to stop t01.example.com (awake, force)')
  await until('the waiting line', () =>
    c.stdout.text.includes('waiting for the activator to stop t01.example.com (awake, force)\n'),
  )
  agent.reportValue = running()
  const reads = agent.reportReads
  await until('a few more polls', () => agent.reportReads >= reads + 2)
  call.finish(
    run([
      { host: 't01.example.com', outcome: 'moved', code: '', reason: '', to: 'nested' },
      {
        host: 't02.example.com',
        outcome: 'refused',
        code: 'gate_shut',
        reason: 'isolation not ready: probe: no verdict',
        to: 'nested',
      },
      { host: 't03.example.com', outcome: 'held', code: 'second_name', reason: 'db outside dir', to: 'nested' },
    ]),
  )
  assert.equal(await c.done, 1, c.stderr.text)
  assert.equal(c.stdout.text.match(/waiting for/g)?.length, 1, 'said once while it did not change')
  assert.match(
    c.stdout.text,
    /t02\.example\.com: refused -> isolation not ready: probe: no verdict\nt03\.example\.com: held -> db outside dir\ndone: 1 moved, 1 refused, 1 held\n2 hosts failed, refused or held: /,
  )

  const d = converge('--wait', '--url', url)
  ;(await agent.nextConverge()).finish(
    run([
      {
        host: 't04.example.com',
        outcome: 'deferred',
        code: 'awake_grace',
        reason: 'awake: 59m of grace left',
        to: 'nested',
      },
    ]),
  )
  assert.equal(await d.done, 0, d.stderr.text)
  assert.match(d.stdout.text, /done: 1 deferred\n$/)
})

void test('converge --wait kicked during a run reports that run (the one that moved the hosts) before the follow-up, and counts each host once', async (t) => {
  const { agent, url } = await listen(t)
  const hosts = ['a.example.com', 'b.example.com']
  agent.reportValue = {
    ...agent.reportValue,
    rows: Object.fromEntries(
      hosts.map((h) => [h, { layout: 'fenced', code: 'in_flight', reason: 'moving', note: '' }]),
    ),
    leg: {
      running: true,
      pending: true,
      // Recovery's result and the pass's for the same host: one host, not two.
      lastRun: {
        ...run([
          { host: 'a.example.com', outcome: 'released', code: 'journal_removed', reason: 'removed', to: 'nested' },
          { host: 'a.example.com', outcome: 'moved', code: '', reason: '', to: 'nested' },
        ]),
        finishedAt: null,
      },
      retryAt: null,
    },
  }
  let finishUnderWay: (run: LegRun) => void = () => {}
  agent.underWay = new Promise((resolve) => (finishUnderWay = resolve))
  const c = converge('--wait', '--url', url)
  const call = await agent.nextConverge()
  await until('the progress line', () => c.stdout.text.includes('running: 1 of 2 hosts done\n'))
  finishUnderWay(
    run(
      hosts.map((host) => ({ host, outcome: 'moved' as const, code: '' as const, reason: '', to: 'nested' as const })),
    ),
  )
  call.finish(
    run(
      hosts.map((host) => ({
        host,
        outcome: 'unchanged' as const,
        code: '' as const,
        reason: '',
        to: 'nested' as const,
      })),
    ),
  )
  assert.equal(await c.done, 0, c.stderr.text)
  assert.match(c.stdout.text, /^the run under way when asked \(started [^)]+\): 2 moved, 2 hosts$/m)
  assert.match(c.stdout.text, /done \(the run this kick asked for\): 2 unchanged\n$/)
  assert.doesNotMatch(c.stdout.text, /running: 2 of 2/, 'a host named twice is counted once')
})

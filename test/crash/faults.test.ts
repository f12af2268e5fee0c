// Faults injected through the failpoints, in process (design §3.4, §5.1):
// ENOSPC and EIO at each step of a move, both directions. Each ends in a
// named outcome (`failed` or `held`, its reason naming the fault), the
// tenant's files in exactly one place and byte-identical, the registry row
// agreeing (or a journal on disk naming where they are, the host fenced for
// recovery), and a retry scheduled; once the fault is lifted (an injected
// errno fires once) the retry converges. The clock is a fake one, so the
// retry timer fires when the test says, not after a wait.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import path from 'node:path'
import { describe, it, test } from 'node:test'
import type { DeployStore } from '../../src/domain/ports.js'
import { flatPaths, journalPath, nestedPaths } from '../../src/domain/paths.js'
import type { Result } from '../../src/domain/modes.js'
import type { LegState } from '../../src/domain/schemas.js'
import { INSTANCE_ENV } from '../../src/infra/instance-keys.js'
import { createLogger } from '../../src/logger.js'
import { FakeClock, hangUntilAborted } from '../domain/fakes.js'
import { agentBox, recordIntent, withReads, type AgentBox } from '../helpers/agent.js'
import { endGroup, spawnFor } from '../helpers/child.js'
import { Sink } from '../helpers/sink.js'
import { hashTree, makeTenantTree } from '../helpers/tenants.js'
import { until } from '../helpers/until.js'

const HOST = 'a.example.com'

/** The steps a sleeping host's move reaches (design §3.4); after-stop and after-hold need an awake or a held host. */
const STEPS = [
  'after-fence',
  'after-aside',
  'after-journal',
  'after-preflight',
  'after-prepare',
  `after-rename:${HOST}`,
  'after-rename',
  'after-row',
  'after-journal-remove',
  'after-lift',
]

export interface FaultBox {
  b: AgentBox
  clock: FakeClock
  from: { dir: string }
  dest: { dir: string }
  want: string
  /** The agent's log at warn, where the failed and held results of every run are written. */
  log: Sink
}

/** A box with one sleeping tenant in the other layout than `to`, started, its gate open, its leg idle. */
export async function faultBox(
  t: Parameters<typeof agentBox>[0],
  to: 'flat' | 'nested',
  env: Record<string, string>,
  opts: Omit<Parameters<typeof agentBox>[1] & object, 'clock' | 'env'> = {},
): Promise<FaultBox> {
  const clock = new FakeClock(Date.now())
  const log = new Sink()
  const logger = createLogger('warn', log)
  const b = await agentBox(t, { clock, logger, ...opts, env: { CARLOS_LAYOUT_DEFAULT: 'flat', ...env } })
  const from = to === 'nested' ? flatPaths(b.config, HOST) : nestedPaths(b.config, HOST)
  const dest = to === 'nested' ? nestedPaths(b.config, HOST) : flatPaths(b.config, HOST)
  makeTenantTree(from.dir, 7)
  fs.mkdirSync(path.dirname(from.socket), { recursive: true })
  b.registry.add({ host: HOST, kind: 'instance', hibernate: true, ...from })
  await b.agent.start()
  await until(
    'the gate to open and the leg to be idle',
    () => b.agent.readiness().nested.allowed && idle(b.agent.legState()),
  )
  // After start, and once its instance key is in the tree: the key is written beside the leg's first run, and a
  // tree hashed before it would differ from the same tree after, whatever the move did.
  await until('its instance key', () => fs.existsSync(path.join(from.dir, INSTANCE_ENV)))
  const want = hashTree(from.dir)
  return { b, clock, from, dest, want, log }
}

function idle(s: LegState): boolean {
  return !s.running && !s.pending && s.lastRun?.finishedAt !== null
}

/** Records the intent and lets the poller see it: its next read is one poll interval away on the fake clock. */
export async function moveTo(f: FaultBox, to: 'flat' | 'nested', force = false): Promise<void> {
  await recordIntent(f.b, to, { force })
  f.clock.advance(f.b.config.pollMs)
}

/**
 * Waits for a finished run in which the host (or the run as a whole) failed or was held, and answers that result
 * with the leg's state. Which result is the fault's is decided by outcome and host, never by the sentence: the
 * caller then checks that the sentence names the cause, as an operator reads it.
 */
export async function faultedRun(f: FaultBox): Promise<{ result: Result; state: LegState }> {
  const faulted = (r: Result): boolean => (r.host === HOST || r.host === '') && ['failed', 'held'].includes(r.outcome)
  try {
    return await until(`a run in which ${HOST} failed or was held`, () => {
      const state = f.b.agent.legState()
      if (!idle(state)) return undefined
      // The last run, or, when a run that followed it at once (a kick during it) has replaced it there, the
      // faulted result as the agent logged it.
      const result = state.lastRun?.results.find(faulted) ?? loggedResults(f).find(faulted)
      return result === undefined ? undefined : { result, state }
    })
  } catch (err) {
    // What the leg did instead says why: a run that failed earlier, one still running, none at all.
    throw new Error(`${(err as Error).message}; the leg then: ${JSON.stringify(f.b.agent.legState())}`)
  }
}

/** Every result the agent logged at warn (failed and held ones), as the result it was. */
function loggedResults(f: FaultBox): Result[] {
  const results: Result[] = []
  for (const line of f.log.text.split('\n')) {
    if (!line.startsWith('{')) continue
    const r = JSON.parse(line) as Partial<Result>
    if (typeof r.host !== 'string' || typeof r.outcome !== 'string') continue
    const { host, outcome, code = '', reason = '', to } = r as Result
    results.push({ host, outcome, code, reason, ...(to === undefined ? {} : { to }) })
  }
  return results
}

/** The files are in exactly one place, byte-identical; the row names that place, or a journal does with the host fenced. */
export async function assertOnePlace(f: FaultBox): Promise<void> {
  const at = [f.from.dir, f.dest.dir].filter((d) => fs.existsSync(d))
  assert.equal(at.length, 1, `the files are in exactly one place: ${at.join(', ')}`)
  const where = at[0] ?? ''
  assert.equal(hashTree(where), f.want, 'byte-identical')
  const row = f.b.registry.get(HOST)
  if (row?.dir === where) return
  const journal = journalPath(f.b.config, HOST)
  assert.ok(fs.existsSync(journal), `the row says ${row?.dir}, the files are at ${where}, and no journal says why`)
  const j = JSON.parse(fs.readFileSync(journal, 'utf8')) as { from: { dir: string }; dest: { dir: string } }
  assert.ok([j.from.dir, j.dest.dir].includes(where), 'the journal names where the files are')
  assert.equal((await f.b.agent.readyFor(HOST)).granted, false, 'a host its journal governs does not wake')
}

/** Fires the retry timer, and waits for the move to be done: files and row at dest, no journal, the host awake-able. */
export async function retryConverges(f: FaultBox, state: LegState, to: 'flat' | 'nested'): Promise<void> {
  const done = (): boolean =>
    idle(f.b.agent.legState()) &&
    f.b.registry.get(HOST)?.dir === f.dest.dir &&
    !fs.existsSync(journalPath(f.b.config, HOST))
  // A run that followed the faulted one at once (a kick during it) may have converged already, leaving no retry.
  const retryAt = f.b.agent.legState().retryAt ?? state.retryAt
  if (retryAt !== null) f.clock.advance(Math.max(0, Date.parse(retryAt) - f.clock.now()))
  else assert.ok(done(), 'a retry is scheduled')
  await until('the retry to converge', done)
  assert.equal(hashTree(f.dest.dir), f.want)
  assert.equal(fs.existsSync(f.from.dir), false)
  assert.equal(f.b.agent.report().rows[HOST]?.layout, to)
  assert.equal((await f.b.agent.readyFor(HOST)).granted, true)
  assert.equal(f.b.agent.legState().retryAt, null, 'a clean run leaves no retry')
}

// The matrix's boxes are independent: four at a time.
void describe('an injected errno at each step of a move', { concurrency: 4 }, () => {
  for (const to of ['nested', 'flat'] as const) {
    for (const errno of ['ENOSPC', 'EIO']) {
      for (const step of STEPS) {
        void it(`${errno} at ${step} of a move to ${to}: a named outcome, the files in one place, a retry that converges`, async (t) => {
          const f = await faultBox(t, to, { CARLOS_FAILPOINT: `${step}=${errno}` })
          await moveTo(f, to)
          const { result, state } = await faultedRun(f)
          assert.notEqual(result.code, '', `a failure names its code: ${result.reason}`)
          assert.match(result.reason, new RegExp(errno), 'the sentence names the errno')
          await assertOnePlace(f)
          await retryConverges(f, state, to)
        })
      }
    }
  }
})

void test('the registry locked by another process: the run fails naming it without its thread waiting the lock out, nothing moves, the retry converges', async (t) => {
  const f = await faultBox(t, 'nested', {})
  // Another program holds the registry's write lock (BEGIN EXCLUSIVE) for as long as the test says.
  const holder = spawnFor(
    t,
    process.execPath,
    [
      '-e',
      "const db = new (require('better-sqlite3'))(process.argv[1]); db.exec('BEGIN EXCLUSIVE'); console.log('locked'); setInterval(() => {}, 1000)",
      f.b.registry.file,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  )
  let holderOut = ''
  holder.stdout?.setEncoding('utf8').on('data', (s: string) => (holderOut += s))
  await until('the lock holder to hold the lock', () => {
    if (holder.exitCode !== null) throw new Error(`the lock holder exited with ${holder.exitCode}`)
    return holderOut.includes('locked')
  })
  // The thread that answers the activator beats every 10 ms; a write waiting the lock out on it (the CLI's 5 s
  // busy timeout) would show as one gap of 5 s or more.
  let last = performance.now()
  let longest = 0
  const beat = setInterval(() => {
    const now = performance.now()
    longest = Math.max(longest, now - last)
    last = now
  }, 10)
  t.after(() => clearInterval(beat))
  await moveTo(f, 'nested')
  const { result, state } = await faultedRun(f)
  clearInterval(beat)
  assert.ok(longest < 5000, `the agent's thread never waited on the foreign lock: its longest stall was ${longest} ms`)
  assert.equal(result.outcome, 'failed')
  assert.notEqual(result.code, '', `a failure names its code: ${result.reason}`)
  assert.match(result.reason, /database is locked|SQLITE_BUSY/, 'the sentence names the lock')
  await assertOnePlace(f)
  assert.equal(f.b.registry.get(HOST)?.dir, f.from.dir, 'nothing moved')
  await endGroup(holder)
  await retryConverges(f, state, 'nested')
})

void test('the deploy store never answering: the read times out, the report says unreadable naming it, the retry converges', async (t) => {
  let hang = false
  const wrap = (store: DeployStore): DeployStore =>
    withReads(store, (signal) => (hang ? hangUntilAborted(signal) : store.list(signal)))
  // 5 s, not less: every read but the hung one must beat it on a loaded machine.
  const f = await faultBox(t, 'nested', {}, { wrapStore: wrap, intentTimeoutMs: 5_000 })
  const runsBefore = f.b.agent.legState().lastRun?.startedAt
  hang = true
  await moveTo(f, 'nested')
  const state = await until('the leg to find the intent unreadable', () => {
    const s = f.b.agent.legState()
    return idle(s) && s.lastRun?.startedAt !== runsBefore && f.b.agent.report().mode === 'unreadable' ? s : undefined
  })
  assert.ok(
    f.b.agent.report().warnings.some((w) => /timeout|timed out|aborted/i.test(w)),
    f.b.agent.report().warnings.join('; '),
  )
  await assertOnePlace(f)
  assert.equal(f.b.registry.get(HOST)?.dir, f.from.dir, 'nothing moved')
  hang = false
  await retryConverges(f, state, 'nested')
})

void test('the activator never answering a stop: the stop times out and fails naming it, the tenant keeps running where it is, the retry converges', async (t) => {
  const stops: string[] = []
  const pending: http.ServerResponse[] = []
  // Takes the stop request and never answers it.
  const activator = http.createServer((req, res) => {
    stops.push(req.url ?? '')
    pending.push(res)
  })
  await new Promise<void>((resolve) => activator.listen(0, '127.0.0.1', resolve))
  t.after(() => {
    for (const res of pending) res.destroy()
    activator.close()
  })
  const url = `http://127.0.0.1:${(activator.address() as AddressInfo).port}`
  const f = await faultBox(t, 'nested', { CARLOS_ACTIVATOR_URL: url })
  assert.equal((await f.b.agent.claimWake(HOST)).granted, true)
  await moveTo(f, 'nested', true)
  await until('the stop to be asked for', () => stops.length > 0)
  f.clock.advance(60_000)
  const { result, state } = await faultedRun(f)
  assert.equal(result.outcome, 'failed')
  assert.equal(result.code, 'stop_timeout', result.reason)
  await assertOnePlace(f)
  assert.equal(f.b.registry.get(HOST)?.dir, f.from.dir, 'nothing moved under a claim')
  // The instance goes to sleep after all: its claim is released.
  f.b.agent.releaseWake(HOST)
  await retryConverges(f, state, 'nested')
})

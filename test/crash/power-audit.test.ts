// The power-loss audit (design §3.5), cheap enough for every run: the real
// agent is recorded under strace migrating two tenants to nested and back
// (bench/power/record.ts), and bench/power/audit.ts checks, per host, that
// the order of its calls keeps the move protocol's rules under the weak
// persistence model. A kill -9 keeps the page cache, so no kill test can
// tell a missing fsync; this one must: each of the move's fsyncs is taken
// out in turn (CARLOS_FAILPOINT=skip-fsync:<name>, design §3.4) and the
// rule it guards must fail, by name, with the calls that broke it.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import { describe, it, test } from 'node:test'
import { checkState, makeWorld, type World } from '../../bench/crash.js'
import { audit, type AuditReport, type AuditRule } from '../../bench/power/audit.js'
import { childrenOf, record, STRACE, TRACED, waitConverged } from '../../bench/power/record.js'
import { durableAt, replay, type FsImage, type Op } from '../../bench/power/model.js'
import { loadImage, lower, materialise, parseTrace, type Call } from '../../bench/power/trace.js'
import { FSYNC_NAMES, type FsyncName } from '../../src/infra/failpoint.js'
import { AgentProcess, MAIN_JS, freePort, recordIntent, sandboxEnv } from '../helpers/agent-process.js'
import { ended, spawnGroup } from '../helpers/child.js'
import { tmpDir } from '../helpers/tmp.js'

const HOSTS = 2
const SEED = 1

interface Audited {
  report: AuditReport
  /** A violation's words with the data root written `D`. */
  shown: (s: string) => string
  ops: Op[]
  initial: FsImage
  world: World
  /** Every call traced, each with the thread that made it. */
  calls: Call[]
}

/** record.ts's run (flat → nested → flat) with the fsync named taken out, audited. */
async function recorded(root: string, skip?: FsyncName, opts: { byDefault?: boolean } = {}): Promise<Audited> {
  assert.ok(
    fs.existsSync(STRACE),
    `${STRACE} is missing: the audit records the agent under strace (scripts/test.sh installs it)`,
  )
  const env = skip === undefined ? undefined : { CARLOS_FAILPOINT: `skip-fsync:${skip}` }
  const rec = await record({ hosts: HOSTS, seed: SEED, root, log: () => {}, env, byDefault: opts.byDefault })
  assert.deepEqual(rec.lowered.skipped, [], 'every call under the data root was lowered')
  const dataDir = rec.world.sb.dataDir
  return {
    report: audit(rec.lowered.ops, rec.initial, dataDir),
    shown: (s) => s.replaceAll(dataDir, 'D'),
    ops: rec.lowered.ops,
    initial: rec.initial,
    world: rec.world,
    calls: parseTrace(fs.readFileSync(rec.traceFile, 'latin1')),
  }
}

/**
 * The state the explorer found D/nested's gap in: the gate's self-check
 * makes `D/nested` after the registry's WAL was first fsynced in this life
 * (SQLite fsyncs `D` then, which would cover it by chance) and `D/layout`
 * already exists (so the journal's first write fsyncs no `D` either). That
 * is a box whose emptied `D/nested` an operator removed after a revert: the
 * agent migrates, reverts, the operator removes `D/nested`, the next leg's
 * gate makes it again, and the tenants migrate into it once more.
 */
async function recordedNestedAgain(root: string, skip?: FsyncName): Promise<Audited> {
  assert.ok(
    fs.existsSync(STRACE),
    `${STRACE} is missing: the audit records the agent under strace (scripts/test.sh installs it)`,
  )
  const world = await makeWorld(path.join(root, 'world'), HOSTS, { firstSeed: SEED * 7919 })
  const { sb } = world
  const hosts = world.tenants.map((t) => t.host)
  await recordIntent(sb, 'nested')
  const { image: initial, nextIno } = loadImage(sb.dataDir)
  const traceFile = path.join(root, 'agent.strace')
  const nested = path.join(sb.dataDir, 'nested')
  const port = await freePort()
  const url = `http://127.0.0.1:${port}`
  const env = sandboxEnv(sb, {
    CARLOS_AGENT_LISTEN: `127.0.0.1:${port}`,
    CARLOS_FAILPOINT: skip === undefined ? '' : `skip-fsync:${skip}`,
  })
  const args = [
    '-f',
    '-y',
    '-qq',
    '-xx',
    '-ttt',
    '-s',
    '65536',
    '-e',
    `trace=${TRACED}`,
    '-o',
    traceFile,
    process.execPath,
    MAIN_JS,
    'serve',
  ]
  // strace and the agent it runs are one process group: killed whole should the test end before them.
  const child = spawnGroup(STRACE, args, { env, stdio: ['ignore', 'ignore', 'pipe'] })
  let stderr = ''
  child.stderr?.setEncoding('utf8').on('data', (s: string) => (stderr += s))
  let exited = false
  child.once('exit', () => (exited = true))
  try {
    await waitConverged(url, hosts, 'nested', () => exited, 60_000)
    await recordIntent(sb, 'flat')
    await waitConverged(url, hosts, 'flat', () => exited, 60_000)
    // The operator's clean-up: only the emptied nested roots are left. A
    // self-check may be making its probe in there meanwhile: try again.
    for (let i = 0; ; i++) {
      try {
        fs.rmSync(nested, { recursive: true, force: true })
        break
      } catch (err) {
        if (i >= 20) throw err
        await delay(20)
      }
    }
    await recordIntent(sb, 'nested')
    await waitConverged(url, hosts, 'nested', () => exited, 60_000)
  } catch (err) {
    throw new Error(`${err instanceof Error ? err.message : String(err)}\nstrace: ${stderr.slice(-2000)}`)
  } finally {
    for (const pid of childrenOf(child.pid ?? -1)) process.kill(pid, 'SIGTERM')
    await ended(child, 'strace, once its agent got SIGTERM')
  }
  const calls = parseTrace(fs.readFileSync(traceFile, 'latin1'))
  const lowered = lower(calls, sb.dataDir, initial, nextIno)
  assert.deepEqual(lowered.skipped, [], 'every call under the data root was lowered')
  const mkdirs = lowered.ops.filter((o) => o.what === `mkdir ${nested}`)
  assert.equal(mkdirs.length, 2, 'the gate made D/nested twice: at start, and after the operator removed it')
  return {
    report: audit(lowered.ops, initial, sb.dataDir),
    shown: (s) => s.replaceAll(sb.dataDir, 'D'),
    ops: lowered.ops,
    initial,
    world,
    calls,
  }
}

/** A report's violations, one a line, as the failure and the diagnostics show them. */
function lines(a: Audited): string {
  return a.report.violations.map((v) => `${v.rule}: ${a.shown(v.message)}`).join('\n')
}

/** Every move the audit followed went the whole way: journal, rename, commit, unlink. */
function assertFollowed(a: Audited, moves: number): void {
  assert.equal(a.report.moves.length, moves, `moves followed: ${JSON.stringify(a.report.moves)}`)
  for (const m of a.report.moves)
    assert.ok(
      m.journal < m.rename && m.rename < m.commit && m.commit < m.unlink,
      `${m.host} to ${m.to} was followed in order: ${JSON.stringify(m)}`,
    )
}

/**
 * The fsyncs and fdatasyncs the loop's thread made from the first journal
 * written to the last one removed: design §3.6 has it wait on the disk for
 * none of them (the files thread, preflight's and libuv's threads do).
 */
function loopFsyncsWhileMoving(a: Audited): string[] {
  // The first call traced is the process's own, before it had a thread.
  const loop = a.calls[0]?.pid
  const journal = /\/layout\/[^/ ]+\.journal( |$)/
  const from = a.ops.find((o) => o.op === 'rename' && journal.test(o.what))?.t
  const to = a.ops.findLast((o) => o.op === 'unlink' && journal.test(o.what))?.t
  assert.ok(from !== undefined && to !== undefined && to > from, 'the trace holds journals written and removed')
  return a.calls
    .filter((c) => c.t >= from && c.t <= to && c.pid === loop && (c.name === 'fsync' || c.name === 'fdatasync'))
    .map((c) => `${c.name}(${c.args.join(', ')})`)
}

void test('the recorded migrate and revert keeps every rule of the move, for every host', async (t) => {
  const a = await recorded(await tmpDir(t, 'layoutd-audit-'))
  assert.equal(lines(a), '')
  assertFollowed(a, 2 * HOSTS)
  assert.deepEqual(loopFsyncsWhileMoving(a), [], "the loop's thread waited on the disk while tenants moved")
})

void test("D/nested made again by the gate after the registry's first fsync is made durable before anything moves into it", async (t) => {
  const a = await recordedNestedAgain(await tmpDir(t, 'layoutd-audit-'))
  assert.equal(lines(a), '')
  assertFollowed(a, 3 * HOSTS)
})

/** The rule each fsync guards: taking the fsync out must break it. */
const GUARDS: Record<FsyncName, AuditRule> = {
  'layout-dir': 'journal-before-rename',
  'journal-data': 'journal-before-rename',
  'journal-dir': 'journal-before-rename',
  'prepare-parents': 'destination-before-rename',
  'run-mode': 'run-before-commit',
  'rename-source-parent': 'parents-before-commit',
  'rename-dest-parent': 'parents-before-commit',
  'registry-commit': 'commit-before-journal-removal',
  'journal-remove-dir': 'journal-removal-durable',
  'nested-entry': 'destination-before-rename',
}

/**
 * The recording each fsync's case needs. `layout-dir` guards the `D/layout`
 * the pass makes. Under a recorded intent the agent keeps the record before
 * the pass runs (design §7.7), and that write makes `D/layout`, durable by
 * the same fsync; with it taken out, the registry's first WAL fsync, which
 * SQLite follows with one of `D`, still comes before the first journal and
 * covers it by chance. So this case migrates by the nested default, which
 * keeps nothing: the pass's first journal makes `D/layout`, after that.
 */
async function recordedFor(root: string, name: FsyncName): Promise<Audited> {
  if (name === 'nested-entry') return recordedNestedAgain(root, name)
  if (name !== 'layout-dir') return recorded(root, name)
  const a = await recorded(root, name, { byDefault: true })
  const layout = path.join(a.world.sb.dataDir, 'layout')
  const mkdir = a.ops.findIndex((o) => o.what === `mkdir ${layout}`)
  const first = a.ops.find((o, i) => i > mkdir && o.op === 'create' && o.what.startsWith(`create ${layout}/`))
  assert.match(first?.what ?? '', /\.journal\.tmp$/, 'the pass made D/layout: its first file is a journal')
  return a
}

void describe('each of the move fsyncs taken out breaks the rule it guards', () => {
  void it('names a rule for every fsync skip-fsync can take out', () => {
    assert.deepEqual(Object.keys(GUARDS).sort(), [...FSYNC_NAMES].sort())
  })
  for (const name of FSYNC_NAMES) {
    void it(`skip-fsync:${name} -> ${GUARDS[name]}`, async (t) => {
      const root = await tmpDir(t, 'layoutd-audit-')
      const a = await recordedFor(root, name)
      const broken = a.report.violations.filter((v) => v.rule === GUARDS[name])
      assert.ok(broken.length > 0, `without the ${name} fsync, ${GUARDS[name]} still held; violations:\n${lines(a)}`)
      // Per host: every host the batch moved is named, each on its own.
      assert.deepEqual(
        [...new Set(broken.map((v) => v.host))].sort(),
        a.report.moves
          .map((m) => m.host)
          .filter((h, i, all) => all.indexOf(h) === i)
          .sort(),
      )
      for (const v of a.report.violations) t.diagnostic(`${v.rule}: ${a.shown(v.message)}`)
      if (name === 'nested-entry') await nestedLostState(a, t)
    })
  }
})

/**
 * The crash state the missing `nested-entry` fsync lets a power cut leave,
 * written out and handed to the real agent: the crash lands after the last
 * migration's commit was fsynced and before its journals go; it keeps every
 * call made until then except the gate's `mkdir D/nested`, which nothing
 * made durable. Every tree moved under it is gone from both places, and
 * recovery can only keep the hosts fenced ("files missing"). With the fsync
 * the audit finds that mkdir durable before the renames, and the model
 * allows no such state.
 */
async function nestedLostState(a: Audited, t: { diagnostic: (s: string) => void }): Promise<void> {
  const { ops, world } = a
  const mkdir = ops.findLastIndex((o) => o.what === `mkdir ${path.join(world.sb.dataDir, 'nested')}`)
  const last = a.report.moves.filter((m) => m.to === 'nested').slice(-HOSTS)
  const at = Math.min(...last.map((m) => m.unlink))
  const dur = durableAt(ops)
  assert.ok(
    dur[mkdir] === Infinity && last.every((m) => (dur[m.commit] ?? Infinity) < at),
    'the mkdir is never durable; the commit is, before the crash',
  )
  const kept = [...ops.keys()].filter((i) => i < at && i !== mkdir)
  fs.renameSync(world.sb.dataDir, `${world.sb.dataDir}.recorded`)
  materialise(replay(a.initial, ops, kept), world.sb.dataDir)
  const agent = await AgentProcess.start(world.sb)
  try {
    for (let i = 0; !(await agent.ready().catch(() => false)); i++) {
      assert.ok(i < 600 && agent.exit === undefined, `the agent was not ready on the crash state:\n${agent.tail()}`)
      await delay(50)
    }
    const report = await agent.status()
    for (const m of last) {
      const row = report.rows[m.host]
      assert.equal(row?.layout, 'fenced', `${m.host}: ${JSON.stringify(row)}`)
      assert.equal(row.code, 'files_missing', `${m.host}: ${JSON.stringify(row)}`)
      t.diagnostic(
        `crash state without nested-entry: ${m.host} ${row.layout}: ${row.reason.replaceAll(world.sb.dataDir, 'D')}`,
      )
    }
  } finally {
    await agent.kill()
  }
  const c = checkState({ ...world, tenants: world.tenants.map((x) => ({ ...x, key: undefined })) })
  assert.deepEqual(
    c.problems.filter((p) => p.endsWith('tree is in neither place')).sort(),
    last.map((m) => `${m.host}: tree is in neither place`).sort(),
  )
}

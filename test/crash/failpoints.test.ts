// A crash at every step of a move (design §3), both directions: the real
// agent kills itself with SIGKILL at the step (CARLOS_FAILPOINT), the state
// it leaves is checked against what that step must leave, then the agent is
// started again and must finish the move exactly (§4): every tree
// byte-identical in exactly one place, its row agreeing, no journal left.
// Two tenants share each batch: the subject (first in row order) and a
// bystander, so a crash in the middle of a batch is covered too.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import http from 'node:http'
import path from 'node:path'
import { describe, it, type TestContext } from 'node:test'
import { request } from 'undici'
import { checkState, layoutFiles, makeWorld, rowPathsFor, treePrint, type World } from '../../bench/crash.js'
import type { Mode } from '../../src/domain/modes.js'
import { flatPaths, nestedPaths, nestedRoot, pathsFor } from '../../src/domain/paths.js'
import type { LayoutReport } from '../../src/domain/schemas.js'
import { FAILPOINT_STEPS } from '../../src/infra/failpoint.js'
import { Registry } from '../../src/infra/registry.js'
import { SqliteClaimStore } from '../../src/infra/wake-claims.js'
import { AgentProcess, recordIntent, sandboxToken, type Exit } from '../helpers/agent-process.js'
import { tmpDir } from '../helpers/tmp.js'
import { blackhole } from '../infra/deploy-etcd/fixtures.js'

const other = (m: Mode): Mode => (m === 'nested' ? 'flat' : 'nested')

/** How long one agent life may take: a loaded two-core machine starts node slowly. */
const LIFE_MS = 60_000

interface World2 {
  w: World
  /** The agents the test started, killed when it ends, before its temp dir goes (after hooks run in order). */
  agents: AgentProcess[]
  /** First in row order: the one a per-host failpoint names. */
  subject: string
  bystander: string
  from: Mode
  to: Mode
}

/** Two tenants in `from`, and an intent recorded for `to`. */
async function setup(t: TestContext, to: Mode, opts: { force?: boolean } = {}): Promise<World2> {
  const from = other(to)
  const agents: AgentProcess[] = []
  t.after(() => Promise.all(agents.map((a) => a.kill())))
  const w = await makeWorld(await tmpDir(t, 'layoutd-fp-'), 2, { mode: from })
  const [subject, bystander] = w.tenants.map((x) => x.host).sort()
  assert.ok(subject !== undefined && bystander !== undefined)
  await recordIntent(w.sb, to, opts)
  return { w, agents, subject, bystander, from, to }
}

async function start(
  s: World2,
  opts: { failpoint?: string; env?: Record<string, string> } = {},
): Promise<AgentProcess> {
  // Node itself can take longer than the helper's default to listen when the box is loaded.
  const agent = await AgentProcess.start(s.w.sb, { listenTimeoutMs: LIFE_MS, ...opts })
  s.agents.push(agent)
  return agent
}

/** Waits for an agent started with a failpoint to kill itself there. */
async function crashed(agent: AgentProcess): Promise<Exit> {
  const exit = await Promise.race([
    agent.exited,
    new Promise<'late'>((resolve) => setTimeout(resolve, LIFE_MS, 'late').unref()),
  ])
  assert.notEqual(exit, 'late', `the failpoint did not fire within ${LIFE_MS} ms:\n${agent.tail()}`)
  assert.deepEqual(exit, { code: null, signal: 'SIGKILL' }, `the agent did not die at its failpoint:\n${agent.tail()}`)
  return exit as Exit
}

/** Where a tenant's tree is, and what its row says, with no agent running. */
function where(w: World, host: string): { files: Mode | 'both' | 'none'; row: Mode | 'other' } {
  const t = w.tenants.find((x) => x.host === host)
  assert.ok(t !== undefined)
  const flat = fs.existsSync(flatPaths(w.dirs, host).dir)
  const nested = fs.existsSync(nestedPaths(w.dirs, host).dir)
  const reg = Registry.open(w.sb.dataDir)
  try {
    const r = reg.get(host)
    const is = (m: Mode): boolean => {
      const p = rowPathsFor(w, t, m)
      return r?.dir === p.dir && r.socket === p.socket && r.db === p.db
    }
    return {
      files: flat && nested ? 'both' : flat ? 'flat' : nested ? 'nested' : 'none',
      row: is('flat') ? 'flat' : is('nested') ? 'nested' : 'other',
    }
  } finally {
    reg.close()
  }
}

/** Waits until the report gives every host its word with the leg idle; answers that report. */
function settled(agent: AgentProcess, words: Record<string, string>): Promise<LayoutReport> {
  return agent.waitFor(
    `rows ${JSON.stringify(words)}`,
    async () => {
      const r = await agent.status()
      const ok =
        !r.leg.running && !r.leg.pending && Object.entries(words).every(([h, word]) => r.rows[h]?.layout === word)
      return ok ? r : undefined
    },
    LIFE_MS,
  )
}

/** What each step leaves for the subject: where its files are, what its row says, whether its journal is there. */
function frozen(step: string, s: World2): { files: Mode; row: Mode; journal: boolean } {
  const { from: F, to: T } = s
  switch (step) {
    case 'after-fence':
    case 'after-aside':
      return { files: F, row: F, journal: false }
    case 'after-journal':
    case 'after-preflight':
    case 'after-hold':
    case 'after-prepare':
      return { files: F, row: F, journal: true }
    case 'after-rename':
      return { files: T, row: F, journal: true }
    case 'after-row':
      return { files: T, row: T, journal: true }
    case 'after-journal-remove':
    case 'after-lift':
      return { files: T, row: T, journal: false }
    default:
      throw new Error(`no expectation for ${step}`)
  }
}

/** The directory a move's step 6 makes, absent before it for these tenants. */
function destParent(s: World2, host: string): string {
  return s.to === 'nested' ? nestedRoot(s.w.dirs, host) : path.dirname(flatPaths(s.w.dirs, host).dir)
}

const STEPS = FAILPOINT_STEPS.filter((s) => s !== 'after-stop')

void describe('a crash at each step of a move finishes exactly after a restart', { concurrency: 3 }, () => {
  void it('covers every step the failpoints name', () => {
    // A step added to the pass without a case here fails this.
    assert.deepEqual([...STEPS, 'after-stop'].sort(), [...FAILPOINT_STEPS].sort())
  })

  for (const to of ['nested', 'flat'] as const) {
    for (const step of STEPS) {
      void it(`${step}, to ${to}`, async (t) => {
        const s = await setup(t, to)
        const { w, subject, bystander } = s
        const sub = w.tenants.find((x) => x.host === subject)
        assert.ok(sub !== undefined)
        if (step === 'after-hold') {
          // A second name for one of its files: a reason the tenant could have caused (step 5).
          const dir = pathsFor(w.dirs, subject, s.from).dir
          fs.linkSync(path.join(dir, 'index.html'), path.join(dir, 'second-name'))
          sub.hash = treePrint(dir).hash
        }
        const stray = path.join(pathsFor(w.dirs, subject, to).dir, 'not-the-move.txt')
        if (step === 'after-aside') {
          // Something at the destination the move did not put there (step 6).
          fs.mkdirSync(path.dirname(stray), { recursive: true })
          fs.writeFileSync(stray, 'left here by someone else\n')
        }

        await crashed(await start(s, { failpoint: step }))

        const want = frozen(step, s)
        for (const host of [subject, bystander]) {
          const at = where(w, host)
          const wantHost =
            step === 'after-hold' && host === bystander ? { files: s.from, row: s.from, journal: true } : want
          assert.deepEqual(at, { files: wantHost.files, row: wantHost.row }, `${host} at ${step}`)
          assert.equal(layoutFiles(w.dirs).journals.has(host), wantHost.journal, `${host}: journal at ${step}`)
        }
        const j = layoutFiles(w.dirs).journals.get(subject)
        if (want.journal) assert.equal(j?.to, to, 'the journal names the move')
        if (step === 'after-hold')
          assert.deepEqual(layoutFiles(w.dirs).holds, [subject], 'the hold marker is written before the journal goes')
        if (step === 'after-preflight') assert.equal(fs.existsSync(destParent(s, subject)), false, 'step 6 has not run')
        if (step === 'after-prepare') {
          assert.equal(fs.existsSync(destParent(s, subject)), true, 'step 6 made the destination parent')
          if (to === 'nested') {
            assert.equal(fs.statSync(nestedRoot(w.dirs, subject)).mode & 0o7777, 0o710)
            assert.equal(fs.statSync(path.dirname(nestedPaths(w.dirs, subject).socket)).mode & 0o7777, 0o2770)
          }
        }
        if (step === 'after-aside') {
          assert.equal(fs.existsSync(stray), false, 'the stray file left the destination')
          const asideHost = path.join(w.dirs.dataDir, 'layout', 'aside', subject)
          const [stamp, ...more] = fs.readdirSync(asideHost)
          assert.ok(stamp !== undefined && more.length === 0, 'one aside stamp')
          const moved = path.join(asideHost, stamp, path.basename(path.dirname(stray)), 'not-the-move.txt')
          assert.equal(fs.readFileSync(moved, 'utf8'), 'left here by someone else\n')
        }
        const crash = checkState(w, { holds: step === 'after-hold' ? [subject] : [], aside: step === 'after-aside' })
        assert.deepEqual(crash.problems, [], 'the crash state keeps every invariant')

        // Restart: recovery finishes the move, the leg does the rest.
        const agent = await start(s)
        await agent.waitReady(LIFE_MS)
        const held = step === 'after-hold'
        const report = await settled(agent, { [subject]: held ? 'fenced' : to, [bystander]: to })
        if (held) assert.equal(report.rows[subject]?.code, 'second_name', report.rows[subject]?.reason)
        if (step === 'after-aside') assert.match(report.rows[subject]?.note ?? '', /^set aside at /)
        assert.deepEqual(await agent.stop(), { code: 0, signal: null }, agent.tail())

        const end = checkState(w, {
          final: (h) => (held && h === subject ? s.from : to),
          holds: held ? [subject] : [],
          aside: step === 'after-aside',
        })
        assert.deepEqual(end.problems, [])
        assert.deepEqual(where(w, subject), held ? { files: s.from, row: s.from } : { files: to, row: to })
        assert.deepEqual(where(w, bystander), { files: to, row: to })
      })
    }

    void it(`after-rename of the first host only (a batch split by the crash), to ${to}`, async (t) => {
      const s = await setup(t, to)
      const { w, subject, bystander } = s
      await crashed(await start(s, { failpoint: `after-rename:${subject}` }))
      assert.deepEqual(where(w, subject), { files: to, row: s.from })
      assert.deepEqual(where(w, bystander), { files: s.from, row: s.from })
      assert.deepEqual(
        [...layoutFiles(w.dirs).journals.keys()].sort(),
        [subject, bystander].sort(),
        'both are journaled',
      )
      assert.deepEqual(checkState(w).problems, [])

      const agent = await start(s)
      await agent.waitReady(LIFE_MS)
      await settled(agent, { [subject]: to, [bystander]: to })
      await agent.stop()
      assert.deepEqual(checkState(w, { final: to }).problems, [])
    })

    void it(`after-rename, then the intent flips back: finished or rolled back exactly, to ${to}`, async (t) => {
      const s = await setup(t, to)
      const { w, subject, bystander } = s
      await crashed(await start(s, { failpoint: `after-rename:${subject}` }))
      await recordIntent(w.sb, s.from)
      const agent = await start(s)
      await agent.waitReady(LIFE_MS)
      // The subject's files had moved (finished, then moved back by the leg);
      // the bystander's had not (rolled back): both end where they began.
      await settled(agent, { [subject]: s.from, [bystander]: s.from })
      await agent.stop()
      assert.deepEqual(checkState(w, { final: s.from }).problems, [])
    })
  }

  void it('a journal recovery must keep (files at both ends) keeps its host fenced and not wakeable until an operator decides', async (t) => {
    const s = await setup(t, 'nested')
    const { w, subject, bystander } = s
    await crashed(await start(s, { failpoint: 'after-rename' }))
    // Someone recreates the old directory: the journal's files are now at both ends.
    const flatDir = flatPaths(w.dirs, subject).dir
    fs.mkdirSync(flatDir)
    fs.writeFileSync(path.join(flatDir, 'who-made-me.txt'), 'not the move\n')

    const agent = await start(s)
    await agent.waitReady(LIFE_MS)
    const report = await settled(agent, { [subject]: 'fenced', [bystander]: 'nested' })
    const reason = report.rows[subject]?.reason ?? ''
    assert.equal(report.rows[subject]?.code, 'ambiguous', reason)
    assert.ok(
      reason.includes(flatDir) && reason.includes(nestedPaths(w.dirs, subject).dir),
      `the reason names both paths: ${reason}`,
    )
    assert.ok(layoutFiles(w.dirs).journals.has(subject), 'the journal stays while the host is kept')
    // The activator's gate is open (/ready 200), yet this host does not wake.
    assert.equal(await agent.ready(), true)

    // The operator removes the stranger; the next run finishes the move.
    fs.rmSync(flatDir, { recursive: true })
    await agent.converge()
    await settled(agent, { [subject]: 'nested', [bystander]: 'nested' })
    await agent.stop()
    assert.deepEqual(checkState(w, { final: 'nested' }).problems, [])
  })

  void it('while start-up recovery runs, a host a journal names is reported fenced', async (t) => {
    const s = await setup(t, 'nested')
    const { w, subject } = s
    await crashed(await start(s, { failpoint: `after-rename:${subject}` }))
    // Start-up reads the intent because a journal is there. A deploy store that accepts connections and
    // never answers holds that read to its bound (a dial, then the request's), and with it the agent in its
    // recovering phase while the test looks.
    const silent = await blackhole(t)
    const agent = await start(s, { env: { CARLOS_DEPLOYMENT_ETCD: silent.url } })
    await agent.waitFor(
      'the recovering phase',
      async () => ((await agent.readiness()).phase === 'recovering' ? true : undefined),
      LIFE_MS,
    )
    const report = await agent.status()
    assert.equal(await agent.ready(), false, 'not ready while recovering')
    assert.ok(silent.requests() > 0, 'the intent was asked of the silent store')
    await agent.kill()
    const row = report.rows[subject]
    assert.equal(
      row?.layout,
      'fenced',
      `its files are in ${nestedPaths(w.dirs, subject).dir}, its row says flat, and the report says ${JSON.stringify(row)}`,
    )
  })

  void it('after-stop: a host awake at its move is stopped, and a crash right after is recovered', async (t) => {
    const s = await setup(t, 'nested', { force: true })
    const { w, subject, bystander } = s
    // A claim persisted before the agent starts: the tenant was awake when layoutd stopped.
    const reg = Registry.open(w.sb.dataDir)
    const claims = SqliteClaimStore.open(reg.file)
    claims.claimWake(subject, new Date())
    claims.close()
    reg.close()
    // The activator: asked to stop the instance, it releases the claim as the activator contract says.
    let agentUrl = ''
    const released: number[] = []
    const activator = http.createServer((req, res) => {
      const m = /^\/instances\/([^/]+)\/stop$/.exec(req.url ?? '')
      res.writeHead(m === null ? 404 : 202).end()
      if (m?.[1] === undefined) return
      request(`${agentUrl}/wakes/${m[1]}`, {
        method: 'DELETE',
        headers: { authorization: `Bearer ${sandboxToken(w.sb)}` },
      })
        .then(async (r) => {
          released.push(r.statusCode)
          await r.body.dump()
        })
        .catch((err: unknown) => {
          released.push(-1)
          t.diagnostic(`release failed: ${String(err)}`)
        })
    })
    await new Promise<void>((resolve) => activator.listen(0, '127.0.0.1', resolve))
    t.after(() => activator.close())
    const addr = activator.address()
    assert.ok(addr !== null && typeof addr === 'object')

    const agent = await start(s, {
      failpoint: 'after-stop',
      env: { CARLOS_ACTIVATOR_URL: `http://127.0.0.1:${addr.port}` },
    })
    agentUrl = agent.url
    const first = await agent
      .waitFor('the stop asked and answered', () => Promise.resolve(released[0]), LIFE_MS)
      .catch((err: unknown) => {
        if (agent.exit !== undefined) return 0 // died at the failpoint: the release was answered
        throw err
      })
    if (first === 404) {
      // DELETE /wakes/:host is a later issue: without it no claim can be released over HTTP.
      await agent.kill()
      t.todo('DELETE /wakes/:host is not served yet; the after-stop crash needs it to release the claim')
      return
    }
    await crashed(agent)
    assert.deepEqual(where(w, subject), { files: 'flat', row: 'flat' })
    assert.equal(layoutFiles(w.dirs).journals.has(subject), false, 'stopped, not yet journaled')
    assert.deepEqual(checkState(w).problems, [])

    const again = await start(s)
    await again.waitReady(LIFE_MS)
    await settled(again, { [subject]: 'nested', [bystander]: 'nested' })
    await again.stop()
    assert.deepEqual(checkState(w, { final: 'nested' }).problems, [])
  })
})

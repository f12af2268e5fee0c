// The grant auditor (test/helpers/grant-auditor.ts) through the operator
// paths that once made the gate say yes where the files were not (design
// §6): a converge cut by kill -9, a registry restored from a copy taken
// while flat, a batch journal removed by hand, and an import of hosts whose
// files already exist. The real agent process serves a real socket; the
// auditor claims random tenants throughout and checks each grant against
// the disk. Every scenario ends with no wrong grant, and with grants
// checked (a scenario that granted nothing would prove nothing).
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { test, type TestContext } from 'node:test'
import { setTimeout as delay } from 'node:timers/promises'
import { makeWorld, rng, treePrint, type World } from '../../bench/crash.js'
import { pathsFor } from '../../src/domain/paths.js'
import { AgentProcess, recordIntent, runCli, type StartOptions } from '../helpers/agent-process.js'
import { audited, batchJournals, GrantAuditor, type AuditCounts } from '../helpers/grant-auditor.js'
import { tmpDir } from '../helpers/tmp.js'

const SEED = Number(process.env.AUDIT_SEED ?? 20261207)
const TENANTS = 40
/** How long a scenario may wait for the agent to be ready, converge, or the auditor to claim enough. */
const WAIT_MS = 120_000

/** The agent's bearer token where it keeps one in its data root, for the auditor's claims. */
function tokenOf(w: World): () => string | undefined {
  const file = path.join(w.sb.dataDir, 'agent.token')
  return () => {
    try {
      return fs.readFileSync(file, 'utf8').trim()
    } catch {
      return undefined
    }
  }
}

/** One box under audit: the world, the auditor, and the agent's current life, all ended with the test. */
class Audit {
  agent: AgentProcess | undefined
  private constructor(
    readonly w: World,
    readonly auditor: GrantAuditor,
    readonly env: Record<string, string>,
  ) {}

  static async start(t: TestContext, w: World, seed: number): Promise<Audit> {
    const auditor = await GrantAuditor.start({ dirs: w.dirs, tenants: audited(w.tenants), seed, token: tokenOf(w) })
    const env = {
      CARLOS_ACTIVATOR_URL: auditor.url,
      // Short clocks: an awake tenant is stopped for its move within the scenario.
      CARLOS_LAYOUT_AWAKE_GRACE: '2s',
      CARLOS_LAYOUT_RETRY: '1s',
    }
    const audit = new Audit(w, auditor, env)
    t.after(async () => {
      await audit.agent?.kill()
      await auditor.close()
    })
    return audit
  }

  get hosts(): string[] {
    return this.w.tenants.map((x) => x.host)
  }

  /** A new life of the agent, ready, with the auditor attached. */
  async up(opts: StartOptions = {}): Promise<AgentProcess> {
    const agent = await AgentProcess.start(this.w.sb, { ...opts, env: { ...this.env, ...opts.env } })
    this.agent = agent
    await agent.waitReady(WAIT_MS)
    await this.auditor.attach(agent.url)
    return agent
  }

  /** Ends the current life: SIGKILL, or SIGTERM when graceful. */
  async down(how: 'kill' | 'stop'): Promise<void> {
    this.auditor.losing()
    if (how === 'kill') await this.agent?.kill()
    else await this.agent?.stop()
    await this.auditor.detach()
  }

  /** Waits until the auditor has sent n more claims, so a phase is audited however fast the machine. */
  async claimsMore(n: number): Promise<void> {
    const want = this.auditor.counts.claims + n
    const deadline = performance.now() + WAIT_MS
    while (this.auditor.counts.claims < want) {
      if (performance.now() > deadline) throw new Error(`the auditor sent fewer than ${n} claims in ${WAIT_MS} ms`)
      await delay(50)
    }
  }

  /** The counts, after the auditor drained (every run released). */
  async finish(t: TestContext): Promise<AuditCounts> {
    await this.auditor.drain()
    const c = this.auditor.counts
    t.diagnostic(
      `${c.claims} claims, ${c.grants} grants (${c.treesChecked} trees hashed), refused ${JSON.stringify(c.refused)}`,
    )
    return c
  }
}

/** No wrong grant, no answer outside the contract, and grants were checked. */
/** checked: the answers that prove the audit was not empty (the grants, unless the test says which). */
function assertClean(c: AuditCounts, checked = c.grants): void {
  const wrong = c.wrongGrants
  assert.deepEqual(wrong.slice(0, 5), [], `${wrong.length} wrong grants; every grant names the tenant's own files`)
  assert.deepEqual(c.errors, [], 'every answer was one the contract allows')
  assert.ok(checked > 0, `the auditor checked answers: ${c.grants} grants, refused ${JSON.stringify(c.refused)}`)
}

/** Every tenant's tree whole at its mode's dir, and nothing at the other shape's. */
function assertTreesAt(w: World, mode: 'flat' | 'nested'): void {
  for (const t of w.tenants) {
    const here = pathsFor(w.dirs, t.host, mode).dir
    const other = pathsFor(w.dirs, t.host, mode === 'flat' ? 'nested' : 'flat').dir
    assert.equal(treePrint(here).hash, t.hash, `${t.host}: its tree at ${here}`)
    assert.equal(fs.existsSync(other), false, `${t.host}: nothing at ${other}`)
  }
}

void test('grant audit: a converge cut by kill -9 grants only where the files are', { timeout: 300_000 }, async (t) => {
  const w = await makeWorld(await tmpDir(t, 'layoutd-audit-kill-'), TENANTS, { firstSeed: SEED })
  const audit = await Audit.start(t, w, SEED)
  await audit.up()
  await recordIntent(w.sb, 'nested')
  const random = rng(SEED)
  for (let kill = 0; kill < 4; kill++) {
    await audit.claimsMore(5)
    await delay(100 + random() * 1500)
    await audit.down('kill')
    await audit.up()
  }
  await audit.agent?.waitConverged(audit.hosts, 'nested', WAIT_MS)
  await audit.claimsMore(20)
  assertClean(await audit.finish(t))
  await audit.down('stop')
  assertTreesAt(w, 'nested')
})

void test(
  'grant audit: a registry restored from a copy taken while flat grants nothing where files left',
  { timeout: 300_000 },
  async (t) => {
    const root = await tmpDir(t, 'layoutd-audit-restore-')
    const w = await makeWorld(root, TENANTS, { firstSeed: SEED + 1 })
    const audit = await Audit.start(t, w, SEED + 1)
    // Flat recorded first: the nested default would otherwise start moving before the backup is taken.
    await recordIntent(w.sb, 'flat')
    await audit.up()
    await audit.claimsMore(20)
    const backup = path.join(root, 'registry-flat.db')
    const saved = await runCli(w.sb, ['registry', 'backup', backup])
    assert.equal(saved.exit.code, 0, `registry backup: ${saved.stderr}`)
    await recordIntent(w.sb, 'nested')
    await audit.agent?.waitConverged(audit.hosts, 'nested', WAIT_MS)
    await audit.claimsMore(20)
    await audit.down('stop')
    const restored = await runCli(w.sb, ['registry', 'restore', backup])
    assert.equal(restored.exit.code, 0, `registry restore: ${restored.stderr}`)
    const grantsBefore = audit.auditor.counts.grants
    await audit.up()
    await audit.claimsMore(3 * TENANTS)
    const c = await audit.finish(t)
    assertClean(c)
    assert.equal(c.grants, grantsBefore, 'no grant after the restore: every row names the dir its files left')
    assert.ok((c.refused.files_elsewhere ?? 0) > 0, 'the claims after the restore were refused files_elsewhere')
    await audit.down('stop')
    assertTreesAt(w, 'nested')
  },
)

void test(
  'grant audit: a batch journal removed by hand grants nothing over the files it moved',
  { timeout: 300_000 },
  async (t) => {
    const w = await makeWorld(await tmpDir(t, 'layoutd-audit-batch-'), TENANTS, { firstSeed: SEED + 2 })
    const audit = await Audit.start(t, w, SEED + 2)
    // The first life kills itself once the first batch's renames are done, before its rows are rewritten.
    const first = await audit.up({ failpoint: 'after-rename' })
    await audit.claimsMore(10)
    await recordIntent(w.sb, 'nested')
    const exit = await Promise.race([first.exited, delay(WAIT_MS, undefined)])
    assert.equal(exit?.signal, 'SIGKILL', 'the agent stopped at its failpoint')
    await audit.down('kill')
    // Requests in flight when the agent killed itself failed; the auditor could not be told first.
    const cutShort = audit.auditor.counts.errors.length
    const journals = batchJournals(w.dirs)
    assert.ok(journals.length > 0, 'the cut batch left its journal')
    // What the runbook once said to do with a journal that could not be read.
    for (const j of journals) fs.rmSync(j)
    const grantsBefore = audit.auditor.counts.grants
    const moved = w.tenants.filter((x) => fs.existsSync(pathsFor(w.dirs, x.host, 'nested').dir))
    assert.ok(moved.length > 0, 'the batch moved files before the cut')
    await audit.up()
    await audit.claimsMore(3 * TENANTS)
    const c = await audit.finish(t)
    // Most hosts' files moved with the cut batch and are refused as elsewhere; a grant of the rest comes only
    // where a claim finds its host past its move, which a loaded machine may never give: either is checked.
    assertClean({ ...c, errors: c.errors.slice(cutShort) }, c.grants + (c.refused.files_elsewhere ?? 0))
    t.diagnostic(`${moved.length} hosts moved by the cut batch; ${c.grants - grantsBefore} grants after the removal`)
    await audit.down('stop')
    for (const x of w.tenants) {
      const at = ['flat', 'nested'].filter((m) => fs.existsSync(pathsFor(w.dirs, x.host, m as 'flat').dir))
      assert.equal(at.length, 1, `${x.host}: its files in exactly one place (${at.join(', ')})`)
      assert.equal(treePrint(pathsFor(w.dirs, x.host, at[0] as 'flat').dir).hash, x.hash, `${x.host}: its tree`)
    }
  },
)

void test(
  'grant audit: an import of hosts whose files already exist grants their own files',
  { timeout: 300_000 },
  async (t) => {
    const w = await makeWorld(await tmpDir(t, 'layoutd-audit-import-'), TENANTS, { firstSeed: SEED + 3 })
    // The files exist under D/apps; the registry that named them does not: a new box taking over old files.
    for (const f of ['registry.db', 'registry.db-wal', 'registry.db-shm'])
      fs.rmSync(path.join(w.sb.dataDir, f), { force: true })
    const audit = await Audit.start(t, w, SEED + 3)
    // No intent is recorded: the nested default stands in. The agent runs, so it answers the import's mint.
    await audit.up()
    const lines = w.tenants.map((x) => JSON.stringify({ host: x.host, kind: 'instance', hibernate: true }))
    const file = path.join(w.sb.root, 'import.jsonl')
    fs.writeFileSync(file, lines.join('\n') + '\n')
    const imported = await runCli(w.sb, ['routes', 'import', file])
    assert.equal(imported.exit.code, 0, `routes import: ${imported.stderr}`)
    await audit.agent?.waitConverged(audit.hosts, 'nested', WAIT_MS)
    await audit.claimsMore(2 * TENANTS)
    assertClean(await audit.finish(t))
    await audit.down('stop')
    assertTreesAt(w, 'nested')
  },
)

// The intent a box keeps in D/layout/intent.applied (design §7.7): a box
// recorded flat (the nested default in force) whose deploy store is gone,
// emptied or replaced when it starts again reads unreadable, named
// applied_intent_missing, and moves nothing; recording an intent, or
// `layoutd intent forget-applied`, ends it.
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import fs from 'node:fs/promises'
import path from 'node:path'
import { PassThrough } from 'node:stream'
import { test, type TestContext } from 'node:test'
import type { AgentBox } from '../helpers/agent.js'
import { addFlat, addNested, agentBox, recordIntent } from '../helpers/agent.js'
import { intentCommand } from '../../src/cli/commands/intent.js'
import { DirDeployStore } from '../../src/infra/deploy-dir.js'
import type { DeployStore } from '../../src/domain/ports.js'
import { EtcdDeployStore } from '../../src/infra/deploy-etcd/store.js'
import { EtcdServer } from '../helpers/etcd.js'
import { until } from '../helpers/until.js'

const HOSTS = ['a.example.com', 'b.example.com', 'c.example.com']

/** Every file under D/apps and D/nested, with a hash of its bytes: the tenants' trees. */
async function trees(dataDir: string): Promise<string[]> {
  const out: string[] = []
  const walk = async (dir: string): Promise<void> => {
    const entries = await fs.readdir(dir, { withFileTypes: true }).catch(() => [])
    for (const e of entries) {
      const p = path.join(dir, e.name)
      if (e.isDirectory()) await walk(p)
      else
        out.push(
          `${path.relative(dataDir, p)} ${createHash('sha256')
            .update(await fs.readFile(p))
            .digest('hex')}`,
        )
    }
  }
  await walk(path.join(dataDir, 'apps'))
  await walk(path.join(dataDir, 'nested'))
  return out.sort()
}

/** `layoutd intent ARGV` on the box's store; throws with stderr when it fails; answers stdout. */
async function intent(b: Pick<AgentBox, 'config'>, store: DeployStore, argv: string[]): Promise<string> {
  let out = ''
  let err = ''
  const stdout = new PassThrough().setEncoding('utf8').on('data', (s: string) => (out += s))
  const stderr = new PassThrough().setEncoding('utf8').on('data', (s: string) => (err += s))
  const code = await intentCommand(argv, { config: b.config, store, stdout, stderr, by: 'test' })
  assert.equal(code, 0, err)
  return out
}

/** A box recorded flat, converged, stopped: the nested default would move every tenant if it stood in. */
async function flatBox(t: TestContext, wrapStore?: () => DeployStore): Promise<AgentBox> {
  const b = await agentBox(t, { wrapStore })
  t.after(() => b.store.close())
  for (const h of HOSTS) await addFlat(b, h)
  await recordIntent(b, 'flat')
  await b.agent.start()
  await b.agent.converge(30_000)
  assert.equal(b.agent.report().mode, 'flat')
  const kept = JSON.parse(await fs.readFile(path.join(b.config.dataDir, 'layout', 'intent.applied'), 'utf8')) as {
    mode: string
  }
  assert.equal(kept.mode, 'flat', 'the box keeps the intent it applied')
  await b.close()
  await b.store.close()
  return b
}

/** The box started again on its data dir: converged once; answers its report. */
async function restarted(t: TestContext, dir: string, wrapStore?: () => DeployStore) {
  const b = await agentBox(t, { dir, wrapStore })
  t.after(() => b.store.close())
  await b.agent.start()
  const run = await b.agent.converge(30_000)
  return { b, run, report: b.agent.report() }
}

function assertHeld(report: ReturnType<AgentBox['agent']['report']>, why: RegExp): void {
  assert.equal(report.mode, 'unreadable')
  assert.equal(report.default, false, 'the nested default does not stand in')
  assert.ok(
    report.warnings.some((w) => w.includes('applied_intent_missing') && why.test(w)),
    JSON.stringify(report.warnings),
  )
}

void test('a box recorded flat whose deploy dir is gone at its next start reads unreadable and moves nothing', async (t) => {
  const first = await flatBox(t)
  await fs.rm(first.config.deploymentDir, { recursive: true })
  const before = await trees(first.config.dataDir)

  const { b, run, report } = await restarted(t, first.dir)
  assertHeld(report, /holds no record: gone or emptied/)
  assert.deepEqual(run?.results ?? [], [], 'no host moved')
  assert.deepEqual(await trees(b.config.dataDir), before, 'every tenant tree byte-identical')
  for (const h of HOSTS) assert.equal(report.rows[h]?.layout, 'flat')

  // `intent status` says so too, and fails.
  let err = ''
  const stderr = new PassThrough().setEncoding('utf8').on('data', (s: string) => (err += s))
  const store = new DirDeployStore(b.config.deploymentDir)
  const code = await intentCommand(['status'], { config: b.config, store, stdout: new PassThrough(), stderr })
  assert.equal(code, 1)
  assert.match(err, /applied_intent_missing/)

  // A tenant nested meanwhile: recording the intent meant converges it as recorded.
  await addNested(b, 'n.example.com')
  await intent(b, store, ['revert', '--fleet'])
  await b.agent.converge(30_000)
  const after = b.agent.report()
  assert.equal(after.mode, 'flat')
  assert.equal(after.rows['n.example.com']?.layout, 'flat', 'converged as recorded')
})

void test('a deploy dir replaced by an older copy reads unreadable, not the older record', async (t) => {
  const first = await flatBox(t)
  // Another store in its place: a record for the fleet older than the one applied, asking nested.
  await fs.rm(first.config.deploymentDir, { recursive: true })
  await new DirDeployStore(first.config.deploymentDir).record(
    { id: '20200101T000000.000Z-0ld000', mode: 'nested', force: false, recordedAt: '2020-01-01T00:00:00Z', by: 'x' },
    AbortSignal.timeout(5000),
  )
  const before = await trees(first.config.dataDir)
  const { b, run, report } = await restarted(t, first.dir)
  assertHeld(report, /holds 1 record, not that one and none newer addressing box kass-1: replaced/)
  assert.deepEqual(run?.results ?? [], [])
  assert.deepEqual(await trees(b.config.dataDir), before)
})

void test('intent forget-applied ends it: the store is read as it is, without a restart', async (t) => {
  const first = await flatBox(t)
  await fs.rm(first.config.deploymentDir, { recursive: true })
  const { b, report } = await restarted(t, first.dir)
  assert.equal(report.mode, 'unreadable')
  const said = await intent(b, new DirDeployStore(b.config.deploymentDir), ['forget-applied'])
  assert.match(said, /^forgot intent \S+ \(flat, read from dir /)
  // No intent: the nested default stands in (once the gate's probe has answered), as the operator chose.
  const after = await until('the nested default', async () => {
    await b.agent.converge(30_000)
    const r = b.agent.report()
    return r.mode === 'nested' ? r : undefined
  })
  assert.equal(after.default, true)
  for (const h of HOSTS) assert.equal(after.rows[h]?.layout, 'nested')
  assert.match(
    await intent(b, new DirDeployStore(b.config.deploymentDir), ['forget-applied']),
    /no applied intent is kept/,
  )
})

void test('an etcd re-created empty reads unreadable; an intent recorded there ends it', async (t) => {
  const etcd1 = await EtcdServer.forTest(t)
  const first = await flatBox(t, () => new EtcdDeployStore([etcd1.url], { prefix: '/kept/intents/' }))
  await etcd1.kill()
  // Another etcd, empty, where the first was: a new cluster with no key.
  const etcd2 = await EtcdServer.forTest(t)
  const store2 = () => new EtcdDeployStore([etcd2.url], { prefix: '/kept/intents/' })
  const before = await trees(first.config.dataDir)
  const { b, run, report } = await restarted(t, first.dir, store2)
  assertHeld(report, /holds no record/)
  assert.deepEqual(run?.results ?? [], [])
  assert.deepEqual(await trees(b.config.dataDir), before)

  const cli = store2()
  t.after(() => cli.close())
  await intent(b, cli, ['revert', '--fleet'])
  await b.agent.converge(30_000)
  assert.equal(b.agent.report().mode, 'flat', 'converges as recorded')
  assert.deepEqual(await trees(b.config.dataDir), before)
})

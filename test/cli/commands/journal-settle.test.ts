// `layoutd journal settle FILE|HOST|--all [--dry-run]` on a real data root
// with a batch's journal of five moves to nested: whole at dest as the row
// says, whole at dest with the row still at from, whole at from (the move
// never began), at both ends, at neither. The dry run prints the plan and
// changes no byte; the real run releases the three whole ones (one row
// rewritten) and keeps the other two in the rewritten journal, which a
// restarted agent still fences while it wakes the released at their paths.
// An agent holding the data root refuses it.
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test } from 'node:test'
import { main } from '../../../src/cli/commands/journal.js'
import { flatPaths, nestedPaths } from '../../../src/domain/paths.js'
import { AgentLock } from '../../../src/infra/agent-lock.js'
import { Registry } from '../../../src/infra/registry.js'
import { addFlat, addNested, agentBox, recordIntent, type AgentBox } from '../../helpers/agent.js'
import { Sink } from '../../helpers/sink.js'
import { until } from '../../helpers/until.js'

const WHOLE_AT_DEST = 'a.example.com'
const ROW_BEHIND = 'b.example.com'
const NEVER_BEGAN = 'e.example.com'
const BOTH = 'c.example.com'
const NEITHER = 'd.example.com'
const BATCH = '_batch-7.journal'
const STARTED = '2026-12-03T10:00:00.000Z'

/** A stopped box whose batch journal names the five moves above; answers its dir. */
async function settleBox(t: Parameters<typeof agentBox>[0]): Promise<AgentBox> {
  const b = await agentBox(t)
  const c = b.config
  await addNested(b, WHOLE_AT_DEST)
  // Its files renamed to nested, its row not yet rewritten: step 8 is left.
  await addFlat(b, ROW_BEHIND)
  await fs.mkdir(path.dirname(nestedPaths(c, ROW_BEHIND).dir), { recursive: true })
  await fs.rename(flatPaths(c, ROW_BEHIND).dir, nestedPaths(c, ROW_BEHIND).dir)
  await fs.mkdir(path.dirname(nestedPaths(c, ROW_BEHIND).socket))
  await addFlat(b, NEVER_BEGAN)
  await addFlat(b, BOTH)
  await fs.mkdir(nestedPaths(c, BOTH).dir, { recursive: true })
  await fs.writeFile(path.join(nestedPaths(c, BOTH).dir, 'host.txt'), 'a copy')
  await addFlat(b, NEITHER)
  await fs.rm(flatPaths(c, NEITHER).dir, { recursive: true })
  const moves = [WHOLE_AT_DEST, ROW_BEHIND, NEVER_BEGAN, BOTH, NEITHER].map((host) => ({
    host,
    to: 'nested',
    from: flatPaths(c, host),
    dest: nestedPaths(c, host),
  }))
  await fs.mkdir(path.join(c.dataDir, 'layout'), { recursive: true })
  await fs.writeFile(
    path.join(c.dataDir, 'layout', BATCH),
    `${JSON.stringify({ v: 2, generation: 7, startedAt: STARTED, moves })}\n`,
  )
  await recordIntent(b, 'nested')
  await b.close()
  return b
}

async function journal(b: AgentBox, ...argv: string[]) {
  const stdout = new Sink()
  const stderr = new Sink()
  const environ = { CARLOS_DATA_DIR: b.config.dataDir, CARLOS_DEPLOYMENT_DIR: b.config.deploymentDir }
  const code = await main(argv, { environ, stdout, stderr })
  return { code, out: stdout.text, err: stderr.text }
}

/** Every entry under dir, with a file's bytes (their sha256) and a symlink's target: the whole data root, to compare. */
async function tree(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {}
  for (const name of (await fs.readdir(dir, { recursive: true })).sort()) {
    const p = path.join(dir, name)
    const st = await fs.lstat(p)
    out[name] = st.isSymbolicLink()
      ? `-> ${await fs.readlink(p)}`
      : st.isFile()
        ? createHash('sha256')
            .update(await fs.readFile(p))
            .digest('hex')
        : `dir ${st.mode.toString(8)}`
  }
  return out
}

function rows(b: AgentBox): Record<string, string> {
  const registry = Registry.open(b.config.dataDir, { create: false })
  try {
    return Object.fromEntries(registry.list().map((r) => [r.host, r.dir]))
  } finally {
    registry.close()
  }
}

void test('settle --dry-run prints the plan host by host and changes no byte of the data root', async (t) => {
  const b = await settleBox(t)
  const before = await tree(b.config.dataDir)
  const r = await journal(b, 'settle', BATCH, '--dry-run')
  assert.equal(r.code, 0, r.err)
  const d = b.config
  assert.match(r.out, /^layout\/_batch-7\.journal: a batch's journal of 5 moves, started 2026-12-03T10:00:00\.000Z$/m)
  assert.ok(r.out.includes(`  would release ${WHOLE_AT_DEST} at ${nestedPaths(d, WHOLE_AT_DEST).dir}: `), r.out)
  assert.ok(
    r.out.includes(
      `  would release ${ROW_BEHIND} at ${nestedPaths(d, ROW_BEHIND).dir}: its files are at ` +
        `${nestedPaths(d, ROW_BEHIND).dir} and nothing is at ${flatPaths(d, ROW_BEHIND).dir}; its row named ` +
        `${flatPaths(d, ROW_BEHIND).dir}, rewritten to ${nestedPaths(d, ROW_BEHIND).dir}\n`,
    ),
    r.out,
  )
  assert.ok(r.out.includes(`  would release ${NEVER_BEGAN} at ${flatPaths(d, NEVER_BEGAN).dir}: `), r.out)
  assert.match(r.out, /^ {2}keep c\.example\.com: files at both .+; keep the tenant's files/m)
  assert.match(r.out, /^ {2}keep d\.example\.com: files at neither .+; find the tenant's files/m)
  assert.match(
    r.out,
    /^--dry-run: would rewrite layout\/_batch-7\.journal with the 2 kept moves \(c\.example\.com, d\.example\.com\); nothing was changed$/m,
  )
  assert.deepEqual(await tree(d.dataDir), before, 'files, registry and journal byte-identical')
})

void test('settle releases the whole hosts (a row rewritten), keeps the rest in the journal; a restarted agent fences them and wakes the others at their paths', async (t) => {
  const b = await settleBox(t)
  const d = b.config
  const r = await journal(b, 'settle', BATCH)
  assert.equal(r.code, 0, r.err)
  assert.match(r.out, /^ {2}releasing b\.example\.com at \S+: its files are at .+, rewritten to /m)
  assert.match(
    r.out,
    /^rewrote layout\/_batch-7\.journal with the 2 kept moves \(c\.example\.com, d\.example\.com\): a\.example\.com, b\.example\.com, e\.example\.com released$/m,
  )
  const kept = JSON.parse(await fs.readFile(path.join(d.dataDir, 'layout', BATCH), 'utf8')) as {
    v: number
    generation: number
    startedAt: string
    moves: Array<{ host: string }>
  }
  assert.deepEqual(
    { v: kept.v, generation: kept.generation, startedAt: kept.startedAt, hosts: kept.moves.map((m) => m.host) },
    { v: 2, generation: 7, startedAt: STARTED, hosts: [BOTH, NEITHER] },
  )
  assert.deepEqual(await fs.readdir(path.join(d.dataDir, 'layout')), [BATCH], 'no temporary file left')
  assert.deepEqual(rows(b), {
    [WHOLE_AT_DEST]: nestedPaths(d, WHOLE_AT_DEST).dir,
    [ROW_BEHIND]: nestedPaths(d, ROW_BEHIND).dir,
    [NEVER_BEGAN]: flatPaths(d, NEVER_BEGAN).dir,
    [BOTH]: flatPaths(d, BOTH).dir,
    [NEITHER]: flatPaths(d, NEITHER).dir,
  })

  const again = await agentBox(t, { dir: b.dir, start: true })
  await until('the isolation gate to open', () => again.agent.readiness().nested.allowed)
  for (const host of [WHOLE_AT_DEST, ROW_BEHIND]) {
    const answer = await again.agent.readyFor(host)
    assert.ok(answer.granted, `${host}: ${JSON.stringify(answer)}`)
    assert.equal(answer.grant.dir, nestedPaths(d, host).dir)
    assert.equal(await fs.readFile(path.join(answer.grant.dir, 'host.txt'), 'utf8'), host)
  }
  for (const [host, code] of [
    [BOTH, 'ambiguous'],
    [NEITHER, 'files_missing'],
  ] as const) {
    const answer = await again.agent.readyFor(host)
    assert.ok(!answer.granted, `${host} stays fenced: ${JSON.stringify(answer)}`)
    assert.equal(answer.refusal.code, code)
  }
})

void test('settle is refused while an agent holds the data root, the dry run too; nothing is changed', async (t) => {
  const b = await settleBox(t)
  const lock = AgentLock.acquire(b.config.dataDir)
  t.after(() => lock.release())
  const during = await tree(b.config.dataDir)
  for (const argv of [
    ['settle', '--all'],
    ['settle', BATCH, '--dry-run'],
  ]) {
    const r = await journal(b, ...argv)
    assert.equal(r.code, 1, r.out)
    assert.match(r.err, /refused: an agent runs on .+ \(pid [0-9]+, not listening yet\); .+ stop it/)
    assert.deepEqual(await tree(b.config.dataDir), during)
  }
})

void test('settle takes a FILE or a HOST, or --all, not both and not neither', async (t) => {
  const b = await settleBox(t)
  for (const argv of [['settle'], ['settle', BATCH, '--all']]) {
    const r = await journal(b, ...argv)
    assert.equal(r.code, 2, r.out)
    assert.match(r.err, /journal settle takes a FILE or a HOST, or --all/)
  }
})

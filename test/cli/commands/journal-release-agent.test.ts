// `layoutd journal release` beside a real running agent (design §8, §4.1):
// a host recovery kept fenced (its files at both ends of its journal) is
// settled by the operator, released by the command, and the agent, asked
// for a run, lifts the fence it keeps in memory: `/ready/HOST` answers 200
// from the same process, no restart.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test } from 'node:test'
import { flatPaths, nestedPaths } from '../../../src/domain/paths.js'
import type { Result } from '../../../src/domain/modes.js'
import { Registry } from '../../../src/infra/registry.js'
import { AgentProcess, makeSandbox, recordIntent, runCli } from '../../helpers/agent-process.js'
import { tmpDir } from '../../helpers/tmp.js'

const A = 'a.example.com'

async function readyFor(agent: AgentProcess, host: string): Promise<{ status: number; body: string }> {
  const res = await fetch(`${agent.url}/ready/${host}`, { signal: AbortSignal.timeout(30_000) })
  return { status: res.status, body: await res.text() }
}

void test(
  'a kept journal released by the command: the running agent lifts the fence, /ready/HOST turns 200 without a restart',
  { timeout: 60_000 },
  async (t) => {
    const sb = await makeSandbox(await tmpDir(t), 'kass-1')
    const dirs = { dataDir: sb.dataDir, runDir: path.join(sb.dataDir, 'run') }
    const from = flatPaths(dirs, A)
    const dest = nestedPaths(dirs, A)
    // The row says nested; the files are there, and a stale copy at the flat end: ambiguous.
    for (const dir of [from.dir, dest.dir, path.dirname(dest.socket)]) await fs.mkdir(dir, { recursive: true })
    await fs.writeFile(path.join(dest.dir, 'app.txt'), 'the tenant')
    await fs.writeFile(path.join(from.dir, 'app.txt'), 'a stale copy')
    const registry = Registry.open(sb.dataDir)
    registry.add({ host: A, kind: 'instance', hibernate: true, ...dest })
    registry.close()
    await fs.mkdir(path.join(sb.dataDir, 'layout'))
    const journal = { v: 1, host: A, to: 'nested', from, dest, generation: 1, startedAt: '2026-12-03T09:00:00.000Z' }
    await fs.writeFile(path.join(sb.dataDir, 'layout', `${A}.journal`), `${JSON.stringify(journal)}\n`)
    await recordIntent(sb, 'nested')

    const agent = await AgentProcess.start(sb)
    t.after(() => agent.stop())
    await agent.waitReady()
    await agent.waitNestedAllowed()
    // The start's own run has judged the journal again, and kept it.
    await agent.waitFor(
      'the first run ended',
      async () => {
        const s = await agent.status()
        return s.leg.lastRun?.finishedAt != null && !s.leg.running && !s.leg.pending ? true : undefined
      },
      30_000,
    )
    const before = await readyFor(agent, A)
    assert.equal(before.status, 409, before.body)
    assert.match(before.body, /"code":"ambiguous"/)

    // The operator keeps the tenant's files at the end the row names and moves the stale copy aside.
    await fs.rename(from.dir, path.join(sb.root, 'stale-copy'))
    const r = await runCli(sb, ['journal', 'release', A])
    assert.equal(r.exit.code, 0, r.stderr)
    assert.match(r.stdout, /as its row says/)
    assert.match(r.stdout, /^asked the agent for a run: it releases a\.example\.com now \(outcome released\)$/m)
    await assert.rejects(fs.lstat(path.join(sb.dataDir, 'layout', `${A}.journal`)), { code: 'ENOENT' })

    const after = await agent.waitFor(
      '/ready/a.example.com 200',
      async () => {
        const ready = await readyFor(agent, A)
        return ready.status === 200 ? ready : undefined
      },
      30_000,
    )
    assert.equal((JSON.parse(after.body) as { dir: string }).dir, dest.dir)
    const results: Result[] = (await agent.status()).leg.lastRun?.results ?? []
    assert.ok(
      results.some((x) => x.host === A && x.outcome === 'released' && x.code === 'journal_removed'),
      JSON.stringify(results),
    )
    assert.equal(agent.exit, undefined, 'the same agent, never restarted')
    assert.equal(await fs.readFile(path.join(dest.dir, 'app.txt'), 'utf8'), 'the tenant')
  },
)

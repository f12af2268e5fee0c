// Instance keys for rows added while the agent runs (design §4.5): a real
// agent, then `layoutd routes import` of new rows beside it; the import asks
// for a run, and that run mints each new row's key before it moves anything.
// No restart.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test } from 'node:test'
import { flatPaths } from '../../src/domain/paths.js'
import { AgentProcess, makeSandbox, recordIntent, runCli } from '../helpers/agent-process.js'
import { tmpDir } from '../helpers/tmp.js'

const KEY_FILE = /^CARLOS_INSTANCE_KEY=[0-9a-f]{64}\n$/
const HOSTS = ['n1.example.com', 'n2.example.com', 'n3.example.com']

void test(
  'rows imported while the agent runs get their instance keys and a run, without a restart',
  { timeout: 60_000 },
  async (t) => {
    const sb = await makeSandbox(await tmpDir(t), 'kass-1')
    const dirs = { dataDir: sb.dataDir, runDir: path.join(sb.dataDir, 'run') }
    await recordIntent(sb, 'flat')
    const agent = await AgentProcess.start(sb)
    t.after(() => agent.stop())
    await agent.waitReady()
    const first = await agent.waitFor(
      'the first run ended',
      async () => {
        const s = await agent.status()
        return s.leg.lastRun?.finishedAt != null && !s.leg.running && !s.leg.pending ? s.leg.lastRun : undefined
      },
      30_000,
    )

    const file = path.join(sb.root, 'rows.jsonl')
    await fs.writeFile(
      file,
      HOSTS.map((host) => JSON.stringify({ host, kind: 'instance', hibernate: true })).join('\n'),
    )
    const r = await runCli(sb, ['routes', 'import', file])
    assert.equal(r.exit.code, 0, r.stderr)
    assert.match(r.stdout, /^imported 3 rows \(3 minted flat\)/m)
    assert.match(r.stdout, /^asked the agent for a run: it acts on the new rows now$/m)

    const keyOf = (host: string) => fs.readFile(path.join(flatPaths(dirs, host).dir, 'instance.env'), 'utf8')
    const run = await agent.waitFor(
      'a run after the import, with every new row keyed',
      async () => {
        const s = await agent.status()
        const last = s.leg.lastRun
        if (last?.finishedAt == null || last.startedAt === first.startedAt) return undefined
        const keyed = await Promise.all(HOSTS.map((h) => keyOf(h).then(String, () => '')))
        return keyed.every((k) => KEY_FILE.test(k)) ? last : undefined
      },
      20_000,
    )
    for (const host of HOSTS)
      assert.ok(
        run.results.some((x) => x.host === host && x.outcome === 'unchanged'),
        `${host} judged by the run: ${JSON.stringify(run.results)}`,
      )
    const keys = await Promise.all(HOSTS.map(keyOf))
    assert.equal(new Set(keys).size, HOSTS.length, 'a key of its own each')
    assert.equal(agent.exit, undefined, 'the same agent, never restarted')
  },
)

// A real kill -9 at a step of a batch, then recovery in a fresh Pass: the
// failpoint hook driving a child process, as the crash suite will drive
// the agent.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { test } from 'node:test'
import { FenceTable } from '../../../src/domain/fence.js'
import { flatPaths, isNested, nestedPaths } from '../../../src/domain/paths.js'
import { ended, spawnGroup } from '../../helpers/child.js'
import { hashTree } from '../../helpers/tenants.js'
import { harness } from './pass-harness.js'

const child = new URL('./pass-crash-child.js', import.meta.url)

async function run(env: NodeJS.ProcessEnv): Promise<NodeJS.Signals | null> {
  const p = spawnGroup(process.execPath, [child.pathname], {
    // The machine's CARLOS_* (a failpoint, a data root) never reach the child.
    env: { ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('CARLOS_'))), ...env },
    stdio: ['ignore', 'ignore', 'inherit'],
  })
  return (await ended(p, 'the pass that kills itself')).signal
}

for (const point of ['after-journal', 'after-rename:t1.example.com', 'after-row']) {
  void test(`killed ${point}, every host recovers exactly`, async (t) => {
    const h = await harness(t)
    const hosts = ['t0.example.com', 't1.example.com', 't2.example.com']
    const sums = new Map(hosts.map((x, i) => [x, hashTree(h.addFlat(x, i + 11).dir)]))
    const signal = await run({ PASS_CRASH_DATA: h.dirs.dataDir, CARLOS_FAILPOINT: point })
    assert.equal(signal, 'SIGKILL', 'the child died at the failpoint')
    assert.ok(
      fs.readdirSync(path.join(h.dirs.dataDir, 'layout')).some((n) => n.endsWith('.journal')),
      'it died with journals open',
    )

    const fence = new FenceTable()
    const pass = h.newPass({ fence, failpoint: () => {} })
    const res = await pass.recover('nested')
    assert.ok(
      res.every((r) => r.outcome === 'recovered'),
      JSON.stringify(res),
    )
    for (const x of hosts) {
      const rt = h.reg.get(x)
      assert.ok(rt && isNested(h.dirs, rt), `${x} nested`)
      assert.equal(hashTree(nestedPaths(h.dirs, x).dir), sums.get(x))
      assert.equal(fs.existsSync(flatPaths(h.dirs, x).dir), false)
      assert.equal(fence.fenced(x), undefined)
    }
    assert.deepEqual(fs.readdirSync(path.join(h.dirs.dataDir, 'layout')), [])
  })
}

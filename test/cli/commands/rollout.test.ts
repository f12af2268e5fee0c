// `layoutd fleet rollout` on the directory store, which serves one box:
// every action is refused with the coded error, and nothing is written.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import { PassThrough } from 'node:stream'
import { test } from 'node:test'
import { fleetCommand } from '../../../src/cli/commands/fleet.js'
import { loadConfig } from '../../../src/config.js'
import { DirDeployStore } from '../../../src/infra/deploy-dir.js'
import { tmpDir } from '../../helpers/tmp.js'

void test('the directory store refuses every rollout action, saying a rollout needs etcd, and writes nothing', async (t) => {
  const dir = await tmpDir(t)
  const store = new DirDeployStore(dir)
  t.after(() => store.close())
  const config = loadConfig({ CARLOS_BOX: 'web-01', CARLOS_DEPLOYMENT_DIR: dir })
  for (const action of ['migrate', 'revert', 'status', 'pause', 'resume', 'abort']) {
    const stderr = new PassThrough()
    let err = ''
    stderr.on('data', (d: Buffer) => (err += d.toString()))
    const argv =
      action === 'migrate' || action === 'revert' ? ['rollout', action, '--waves', '100%'] : ['rollout', action]
    const code = await fleetCommand(argv, { config, store, stdout: new PassThrough(), stderr })
    assert.equal(code, 1, action)
    assert.match(err, /serves one box and keeps no rollouts: a staged rollout needs the etcd deploy store/, action)
  }
  assert.deepEqual(await fs.readdir(dir), [])
})

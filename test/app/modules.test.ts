// What loading the agent's app costs: node's own fetch and WebSocket client
// (its bundled undici) is never among the modules, since nothing in the agent
// uses it and loading it is megabytes of heap and code on every box.
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { test } from 'node:test'
import { srcModule } from '../helpers/left-open.js'

void test("loading the app loads no part of node's bundled fetch client", () => {
  const program =
    `await import(${JSON.stringify(srcModule('app.js'))});` +
    "console.log(JSON.stringify(process.moduleLoadList.filter((m) => m.includes('deps/undici'))))"
  const child = spawnSync(process.execPath, ['--input-type=module', '-e', program], {
    encoding: 'utf8',
    timeout: 20_000,
  })
  assert.equal(child.status, 0, child.stderr)
  assert.deepEqual(JSON.parse(child.stdout), [])
})

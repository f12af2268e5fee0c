// The files thread (design §3.6): the agent's pass makes its renames on a
// thread of its own, and a thread that dies under a batch leaves every host
// of it fenced with its journal, for recovery.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import { test } from 'node:test'
import { isFlat, isNested, nestedPaths } from '../../../src/domain/paths.js'
import { FilesThread } from '../../../src/infra/pass/files-thread.js'
import type { PassFiles } from '../../../src/infra/pass/pass-files.js'
import { addFlat, agentBox, recordIntent } from '../../helpers/agent.js'
import { assertEndsOnItsOwn, srcModule } from '../../helpers/left-open.js'
import { harness, outcomes } from './pass-harness.js'

const hosts = ['a.example.com', 'b.example.com', 'c.example.com']

void test("the agent's pass renames each tenant's directory off the loop's thread", async (t) => {
  const box = await agentBox(t, { start: true })
  for (const host of hosts) await addFlat(box, host)
  // Every rename(2) the loop's thread makes from here is counted: none may be the pass's.
  const renamed: string[] = []
  const renameSync = fs.renameSync
  fs.renameSync = (from, to) => {
    renamed.push(String(from))
    renameSync(from, to)
  }
  t.after(() => {
    fs.renameSync = renameSync
  })
  await recordIntent(box, 'nested')
  // The poller may have started the run already: this waits for one after the intent was recorded.
  const run = await box.agent.converge(30_000)
  assert.ok(run !== null, 'the run finished')
  for (const host of hosts) {
    const row = box.registry.get(host)
    assert.ok(row !== undefined && isNested(box.config, row), `${host} is nested`)
    assert.ok(fs.existsSync(nestedPaths(box.config, host).dir))
  }
  const tenants = renamed.filter((from) => hosts.some((h) => from.endsWith(`/${h}`)))
  assert.deepEqual(tenants, [], "no tenant's directory was renamed on the loop's thread")
})

void test('a files thread that dies under a batch leaves its hosts fenced with their journal; recovery ends them', async (t) => {
  const thread = new FilesThread({ failpoint: '' })
  t.after(() => thread.close())
  let die = true
  // The thread is ended as the batch's renames are asked of it: what it had not answered fails.
  const dying: PassFiles = {
    prepare: (dirs, items, gid) => thread.prepare(dirs, items, gid),
    fsync: (dirs) => thread.fsync(dirs),
    rename: (items) => {
      const answer = thread.rename(items)
      if (die) thread.close()
      return answer
    },
  }
  const h = await harness(t, { files: dying })
  for (const host of hosts) h.addFlat(host)
  const res = await h.converge('nested')
  assert.deepEqual(outcomes(res), Object.fromEntries(hosts.map((x) => [x, 'failed'])))
  for (const r of res) assert.equal(r.code, 'move_interrupted', `${r.host}: ${r.reason}`)
  for (const host of hosts) {
    assert.notEqual(h.fence.fenced(host), undefined, `${host} stays fenced: no wake while its files may be moving`)
    assert.equal(h.pass.classify(h.reg.get(host)!, h.reg.list()).layout, 'fenced')
  }
  assert.ok(
    fs.readdirSync(`${h.dirs.dataDir}/layout`).some((n) => n.endsWith('.journal')),
    'the journal stays',
  )

  // A restart recovers each host from where its files are, and the next thread moves the rest.
  die = false
  h.pass = h.newPass({ files: thread })
  await h.pass.recover('nested')
  const again = await h.converge('nested')
  for (const host of hosts) {
    const row = h.reg.get(host)
    assert.ok(row !== undefined && isNested(h.dirs, row) && !isFlat(h.dirs, row), `${host} ends nested`)
    assert.ok(fs.existsSync(row.dir), `${host}'s files are where its row says`)
    assert.equal(h.fence.fenced(host), undefined, `${host}'s fence is lifted`)
  }
  assert.ok(again.every((r) => r.outcome === 'unchanged' || r.outcome === 'moved'))
})

void test("a files thread left open keeps no process alive (it is unref'd)", async (t) => {
  await assertEndsOnItsOwn(
    t,
    `const { FilesThread } = await import(${JSON.stringify(srcModule('infra/pass/files-thread.js'))})\n` +
      // A request waits while the process runs for something else (a timer, here; the agent's server).
      "const running = setInterval(() => {}, 1000)\nawait new FilesThread({ failpoint: '' }).fsync([])\n" +
      'clearInterval(running)',
  )
})

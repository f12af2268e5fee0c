import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { test } from 'node:test'
import { AppError } from '../../src/errors.js'
import { flatPaths, nestedPaths } from '../../src/domain/paths.js'
import { journalNames, layoutDirectory, verifyDataRoots } from '../../src/infra/layout-dir.js'
import { addFlat, agentBox } from '../helpers/agent.js'
import { hashTree, treeLines } from '../helpers/tenants.js'
import { tmpDir } from '../helpers/tmp.js'
import { until } from '../helpers/until.js'
import { harness } from './pass/pass-harness.js'

const H = 'a.example.com'

/** The data root's files, but the registry's (SQLite touches its -shm on a read; the row is compared on its own). */
function dataLines(data: string): string[] {
  return treeLines(data).filter((line) => !line.startsWith('"registry.db'))
}

for (const root of ['layout', 'apps', 'nested'] as const) {
  void test(`D/${root} as a symlink: the agent refuses to start, reads no journal and changes nothing`, async (t) => {
    const b = await agentBox(t)
    const data = b.config.dataDir
    await addFlat(b, H)
    const outside = await tmpDir(t, 'layoutd-outside-')
    const target = path.join(outside, root)
    fs.mkdirSync(target)
    if (root === 'layout') {
      // A journal planted behind the link: a move of a flat tenant to nested, not yet begun.
      const journal = {
        v: 1,
        host: H,
        to: 'nested',
        from: flatPaths(b.config, H),
        dest: nestedPaths(b.config, H),
        generation: 1,
        startedAt: new Date().toISOString(),
      }
      fs.writeFileSync(path.join(target, `${H}.journal`), `${JSON.stringify(journal)}\n`)
    } else {
      fs.writeFileSync(path.join(target, 'planted'), 'x')
    }
    if (root === 'apps') {
      // The tenant's directory is then behind the link too.
      fs.renameSync(path.join(data, 'apps'), path.join(data, 'apps-real'))
    }
    fs.symlinkSync(target, path.join(data, root))
    const outsideBefore = hashTree(outside)
    const dataBefore = dataLines(data)
    const row = b.registry.get(H)

    await assert.rejects(b.agent.start(), (err: unknown) => {
      assert.ok(err instanceof AppError, String(err))
      assert.equal(err.code, 'data_root_not_directory')
      assert.ok(err.message.includes(path.join(data, root)), err.message)
      assert.match(err.message, /symlink/)
      return true
    })
    assert.equal((await b.app.inject({ method: 'GET', url: '/ready' })).statusCode, 503)
    assert.equal(hashTree(outside), outsideBefore, 'nothing behind the link changed: the journal is still there')
    assert.deepEqual(dataLines(data), dataBefore, 'nothing in the data root changed')
    assert.deepEqual(b.registry.get(H), row)
  })
}

void test('a data root that is a file is refused with what it is; absent roots are fine', async (t) => {
  const data = await tmpDir(t)
  await verifyDataRoots(data)
  fs.mkdirSync(path.join(data, 'layout'))
  fs.mkdirSync(path.join(data, 'apps'))
  await verifyDataRoots(data)
  fs.writeFileSync(path.join(data, 'nested'), '')
  await assert.rejects(verifyDataRoots(data), (err: unknown) => {
    assert.ok(err instanceof AppError)
    assert.equal(err.code, 'data_root_not_directory')
    assert.equal(
      err.message,
      `${path.join(data, 'nested')} is a regular file, not a directory; layoutd uses only a real directory there (not a symlink) and changes nothing until it is one`,
    )
    return true
  })
})

void test('the pass refuses a data root turned into a symlink before its next run, and moves nothing', async (t) => {
  const h = await harness(t)
  h.addFlat(H)
  // A first run loads the pass (its load verifies the roots too): the check
  // under test is the one every later run makes.
  assert.deepEqual(
    (await h.converge('flat')).map((r) => r.outcome),
    ['unchanged'],
  )
  const outside = await tmpDir(t, 'layoutd-outside-')
  fs.renameSync(path.join(h.dirs.dataDir, 'apps'), path.join(outside, 'apps'))
  fs.symlinkSync(path.join(outside, 'apps'), path.join(h.dirs.dataDir, 'apps'))
  const before = hashTree(outside)
  await assert.rejects(h.converge('nested'), { code: 'data_root_not_directory' })
  assert.equal(hashTree(outside), before)
  assert.equal(fs.existsSync(path.join(h.dirs.dataDir, 'nested')), false)
})

void test('before start-up has listed D/layout, the report calls no row nested or flat: a journal may name it', async (t) => {
  const b = await agentBox(t)
  await addFlat(b, H)
  const report = (await b.app.inject({ method: 'GET', url: '/layout/status' })).json<{
    rows: Record<string, { layout: string; reason: string }>
  }>()
  assert.deepEqual(report.rows[H], {
    layout: 'fenced',
    code: 'agent_starting',
    reason: 'layoutd is starting: <data>/layout not listed yet',
    note: '',
  })
  await b.agent.start()
  await until(
    'the row judged once D/layout is listed',
    async () =>
      (await b.app.inject({ method: 'GET', url: '/layout/status' })).json<{
        rows: Record<string, { layout: string }>
      }>().rows[H]?.layout === 'flat',
  )
})

void test("the hosts a journal names: hosts' own journals and every move of a batch's; a batch that cannot be read names itself", async (t) => {
  const data = await tmpDir(t)
  const layout = path.join(data, 'layout')
  fs.mkdirSync(layout)
  const dir = layoutDirectory(data)
  assert.deepEqual(await dir.journalHosts(), [])
  fs.writeFileSync(path.join(layout, 'c.example.com.journal'), '{}')
  fs.writeFileSync(
    path.join(layout, '_batch-3.journal'),
    JSON.stringify({
      v: 2,
      generation: 3,
      startedAt: '',
      moves: [{ host: 'a.example.com' }, { host: 'b.example.com' }, { host: 'NOT A HOST' }],
    }),
  )
  assert.deepEqual(await dir.journalHosts(), ['a.example.com', 'b.example.com', 'c.example.com'])
  const named = await journalNames(data)
  assert.equal(named.files.get('a.example.com'), path.join(layout, '_batch-3.journal'))
  assert.equal(named.files.get('c.example.com'), path.join(layout, 'c.example.com.journal'))
  fs.writeFileSync(path.join(layout, '_batch-4.journal'), 'not json')
  assert.deepEqual(await dir.journalHosts(), ['a.example.com', 'b.example.com', 'c.example.com', '_batch-4.journal'])
  assert.deepEqual((await journalNames(data)).unknown, ['_batch-4.journal'])
})

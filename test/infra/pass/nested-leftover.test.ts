// A revert leaves no empty D/nested/<host>/ behind (design §3 step 9):
// removed only when empty, and also when recovery finishes the revert.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { test } from 'node:test'
import { FenceTable } from '../../../src/domain/fence.js'
import { isFlat, nestedRoot } from '../../../src/domain/paths.js'
import { hashTree } from '../../helpers/tenants.js'
import { harness, outcomes } from './pass-harness.js'

void test('a revert removes the host’s empty nested directory and keeps D/nested', async (t) => {
  const h = await harness(t)
  const hosts = ['a.example.com', 'b.example.com']
  for (const [i, x] of hosts.entries()) h.addFlat(x, i + 1)
  assert.deepEqual(outcomes(await h.converge('nested')), { 'a.example.com': 'moved', 'b.example.com': 'moved' })
  for (const x of hosts) assert.ok(fs.statSync(path.join(nestedRoot(h.dirs, x), 'run')).isDirectory())

  assert.deepEqual(outcomes(await h.converge('flat')), { 'a.example.com': 'moved', 'b.example.com': 'moved' })
  for (const x of hosts) assert.equal(fs.existsSync(nestedRoot(h.dirs, x)), false, `${x}: D/nested/<host> removed`)
  assert.deepEqual(fs.readdirSync(path.join(h.dirs.dataDir, 'nested')), [], 'D/nested itself stays, empty')
  assert.deepEqual(
    h.logger.lines.filter((l) => l.level !== 'info'),
    [],
    'nothing to warn about',
  )
})

void test('a revert keeps a nested directory that still holds something, and what it holds', async (t) => {
  const h = await harness(t)
  h.addNested('a.example.com')
  h.addNested('b.example.com', 2)
  const rootA = nestedRoot(h.dirs, 'a.example.com')
  const rootB = nestedRoot(h.dirs, 'b.example.com')
  for (const root of [rootA, rootB]) fs.mkdirSync(path.join(root, 'run'))
  fs.writeFileSync(path.join(rootA, 'run', 'left.pid'), '42\n')
  fs.writeFileSync(path.join(rootB, 'operator-notes'), 'keep me\n')

  assert.deepEqual(outcomes(await h.converge('flat')), { 'a.example.com': 'moved', 'b.example.com': 'moved' })
  assert.deepEqual(fs.readdirSync(rootA), ['run'])
  assert.equal(fs.readFileSync(path.join(rootA, 'run', 'left.pid'), 'utf8'), '42\n')
  // b's empty run/ went; the root stays for what else is in it.
  assert.deepEqual(fs.readdirSync(rootB), ['operator-notes'])
  for (const x of ['a.example.com', 'b.example.com']) {
    const rt = h.reg.get(x)
    assert.ok(rt && isFlat(h.dirs, rt), `${x} is flat`)
  }
})

void test('a revert interrupted after its row was committed is finished by recovery, nested directory and all', async (t) => {
  const h = await harness(t)
  const sum = hashTree(h.addNested('a.example.com').dir)
  const root = nestedRoot(h.dirs, 'a.example.com')
  fs.mkdirSync(path.join(root, 'run'))
  const crash = new Error('crash after-row')
  h.pass = h.newPass({
    failpoint: (s) => {
      if (s === 'after-row') throw crash
    },
  })
  await h.converge('flat').catch((err: unknown) => assert.equal(err, crash))
  assert.ok(fs.existsSync(path.join(root, 'run')), 'the crash came before the removal')

  const fence = new FenceTable()
  const pass = h.newPass({ fence, failpoint: () => {} })
  const results = await pass.recover('flat')
  assert.deepEqual(outcomes(results), { 'a.example.com': 'recovered' })
  const rt = h.reg.get('a.example.com')
  assert.ok(rt && isFlat(h.dirs, rt))
  assert.equal(hashTree(rt.dir), sum)
  assert.equal(fs.existsSync(root), false, 'recovery removed D/nested/<host>')
})

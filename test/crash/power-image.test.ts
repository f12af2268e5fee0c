// The power-loss explorer's images against real trees (design §3.5): a
// file with two names (a tenant's hard link, which makes the pass hold it)
// is one inode in the image and again one file of two names when a crash
// state is written out, so the agent started on the state sees what the
// recorded agent saw; and what a move set aside is found in exactly one
// place, or the check says where it is not.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { test } from 'node:test'
import type { World } from '../../bench/crash.js'
import { strayProblems } from '../../bench/power/check.js'
import { imageHash, lookup, replay, type Op } from '../../bench/power/model.js'
import { loadImage, materialise } from '../../bench/power/trace.js'
import { tmpDir } from '../helpers/tmp.js'

void test('a file of two names is one inode of the image, and one file of two names once written out', async (t) => {
  const root = await tmpDir(t, 'layoutd-power-image-')
  const src = path.join(root, 'src')
  fs.mkdirSync(path.join(src, 'tenant', 'sub'), { recursive: true })
  fs.writeFileSync(path.join(src, 'tenant', 'index.html'), '<h1>t</h1>\n')
  fs.linkSync(path.join(src, 'tenant', 'index.html'), path.join(src, 'tenant', 'sub', 'second-name'))
  fs.writeFileSync(path.join(src, 'tenant', 'alone'), 'one name\n')

  const { image, nextIno } = loadImage(src)
  const first = lookup(image, ['tenant', 'index.html'])
  assert.ok(first !== undefined)
  assert.equal(lookup(image, ['tenant', 'sub', 'second-name']), first, 'both names reach one inode')
  assert.notEqual(lookup(image, ['tenant', 'alone']), first)

  // A write through one name after the trace began is seen through the other.
  const op: Op = { op: 'write', ino: first, offset: 0, data: Buffer.from('<h2>'), what: 'write', t: 0 }
  const after = replay(image, [op], [0])
  const out = path.join(root, 'out')
  materialise(after, out)
  const a = fs.statSync(path.join(out, 'tenant', 'index.html'))
  const b = fs.statSync(path.join(out, 'tenant', 'sub', 'second-name'))
  assert.equal(a.ino, b.ino, 'written out as one file')
  assert.equal(a.nlink, 2)
  assert.equal(fs.readFileSync(path.join(out, 'tenant', 'sub', 'second-name'), 'utf8'), '<h2>t</h1>\n')
  assert.equal(fs.statSync(path.join(out, 'tenant', 'alone')).nlink, 1)

  // The tree written out reads back as the same image.
  assert.equal(imageHash(loadImage(out).image), imageHash(after))
  assert.ok(nextIno > first)
})

void test('what was set aside is in exactly one place: where it was, or under aside/<host>/', async (t) => {
  const dataDir = await tmpDir(t, 'layoutd-power-stray-')
  const host = 'a.example.com'
  const data = Buffer.from('left here\n')
  const where = path.join(dataDir, 'nested', host, 'run')
  const world = { dirs: { dataDir, runDir: path.join(dataDir, 'run') } } as unknown as World
  const ctx = { world, stray: { host, path: where, data } }
  const aside = path.join(dataDir, 'layout', 'aside', host, '20260101T000000.000Z')

  assert.deepEqual(strayProblems(ctx), [`${host}: what was set aside is in no place`])
  fs.mkdirSync(path.dirname(where), { recursive: true })
  fs.writeFileSync(where, data)
  assert.deepEqual(strayProblems(ctx), [], 'where it was')
  fs.mkdirSync(aside, { recursive: true })
  fs.writeFileSync(path.join(aside, 'run'), data)
  assert.match(strayProblems(ctx)[0] ?? '', /in 2 places: .*aside.*run/)
  fs.rmSync(where)
  assert.deepEqual(strayProblems(ctx), [], 'set aside')
  // Another file beside it, or the same name with other bytes, is not the file set aside.
  fs.writeFileSync(where, 'something else\n')
  assert.deepEqual(strayProblems(ctx), [])
})

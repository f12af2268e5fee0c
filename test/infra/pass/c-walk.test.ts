// The C walk (native/walk.c, loaded by c-walk.ts) is built by npm run build
// and answers what the JavaScript walk answers, source by source: the same
// holds with the same reasons (the first of several second names, a name
// that is not UTF-8, a tree deeper than PATH_MAX), the same sources passed,
// what it saw the directory it walked; and it fails as a call fails, with
// the errno's code.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { test } from 'node:test'
import { cWalk, cWalkMissing, type CWalk } from '../../../src/infra/pass/c-walk.js'
import { preflight, type Preflight } from '../../../src/infra/pass/preflight.js'
import { defaultSlicer } from '../../../src/domain/loop-turns.js'
import { addByteNamedEntries, deepTree, makeTenantTree, under } from '../../helpers/tenants.js'
import { tmpDir } from '../../helpers/tmp.js'

/** The C walk, failing the test with the reason it was not built. */
function built(): CWalk {
  assert.equal(cWalkMissing, undefined, `the C walk did not load: ${cWalkMissing ?? ''}`)
  assert.ok(cWalk !== undefined)
  return cWalk
}

/** Both walks of one source: the C walk's answer, and the generator's. */
async function both(dir: string): Promise<{ c: Preflight; js: Preflight }> {
  return { c: await preflight(dir, defaultSlicer, built()), js: await preflight(dir, defaultSlicer, null) }
}

void test('npm run build built the C walk, and it loads', () => {
  built()
})

void test("the C walk is made off the loop's thread: the call answers a promise at once", async (t) => {
  const walk = built()
  const dir = path.join(await tmpDir(t), 'tenant')
  makeTenantTree(dir, 1)
  const answer = walk(dir)
  assert.ok(answer instanceof Promise, 'the walk is queued on the pool, not made while the loop waits')
  const st = fs.lstatSync(dir, { bigint: true })
  assert.deepEqual(await answer, { kind: 'ok', dev: st.dev, ino: st.ino })
})

void test('the C walk answers what the JavaScript walk answers, hold by hold', async (t) => {
  const root = await tmpDir(t)
  const outside = path.join(root, 'outside')
  fs.mkdirSync(outside)
  const tree = (name: string, seed: number): string => {
    const dir = path.join(root, name)
    makeTenantTree(dir, seed)
    // Wide and deep: many names in one directory, a chain of sixteen.
    for (let i = 0; i < 40; i++) fs.writeFileSync(path.join(dir, `f${i}.txt`), `${i}`)
    const chain = path.join(dir, ...Array.from({ length: 16 }, (_, i) => `d${i}`))
    fs.mkdirSync(chain, { recursive: true })
    fs.writeFileSync(path.join(chain, 'bottom.txt'), 'deep')
    return dir
  }
  const cases: Array<[string, string, Preflight['kind'] | 'held:second_name' | 'held:path_too_long']> = []
  cases.push(['a tenant tree of every kind of name', tree('plain', 1), 'ok'])
  const bytesTree = tree('bytes', 2)
  addByteNamedEntries(bytesTree, 2)
  cases.push(['names that are not UTF-8', bytesTree, 'ok'])
  // Several files with a second name: both walks find the same one first.
  const several = tree('several', 3)
  fs.mkdirSync(path.join(several, 'a', 'b'), { recursive: true })
  for (const rel of ['a/x', 'a/b/y', 'z', 'sub/dir/deep/blob.bin']) {
    fs.writeFileSync(path.join(several, rel), rel)
    fs.linkSync(path.join(several, rel), path.join(outside, rel.replaceAll('/', '_')))
  }
  // And many in one directory, made last name first: the first found is the first as the names sort
  // (l00), not the first the directory keeps (a small one keeps the order they were made in).
  for (let i = 19; i >= 0; i--) {
    const name = `l${String(i).padStart(2, '0')}`
    fs.writeFileSync(path.join(several, name), name)
    fs.linkSync(path.join(several, name), path.join(outside, name))
  }
  cases.push(['the first of several second names', several, 'held:second_name'])
  const byteLinked = tree('byte-linked', 4)
  fs.writeFileSync(under(byteLinked, 'sub', Buffer.from([0x6b, 0xff])), 'k')
  fs.linkSync(under(byteLinked, 'sub', Buffer.from([0x6b, 0xff])), path.join(outside, 'k'))
  cases.push(['a second name on a name that is not UTF-8', byteLinked, 'held:second_name'])
  // A symlink to a directory with a linked file in it is not followed.
  const linkedOut = tree('link-out', 5)
  fs.mkdirSync(path.join(outside, 'dir'))
  fs.writeFileSync(path.join(outside, 'dir', 'f'), '')
  fs.linkSync(path.join(outside, 'dir', 'f'), path.join(outside, 'dir', 'g'))
  fs.symlinkSync(path.join(outside, 'dir'), path.join(linkedOut, 'to-outside'))
  cases.push(['a symlink to a directory, not followed', linkedOut, 'ok'])
  // Deeper than the C walk opens by its parent's descriptor (AT_DEPTH, 32): below, it opens by the whole path.
  const chain = (name: string): string => {
    const dir = tree(name, 8)
    const bottom = path.join(dir, ...Array.from({ length: 40 }, (_, i) => `c${i}`))
    fs.mkdirSync(bottom, { recursive: true })
    fs.writeFileSync(path.join(bottom, 'f'), 'f')
    return path.join(bottom, 'f')
  }
  chain('chain')
  cases.push(['a chain of 40 directories', path.join(root, 'chain'), 'ok'])
  fs.linkSync(chain('chain-linked'), path.join(outside, 'chain-f'))
  cases.push(['a second name 40 directories down', path.join(root, 'chain-linked'), 'held:second_name'])
  const deep = tree('deep', 6)
  deepTree(path.join(deep, 'sub', 'deeper'))
  t.after(() => execFileSync('rm', ['-rf', deep]))
  cases.push(['a tree deeper than PATH_MAX', deep, 'held:path_too_long'])
  fs.symlinkSync(tree('target', 7), path.join(root, 'symlink'))
  cases.push(['a symlink for a source', path.join(root, 'symlink'), 'held'])
  fs.writeFileSync(path.join(root, 'file'), '')
  cases.push(['a file for a source', path.join(root, 'file'), 'held'])
  cases.push(['no source', path.join(root, 'missing'), 'missing'])
  for (const [what, dir, kind] of cases) {
    const { c, js } = await both(dir)
    assert.deepEqual(c, js, what)
    assert.equal('code' in c && kind.startsWith('held:') ? `held:${c.code}` : c.kind, kind, what)
  }
  const first = (await both(several)).c
  assert.match(first.kind === 'held' ? first.reason : '', / l00 has 2 links$/)
  const st = fs.lstatSync(path.join(root, 'plain'), { bigint: true })
  assert.deepEqual((await both(path.join(root, 'plain'))).c, { kind: 'ok', seen: { dev: st.dev, ino: st.ino } })
})

void test('the C walk fails as the call failed, with its errno code, and refuses what is not a path', async (t) => {
  const walk = built()
  const root = await tmpDir(t)
  fs.writeFileSync(path.join(root, 'file'), '')
  fs.symlinkSync(root, path.join(root, 'link'))
  const failed = (p: string, code: string, call: string): Promise<void> =>
    assert.rejects(
      walk(p),
      (err: NodeJS.ErrnoException) => err.code === code && err.message.includes(`${call} '${p}'`),
      `${p}: ${code}`,
    )
  await failed(path.join(root, 'missing'), 'ENOENT', 'open')
  await failed(path.join(root, 'file'), 'ENOTDIR', 'open')
  // The walk opens nothing through a symlink (O_NOFOLLOW with O_DIRECTORY: ENOTDIR on Linux); preflight
  // holds such a source before it walks, and one that became a symlink since fails its walk.
  await failed(path.join(root, 'link'), 'ENOTDIR', 'open')
  assert.throws(() => walk('a\0b'), { code: 'ERR_INVALID_ARG_VALUE' })
  assert.throws(() => (walk as (p: unknown) => unknown)(42), { code: 'ERR_INVALID_ARG_TYPE' })
  assert.deepEqual((await walk(Buffer.from(root))).kind, 'ok', 'a path given as bytes')
})

import assert from 'node:assert/strict'
import fs from 'node:fs'
import net from 'node:net'
import path from 'node:path'
import { test, type TestContext } from 'node:test'
import { flatPaths, nestedPaths, nestedRoot, type Dirs } from '../../../src/domain/paths.js'
import {
  clearFound,
  closeToEdge,
  inTheWay,
  prepareParents,
  renameDir,
  setAside,
} from '../../../src/infra/pass/mover.js'
import { preflight } from '../../../src/infra/pass/preflight.js'
import { addByteNamedEntries, makeTenantTree } from '../../helpers/tenants.js'
import { tmpDir } from '../../helpers/tmp.js'

const H = 'a.example.com'

async function dirsFor(t: TestContext): Promise<Dirs> {
  const dataDir = await tmpDir(t)
  return { dataDir, runDir: path.join(dataDir, 'run') }
}

void test('preflight: a plain tree passes, symlinks inside it included', async (t) => {
  const d = await dirsFor(t)
  const dir = flatPaths(d, H).dir
  makeTenantTree(dir, 5)
  assert.equal((await preflight(dir)).kind, 'ok')
})

void test('preflight: what the tenant could have caused holds the host', async (t) => {
  const d = await dirsFor(t)
  const dir = flatPaths(d, H).dir
  const elsewhere = path.join(d.dataDir, 'elsewhere')
  makeTenantTree(elsewhere)
  fs.mkdirSync(path.dirname(dir), { recursive: true })
  fs.symlinkSync(elsewhere, dir)
  assert.deepEqual(await preflight(dir), { kind: 'held', code: 'symlink_source', reason: `${dir} is a symlink` })
  fs.unlinkSync(dir)
  fs.writeFileSync(dir, 'a file, not a dir')
  assert.deepEqual(await preflight(dir), {
    kind: 'held',
    code: 'source_not_directory',
    reason: `${dir} is not a directory`,
  })
  fs.unlinkSync(dir)
  assert.deepEqual(await preflight(dir), { kind: 'missing' })

  makeTenantTree(dir)
  // A hard link deep in the tree, even one whose other name is inside the tree too.
  fs.linkSync(path.join(dir, 'sub', 'ünï dir', '-x'), path.join(dir, 'sub', 'second name'))
  const r = await preflight(dir)
  assert.equal(r.kind, 'held')
  assert.equal((r as { code: string }).code, 'second_name', 'the kind of hold is its code, not its sentence')
  assert.match(
    (r as { reason: string }).reason,
    /^a file of its has a second name: sub\/(ünï dir\/-x|second name) has 2 links$/,
  )
})

void test('preflight does not follow a symlink to a directory inside the tree', async (t) => {
  const d = await dirsFor(t)
  const dir = flatPaths(d, H).dir
  makeTenantTree(dir)
  const outside = path.join(d.dataDir, 'outside')
  fs.mkdirSync(outside)
  fs.writeFileSync(path.join(outside, 'f'), '')
  fs.linkSync(path.join(outside, 'f'), path.join(outside, 'g'))
  fs.symlinkSync(outside, path.join(dir, 'to-outside'))
  assert.equal((await preflight(dir)).kind, 'ok')
})

void test('preflight reads names as bytes: a name that is not UTF-8 passes, and its second name is seen', async (t) => {
  const d = await dirsFor(t)
  const dir = flatPaths(d, H).dir
  makeTenantTree(dir)
  const inner = addByteNamedEntries(dir)
  assert.equal((await preflight(dir)).kind, 'ok')
  fs.linkSync(inner, path.join(dir, 'second name'))
  const r = await preflight(dir)
  assert.equal(r.kind, 'held')
  assert.match((r as { reason: string }).reason, /^a file of its has a second name: .* has 2 links$/)
})

void test('preflight walks by text until a name is not UTF-8, and by bytes below it: a second name is seen either way', async (t) => {
  const d = await dirsFor(t)
  const dir = flatPaths(d, H).dir
  const outside = path.join(d.dataDir, 'outside')
  fs.mkdirSync(outside)
  // Deep under names that are all UTF-8, a directory whose listing has a name that is not.
  const deep = path.join(dir, 'sites', 'blog')
  fs.mkdirSync(deep, { recursive: true })
  const byteNamed = Buffer.concat([Buffer.from(`${deep}/`), Buffer.from([0x6b, 0xff])])
  fs.writeFileSync(byteNamed, 'x')
  fs.writeFileSync(path.join(deep, 'plain'), 'y')
  assert.equal((await preflight(dir)).kind, 'ok')
  // Its only file with a second name is the one whose name is not UTF-8: the
  // lossy decoding of that name (k\uFFFD) names nothing, so a walk by text
  // alone could not lstat it.
  fs.linkSync(byteNamed, path.join(outside, 'taken'))
  const held = await preflight(dir)
  assert.deepEqual(held, {
    kind: 'held',
    code: 'second_name',
    reason: 'a file of its has a second name: sites/blog/k\\xff has 2 links',
  })
  fs.unlinkSync(path.join(outside, 'taken'))
  // A name that is UTF-8 and spells U+FFFD itself (its listing read again as bytes) is still found by what it says.
  const spelled = path.join(deep, 'odd\uFFFDname')
  fs.writeFileSync(spelled, 'z')
  assert.equal((await preflight(dir)).kind, 'ok')
  fs.linkSync(spelled, path.join(outside, 'spelled'))
  assert.deepEqual(await preflight(dir), {
    kind: 'held',
    code: 'second_name',
    reason: 'a file of its has a second name: sites/blog/odd\uFFFDname has 2 links',
  })
})

void test('inTheWay and clearFound: set aside what is there, drop a stale socket', async (t) => {
  const d = await dirsFor(t)
  const dest = nestedPaths(d, H)
  assert.deepEqual(inTheWay(d, H, 'nested', dest), { aside: [], staleSockets: [] })
  fs.mkdirSync(path.dirname(dest.socket), { recursive: true })
  const server = net.createServer()
  await new Promise<void>((resolve) => server.listen(dest.socket, resolve))
  await new Promise<void>((resolve) => server.close(() => resolve()))
  // close() unlinks the socket file; leave one behind as a crashed instance would.
  if (!fs.existsSync(dest.socket)) {
    const s2 = net.createServer()
    await new Promise<void>((resolve) => s2.listen(dest.socket, resolve))
    s2.unref()
    t.after(() => s2.close())
  }
  fs.mkdirSync(dest.dir)
  assert.deepEqual(inTheWay(d, H, 'nested', dest), { aside: [dest.dir], staleSockets: [dest.socket] })
  const aside = await clearFound(d, H, inTheWay(d, H, 'nested', dest), Date.UTC(2026, 10, 30))
  assert.deepEqual(aside?.names, ['data'])
  assert.equal(fs.existsSync(dest.socket), false)
  assert.equal(fs.existsSync(dest.dir), false)

  // A nested root that is a symlink goes aside whole, without following it.
  fs.rmSync(nestedRoot(d, H), { recursive: true })
  const target = path.join(d.dataDir, 'target')
  fs.mkdirSync(target)
  fs.writeFileSync(path.join(target, 'keep'), 'x')
  fs.symlinkSync(target, nestedRoot(d, H))
  assert.deepEqual(inTheWay(d, H, 'nested', dest), { aside: [nestedRoot(d, H)], staleSockets: [] })
  const second = await clearFound(d, H, inTheWay(d, H, 'nested', dest), Date.UTC(2026, 10, 30))
  assert.deepEqual(second?.names, [H])
  assert.notEqual(second?.dir, aside?.dir, 'a second aside in the same millisecond gets its own directory')
  assert.ok(fs.lstatSync(path.join(second?.dir ?? '', H)).isSymbolicLink())
  assert.equal(fs.readFileSync(path.join(target, 'keep'), 'utf8'), 'x')
})

void test('setAside of nothing is nothing', async (t) => {
  const d = await dirsFor(t)
  assert.equal(await setAside(d, H, [path.join(d.dataDir, 'nope')], 0), undefined)
  assert.equal(fs.existsSync(path.join(d.dataDir, 'layout')), false)
})

void test('prepareParents: nested root 0710 and run 2770, both with the sockets group', async (t) => {
  const d = await dirsFor(t)
  const dest = nestedPaths(d, H)
  const canChown = process.getuid?.() === 0
  const gid = canChown ? 4242 : -1
  const sync = await prepareParents(d, H, 'nested', dest, gid)
  assert.deepEqual(sync, [d.dataDir, path.join(d.dataDir, 'nested')])
  const root = fs.statSync(nestedRoot(d, H))
  assert.equal(root.mode & 0o7777, 0o710, 'the sockets group may search the root, not list it')
  const run = fs.statSync(path.dirname(dest.socket))
  assert.equal(run.mode & 0o7777, 0o2770)
  if (canChown) assert.equal(root.gid, 4242)
  if (canChown) assert.equal(run.gid, 4242)
  // Again: nothing new to sync, modes repaired.
  fs.chmodSync(nestedRoot(d, H), 0o777)
  assert.deepEqual(await prepareParents(d, H, 'nested', dest, -1), [])
  assert.equal(fs.statSync(nestedRoot(d, H)).mode & 0o7777, 0o710)

  assert.deepEqual(await prepareParents(d, H, 'flat', flatPaths(d, H), -1), [d.dataDir])
  assert.ok(fs.statSync(path.join(d.dataDir, 'apps')).isDirectory())
})

void test('closeToEdge takes what the edge could reach a nested data/ by, and nothing of the owner', async (t) => {
  const d = await dirsFor(t)
  const dir = path.join(d.dataDir, 'tenant')
  fs.mkdirSync(dir)
  fs.chmodSync(dir, 0o2775)
  const own = fs.statSync(dir).gid
  // Anyone's bits go; its group keeps its own while that group is not the sockets group.
  assert.equal(closeToEdge(dir, own + 1), true)
  assert.equal(fs.statSync(dir).mode & 0o7777, 0o2770)
  assert.equal(closeToEdge(dir, own + 1), false, 'nothing left to take: no chmod')
  assert.equal(closeToEdge(dir, -1), false)
  // Its group is the sockets group: the group's bits go too.
  assert.equal(closeToEdge(dir, own), true)
  assert.equal(fs.statSync(dir).mode & 0o7777, 0o2700)
  // A source gone or swapped for a link is the rename's to report.
  assert.equal(closeToEdge(path.join(d.dataDir, 'gone'), own), false)
  fs.symlinkSync(dir, path.join(d.dataDir, 'link'))
  assert.equal(closeToEdge(path.join(d.dataDir, 'link'), own), false)
})

void test('prepareParents for many hosts at once: the shared parent made once and named once for its fsync', async (t) => {
  const d = await dirsFor(t)
  const hosts = Array.from({ length: 40 }, (_, i) => `h${i}.example.com`)
  const synced = await Promise.all(hosts.map((h) => prepareParents(d, h, 'nested', nestedPaths(d, h), -1)))
  assert.equal(synced.flat().filter((dir) => dir === d.dataDir).length, 1, 'D gained D/nested once')
  assert.equal(
    synced.flat().filter((dir) => dir === path.join(d.dataDir, 'nested')).length,
    hosts.length,
    'D/nested gained each root',
  )
  for (const h of hosts) assert.equal(fs.statSync(path.dirname(nestedPaths(d, h).socket)).mode & 0o7777, 0o2770)
})

void test('renameDir never renames over something', async (t) => {
  const d = await dirsFor(t)
  fs.mkdirSync(path.join(d.dataDir, 'a'))
  fs.mkdirSync(path.join(d.dataDir, 'b'))
  await assert.rejects(renameDir(path.join(d.dataDir, 'a'), path.join(d.dataDir, 'b')), /appeared after it was cleared/)
  await renameDir(path.join(d.dataDir, 'a'), path.join(d.dataDir, 'c'))
  assert.deepEqual(fs.readdirSync(d.dataDir).sort(), ['b', 'c'])
})

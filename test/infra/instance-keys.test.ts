import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test } from 'node:test'
import type { Logger } from '../../src/domain/ports.js'
import { backfillInstanceKeys, HostSlots, INSTANCE_ENV, mintInstanceKey } from '../../src/infra/instance-keys.js'
import { InstanceKeys } from '../../src/agent/instance-key-backfill.js'
import { classify } from '../../src/domain/classify.js'
import { flatPaths, nestedPaths, nestedRoot } from '../../src/domain/paths.js'
import { Registry } from '../../src/infra/registry.js'
import { hashTree } from '../helpers/tenants.js'
import { tmpDir } from '../helpers/tmp.js'

const KEY_FILE = /^CARLOS_INSTANCE_KEY=[0-9a-f]{64}\n$/

function collectingLogger(lines: string[]): Logger {
  const log = (_f: Record<string, unknown>, msg: string): void => {
    lines.push(msg)
  }
  return { debug: log, info: log, warn: log, error: log }
}

async function tenant(root: string, name = 'tenant'): Promise<string> {
  const dir = path.join(root, name)
  await fs.mkdir(dir)
  await fs.writeFile(path.join(dir, 'index.html'), name)
  return dir
}

void test('a key is minted whole, mode 0600 whatever the umask, and nothing else is left in the directory', async (t) => {
  const dir = await tenant(await tmpDir(t))
  const old = process.umask(0o277)
  let r
  try {
    r = await mintInstanceKey(dir, path.dirname(dir))
  } finally {
    process.umask(old)
  }
  assert.deepEqual(r, { kind: 'minted' })
  const file = path.join(dir, INSTANCE_ENV)
  assert.match(await fs.readFile(file, 'utf8'), KEY_FILE)
  const st = await fs.lstat(file)
  assert.equal(st.mode & 0o777, 0o600)
  assert.equal(st.nlink, 1, 'one name: the preflight of a later move would hold a file of two')
  assert.deepEqual((await fs.readdir(dir)).sort(), ['index.html', INSTANCE_ENV])
})

void test('a key is never overwritten, nor is anything else at its name, a dangling symlink included', async (t) => {
  const root = await tmpDir(t)
  const withKey = await tenant(root, 'with-key')
  await fs.writeFile(path.join(withKey, INSTANCE_ENV), 'CARLOS_INSTANCE_KEY=mine\n')
  assert.deepEqual(await mintInstanceKey(withKey, path.dirname(withKey)), { kind: 'present' })
  assert.equal(await fs.readFile(path.join(withKey, INSTANCE_ENV), 'utf8'), 'CARLOS_INSTANCE_KEY=mine\n')

  const withLink = await tenant(root, 'with-link')
  const outside = path.join(root, 'outside.env')
  await fs.symlink(outside, path.join(withLink, INSTANCE_ENV))
  assert.deepEqual(await mintInstanceKey(withLink, path.dirname(withLink)), { kind: 'present' })
  await assert.rejects(fs.lstat(outside), { code: 'ENOENT' }, 'the link was not followed')
  assert.equal(await fs.readlink(path.join(withLink, INSTANCE_ENV)), outside)
})

void test('a temporary file a crash left is removed, even as a second name of the key or a planted symlink', async (t) => {
  const root = await tmpDir(t)
  // A crash between link(2) and the unlink: the key has two names.
  const linked = await tenant(root, 'linked')
  await fs.writeFile(path.join(linked, INSTANCE_ENV), 'CARLOS_INSTANCE_KEY=' + 'a'.repeat(64) + '\n')
  await fs.link(path.join(linked, INSTANCE_ENV), path.join(linked, '.instance.env.tmp'))
  assert.deepEqual(await mintInstanceKey(linked, path.dirname(linked)), { kind: 'present' })
  assert.equal((await fs.lstat(path.join(linked, INSTANCE_ENV))).nlink, 1)
  assert.deepEqual((await fs.readdir(linked)).sort(), ['index.html', INSTANCE_ENV])

  // A tenant planted a symlink at the temporary name: it is removed, never written through.
  const planted = await tenant(root, 'planted')
  const victim = path.join(root, 'victim')
  await fs.writeFile(victim, 'not yours')
  await fs.symlink(victim, path.join(planted, '.instance.env.tmp'))
  assert.deepEqual(await mintInstanceKey(planted, path.dirname(planted)), { kind: 'minted' })
  assert.equal(await fs.readFile(victim, 'utf8'), 'not yours')
  assert.match(await fs.readFile(path.join(planted, INSTANCE_ENV), 'utf8'), KEY_FILE)
})

void test('a directory that is missing or a symlink gets no key', async (t) => {
  const root = await tmpDir(t)
  const real = await tenant(root, 'real')
  await fs.symlink(real, path.join(root, 'link'))
  assert.equal((await mintInstanceKey(path.join(root, 'link'), root)).kind, 'skipped')
  assert.equal((await mintInstanceKey(path.join(root, 'missing'), root)).kind, 'skipped')
  await assert.rejects(fs.lstat(path.join(real, INSTANCE_ENV)), { code: 'ENOENT' })
})

void test('a host slot runs one thing at a time, in order; other hosts do not wait; busy() says when to wait', async () => {
  const slots = new HostSlots()
  assert.equal(slots.busy('a.example.com'), undefined)
  const order: string[] = []
  let open = (): void => {}
  const latch = new Promise<void>((r) => (open = r))
  const first = slots.run('a.example.com', async () => {
    order.push('first:start')
    await latch
    order.push('first:end')
  })
  const second = slots.run('a.example.com', () => {
    order.push('second')
    return Promise.resolve()
  })
  await slots.run('b.example.com', () => {
    order.push('other host')
    return Promise.resolve()
  })
  const busy = slots.busy('a.example.com')
  assert.ok(busy !== undefined, 'a claim for a.example.com would wait')
  let waited = false
  const waiter = busy.then(() => (waited = true))
  await Promise.resolve()
  assert.equal(waited, false)
  open()
  await Promise.all([first, second, waiter])
  assert.deepEqual(order, ['first:start', 'other host', 'first:end', 'second'])
  assert.equal(slots.busy('a.example.com'), undefined)
})

void test('the backfill mints in each host slot, skips what the slot read says to, and counts a failure without stopping', async (t) => {
  const root = await tmpDir(t)
  const a = await tenant(root, 'a')
  const b = await tenant(root, 'b')
  const file = path.join(root, 'a-file')
  await fs.writeFile(file, '')
  const slots = new HostSlots()
  const lines: string[] = []
  const seenBusy: boolean[] = []
  const targets: Record<string, { dir: string } | { skip: string }> = {
    'a.example.com': { dir: a },
    'b.example.com': { dir: b },
    'f.example.com': { skip: 'fenced: layout move to nested in flight' },
    // A regular file on the way: no key, and nothing written under it.
    'x.example.com': { dir: path.join(file, 'sub') },
  }
  const counts = await backfillInstanceKeys({
    hosts: [...Object.keys(targets), 'e.example.com'],
    root,
    slots,
    target: (h) => {
      seenBusy.push(slots.busy(h) !== undefined)
      if (h === 'e.example.com') throw new Error('SQLITE_IOERR: disk I/O error')
      return targets[h] ?? { skip: 'unknown' }
    },
    logger: collectingLogger(lines),
    signal: new AbortController().signal,
  })
  assert.deepEqual(counts, { minted: 2, present: 0, skipped: 2, failed: 1 })
  assert.ok(seenBusy.every(Boolean), 'each row is read again inside its host slot')
  assert.match(await fs.readFile(path.join(a, INSTANCE_ENV), 'utf8'), KEY_FILE)
  assert.notEqual(
    await fs.readFile(path.join(a, INSTANCE_ENV), 'utf8'),
    await fs.readFile(path.join(b, INSTANCE_ENV), 'utf8'),
  )
  assert.ok(
    lines.some((l) => l.startsWith('agent: instance keys: f.example.com: not minted: fenced')),
    lines.join('\n'),
  )
  assert.ok(
    lines.some(
      (l) => l.startsWith('agent: instance keys: x.example.com: not minted: ') && l.includes('not a directory'),
    ),
    lines.join('\n'),
  )
  assert.ok(
    lines.some((l) => l.startsWith('agent: instance keys: e.example.com: ') && l.includes('SQLITE_IOERR')),
    lines.join('\n'),
  )

  const again = await backfillInstanceKeys({
    hosts: ['a.example.com'],
    root,
    slots,
    target: () => ({ dir: a }),
    logger: collectingLogger(lines),
    signal: new AbortController().signal,
  })
  assert.deepEqual(again, { minted: 0, present: 1, skipped: 0, failed: 0 })
})

void test('a row that cannot be read is a failed host, and the backfill ends only when every key is written', async (t) => {
  const root = await tmpDir(t)
  const hosts = Array.from({ length: 24 }, (_, i) => `h${i}.example.com`)
  const dirs = new Map<string, string>()
  for (const h of hosts) dirs.set(h, await tenant(root, h.split('.')[0] ?? h))
  const lines: string[] = []
  const counts = await backfillInstanceKeys({
    hosts,
    root,
    slots: new HostSlots(),
    target: (h) => {
      if (h === 'h0.example.com') throw new Error('SQLITE_BUSY: database is locked')
      return { dir: dirs.get(h) ?? '' }
    },
    logger: collectingLogger(lines),
    signal: new AbortController().signal,
  })
  assert.deepEqual(counts, { minted: 23, present: 0, skipped: 0, failed: 1 })
  // Resolved means done: every other host's key is on disk now, not later.
  for (const h of hosts.slice(1))
    assert.match(await fs.readFile(path.join(dirs.get(h) ?? '', INSTANCE_ENV), 'utf8'), KEY_FILE)
  assert.ok(
    lines.some((l) => l.includes('h0.example.com') && l.includes('SQLITE_BUSY')),
    lines.join('\n'),
  )
})

void test('keys go only into directories the pass manages: a foreign row outside the data root, and a nested path through a symlink, get none', async (t) => {
  const box = await tmpDir(t)
  const dataDir = path.join(box, 'data')
  const dirs = { dataDir, runDir: path.join(dataDir, 'run') }
  await fs.mkdir(dataDir)
  const outside = path.join(box, 'outside')
  await fs.mkdir(outside)
  const foreignDir = await tenant(outside, 'foreign')
  // D/nested/<host> planted as a symlink to a tree outside: the row's paths have the nested shape.
  await fs.mkdir(path.join(outside, 'planted', 'data'), { recursive: true })
  await fs.mkdir(path.join(dataDir, 'nested'), { recursive: true })
  await fs.symlink(path.join(outside, 'planted'), nestedRoot(dirs, 'l.example.com'))
  const flat = flatPaths(dirs, 'a.example.com')
  await fs.mkdir(flat.dir, { recursive: true })
  const outsideBefore = hashTree(outside)

  const registry = Registry.open(dataDir)
  t.after(() => registry.close())
  registry.add({ host: 'a.example.com', kind: 'instance', hibernate: true, ...flat })
  registry.add({
    host: 'f.example.com',
    kind: 'instance',
    hibernate: true,
    dir: foreignDir,
    socket: path.join(outside, 'f.sock'),
    db: '',
  })
  registry.add({ host: 'l.example.com', kind: 'instance', hibernate: true, ...nestedPaths(dirs, 'l.example.com') })
  const lines: string[] = []
  await new InstanceKeys({
    config: dirs,
    registry,
    pass: { classify: (route, routes) => classify(route, routes, { dirs, fenced: () => undefined }) },
    slots: new HostSlots(),
    logger: collectingLogger(lines),
    signal: new AbortController().signal,
  }).atStart()
  assert.match(
    await fs.readFile(path.join(flat.dir, INSTANCE_ENV), 'utf8'),
    KEY_FILE,
    'the managed flat row gets its key',
  )
  assert.equal(hashTree(outside), outsideBefore, 'nothing outside the data root changed')
  assert.ok(
    lines.some((l) => l.startsWith('agent: instance keys: f.example.com: not minted: foreign')),
    lines.join('\n'),
  )
  assert.ok(
    lines.some((l) => l.startsWith('agent: instance keys: l.example.com: not minted:') && l.includes('symlink')),
    lines.join('\n'),
  )
})

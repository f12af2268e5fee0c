import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test, type TestContext } from 'node:test'
import { loadConfig } from '../../../src/config.js'
import { errors } from '../../../src/errors.js'
import type { Mode } from '../../../src/domain/modes.js'
import { flatPaths, nestedPaths, nestedRoot } from '../../../src/domain/paths.js'
import type { RouteStore } from '../../../src/domain/ports.js'
import { Registry } from '../../../src/infra/registry.js'
import { routesCommand, type RoutesIo } from '../../../src/cli/commands/routes/index.js'
import { tmpDir } from '../../helpers/tmp.js'
import { Sink } from '../../helpers/sink.js'

interface Setup {
  dataDir: string
  io: RoutesIo
  registry: Registry
  out: Sink
  err: Sink
  mints: () => number
  run: (...argv: string[]) => Promise<number>
}

async function setup(t: TestContext, mint: () => Promise<Mode> = () => Promise.resolve('nested')): Promise<Setup> {
  const dataDir = await tmpDir(t)
  const config = loadConfig({ CARLOS_DATA_DIR: dataDir, CARLOS_BOX: 'box-1' })
  const registry = Registry.open(dataDir)
  t.after(() => registry.close())
  const out = new Sink()
  const err = new Sink()
  let mints = 0
  const io: RoutesIo = {
    config,
    stdout: out,
    stderr: err,
    registry,
    mint: () => {
      mints++
      return mint()
    },
    getent: path.join(dataDir, 'no-such-getent'),
  }
  return { dataDir, io, registry, out, err, mints: () => mints, run: (...argv) => routesCommand(argv, io) }
}

async function mode(p: string): Promise<number> {
  return (await fs.stat(p)).mode & 0o7777
}

async function exists(p: string): Promise<boolean> {
  return fs.stat(p).then(
    () => true,
    (err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return false
      throw err
    },
  )
}

void test('add mints nested paths, makes the directories with their modes, and gives the root and run/ the sockets group', async (t) => {
  const s = await setup(t)
  // A group other than the one run/ would inherit anyway, so the chown is seen:
  // any gid as root, else a supplementary group of this process.
  const primary = process.getgid?.() ?? 0
  const gid = process.getuid?.() === 0 ? 4242 : (process.getgroups?.().find((g) => g !== primary) ?? primary)
  if (gid === primary) t.diagnostic('no second group to chown to: the group assertion cannot tell chown happened')
  // The group as the name service answers it (getent), not as /etc/group holds it.
  const getent = path.join(s.dataDir, 'getent')
  await fs.writeFile(getent, `#!/bin/sh\necho 'carlos-sockets:x:${gid}:edge'\n`, { mode: 0o755 })
  s.io.getent = getent
  assert.equal(await s.run('add', 'a.example.com', '--hibernate'), 0, s.err.text)
  const want = nestedPaths(s.io.config, 'a.example.com')
  assert.deepEqual(s.registry.get('a.example.com'), {
    host: 'a.example.com',
    kind: 'instance',
    hibernate: true,
    ...want,
  })
  const root = nestedRoot(s.io.config, 'a.example.com')
  const run = path.dirname(want.socket)
  assert.equal(await mode(root), 0o710)
  assert.equal(await mode(run), 0o2770)
  assert.equal((await fs.stat(root)).gid, gid)
  assert.equal((await fs.stat(run)).gid, gid)
  assert.ok((await fs.stat(want.dir)).isDirectory())
  assert.equal((await mode(want.dir)) & 0o007, 0, 'data/ grants nothing to anyone outside its owner and group')
  assert.match(s.out.text, /added a\.example\.com \(minted nested\)/)
  assert.equal(s.err.text, '')
})

void test('add mints flat paths and makes the app and run directories', async (t) => {
  const s = await setup(t, () => Promise.resolve('flat'))
  assert.equal(await s.run('add', 'a.example.com', '--hibernate', '--kind', 'instance'), 0, s.err.text)
  const want = flatPaths(s.io.config, 'a.example.com')
  assert.deepEqual(s.registry.get('a.example.com'), {
    host: 'a.example.com',
    kind: 'instance',
    hibernate: true,
    ...want,
  })
  assert.ok((await fs.stat(want.dir)).isDirectory())
  assert.ok((await fs.stat(s.io.config.runDir)).isDirectory())
  assert.equal(await exists(path.join(s.dataDir, 'nested')), false)
})

void test('add refuses while the intent is unreadable: nothing added, no directory made', async (t) => {
  const s = await setup(t, () => Promise.reject(errors.intentUnreadable('deploy store timed out')))
  assert.equal(await s.run('add', 'a.example.com', '--hibernate'), 1)
  assert.match(
    s.err.text,
    /refused to mint paths for a\.example\.com: the layout intent is unreadable: deploy store timed out/,
  )
  assert.equal(s.out.text, '')
  assert.deepEqual(s.registry.list(), [])
  for (const d of ['nested', 'apps', 'run']) assert.equal(await exists(path.join(s.dataDir, d)), false, d)
})

void test('add takes the paths it is given, made absolute, and mints nothing', async (t) => {
  const s = await setup(t, () => Promise.reject(new Error('mint must not be asked')))
  assert.equal(await s.run('add', 'a.example.com', '--hibernate', '--dir', 'rel/a'), 0, s.err.text)
  assert.deepEqual(s.registry.get('a.example.com'), {
    host: 'a.example.com',
    kind: 'instance',
    hibernate: true,
    dir: path.resolve('rel/a'),
    socket: '',
    db: '',
  })
  assert.equal(await exists(path.resolve('rel/a')), false)
  assert.equal(await s.run('add', 'b.example.com', '--kind', 'static', '--hibernate'), 0, s.err.text)
  assert.equal(await s.run('add', 'c.example.com', '--socket', '/srv/c.sock'), 0, s.err.text)
  assert.equal(s.registry.get('c.example.com')?.hibernate, false)
  assert.equal(s.mints(), 0)
})

void test('add refuses an invalid host, a duplicate, a db outside the dir, and a socket too long to bind', async (t) => {
  const s = await setup(t)
  assert.equal(await s.run('add', 'A.example.com', '--hibernate'), 1)
  assert.match(s.err.text, /"A\.example\.com" is not a valid hostname: hostname must be lower case/)
  assert.equal(await s.run('add', 'a.example.com', '--dir', '/srv/a', '--db', '/srv/b/app.db'), 1)
  assert.match(s.err.text, /db "\/srv\/b\/app\.db" is not inside dir "\/srv\/a"/)
  assert.equal(await s.run('add', 'a.example.com', '--hibernate', '--db', 'app.db'), 1)
  const long = `${'a'.repeat(63)}.${'b'.repeat(40)}.example.com`
  assert.equal(await s.run('add', long, '--hibernate'), 1)
  assert.match(s.err.text, /over the 107 a unix socket can bind/)
  assert.deepEqual(s.registry.list(), [])
  assert.equal(await exists(path.join(s.dataDir, 'nested')), false)

  assert.equal(await s.run('add', 'a.example.com', '--dir', '/srv/a'), 0, s.err.text)
  const mints = s.mints()
  assert.equal(await s.run('add', 'a.example.com', '--hibernate'), 1)
  assert.match(s.err.text, /host a\.example\.com is already in the registry/)
  assert.equal(s.mints(), mints, 'a duplicate is refused before the mint is asked')
  assert.equal(s.registry.get('a.example.com')?.dir, '/srv/a')
})

void test('add refuses a --socket over the 107 bytes a unix socket can bind, naming the limit', async (t) => {
  const s = await setup(t, () => Promise.reject(new Error('mint must not be asked')))
  const socket = `/srv/${'s'.repeat(100)}.sock`
  assert.equal(Buffer.byteLength(socket), 110)
  assert.equal(await s.run('add', 'a.example.com', '--hibernate', '--dir', '/srv/a', '--socket', socket), 1)
  assert.match(s.err.text, /a\.example\.com's socket \/srv\/s+\.sock is 110 bytes, over the 107 a unix socket can bind/)
  assert.deepEqual(s.registry.list(), [])
  const fits = `/srv/${'s'.repeat(97)}.sock`
  assert.equal(Buffer.byteLength(fits), 107)
  assert.equal(await s.run('add', 'a.example.com', '--hibernate', '--dir', '/srv/a', '--socket', fits), 0, s.err.text)
})

void test('add refuses a --dir or --socket another row already claims, naming that row, and changes nothing', async (t) => {
  const s = await setup(t, () => Promise.reject(new Error('mint must not be asked')))
  assert.equal(
    await s.run('add', 'a.example.com', '--hibernate', '--dir', '/srv/a', '--socket', '/srv/run/a.sock'),
    0,
    s.err.text,
  )
  const cases: Array<[string[], RegExp]> = [
    [['--dir', '/srv/a'], /dir \/srv\/a is also claimed by a\.example\.com/],
    [['--dir', '/srv/a/inner'], /dir \/srv\/a\/inner is inside a\.example\.com's dir \/srv\/a/],
    [['--dir', '/srv'], /dir \/srv contains a\.example\.com's dir \/srv\/a/],
    [['--dir', '/srv/b', '--socket', '/srv/run/a.sock'], /socket \/srv\/run\/a\.sock is also a\.example\.com's/],
  ]
  for (const [paths, message] of cases) {
    s.err.chunks.length = 0
    assert.equal(await s.run('add', 'b.example.com', '--hibernate', ...paths), 1, paths.join(' '))
    assert.match(s.err.text, message)
    assert.match(s.err.text, /refused: b\.example\.com/)
  }
  assert.deepEqual(
    s.registry.list().map((r) => r.host),
    ['a.example.com'],
  )
  assert.equal(
    await s.run('add', 'b.example.com', '--hibernate', '--dir', '/srv/b', '--socket', '/srv/run/b.sock'),
    0,
    s.err.text,
  )
})

void test('a minted row whose paths another row claims is refused before a directory is made', async (t) => {
  const s = await setup(t, () => Promise.resolve('flat'))
  const minted = flatPaths(s.io.config, 'b.example.com')
  assert.equal(await s.run('add', 'a.example.com', '--dir', minted.dir), 0, s.err.text)
  assert.equal(await s.run('add', 'b.example.com', '--hibernate'), 1)
  assert.match(s.err.text, /is also claimed by a\.example\.com/)
  assert.equal(await exists(minted.dir), false)
  assert.deepEqual(
    s.registry.list().map((r) => r.host),
    ['a.example.com'],
  )
})

void test('an add the registry refuses after the directories were made removes them again', async (t) => {
  const s = await setup(t)
  const real = s.registry
  const racing: RouteStore = {
    list: () => real.list(),
    snapshot: () => real.snapshot(),
    get: (h) => real.get(h),
    add: (r) => {
      throw errors.hostExists(r.host)
    },
    addMany: (rows) => real.addMany(rows),
    remove: (h) => real.remove(h),
    setPaths: (rows) => real.setPaths(rows),
    nextGeneration: () => real.nextGeneration(),
    sync: () => real.sync(),
  }
  s.io.registry = racing
  assert.equal(await s.run('add', 'a.example.com', '--hibernate'), 1)
  assert.match(s.err.text, /already in the registry/)
  assert.equal(await exists(path.join(s.dataDir, 'nested')), false)
})

void test('list prints an aligned table, or JSON rows', async (t) => {
  const s = await setup(t)
  assert.equal(
    await s.run(
      'add',
      'b.example.com',
      '--dir',
      '/srv/b',
      '--socket',
      '/srv/b.sock',
      '--db',
      '/srv/b/app.db',
      '--hibernate',
    ),
    0,
  )
  assert.equal(await s.run('add', 'a.example.com', '--kind', 'static'), 0)
  s.out.chunks.length = 0
  assert.equal(await s.run('list'), 0)
  const lines = s.out.text.trimEnd().split('\n')
  assert.equal(lines.length, 3)
  const [header = '', a = '', b = ''] = lines
  assert.match(header, /^HOST +KIND +HIBERNATE +DIR +SOCKET +DB$/)
  assert.match(a, /^a\.example\.com +static +no +- +- +-$/)
  assert.match(b, /^b\.example\.com +instance +yes +\/srv\/b +\/srv\/b\.sock +\/srv\/b\/app\.db$/)
  for (const col of ['KIND', 'HIBERNATE', 'DIR', 'SOCKET', 'DB']) {
    const at = header.indexOf(col)
    assert.equal(b[at - 1], ' ', `row b is aligned under ${col}`)
    assert.notEqual(b[at], ' ', `row b has a value starting under ${col}`)
  }

  s.out.chunks.length = 0
  assert.equal(await s.run('list', '--json'), 0)
  assert.deepEqual(JSON.parse(s.out.text), [
    { host: 'a.example.com', kind: 'static', socket: '', dir: '', db: '', hibernate: false },
    {
      host: 'b.example.com',
      kind: 'instance',
      socket: '/srv/b.sock',
      dir: '/srv/b',
      db: '/srv/b/app.db',
      hibernate: true,
    },
  ])
})

void test('rm removes a row and refuses a host that is not there', async (t) => {
  const s = await setup(t)
  assert.equal(await s.run('add', 'a.example.com', '--dir', '/srv/a'), 0)
  assert.equal(await s.run('rm', 'a.example.com'), 0, s.err.text)
  assert.deepEqual(s.registry.list(), [])
  assert.match(s.out.text, /removed a\.example\.com/)
  assert.equal(await s.run('rm', 'a.example.com'), 1)
  assert.match(s.err.text, /no route for host a\.example\.com/)
  assert.equal(await s.run('rm', 'a..b'), 1)
  assert.match(s.err.text, /not a valid hostname/)
})

void test('rm refuses a host a journal or hold marker names, and keeps its row', async (t) => {
  const s = await setup(t)
  assert.equal(await s.run('add', 'a.example.com', '--dir', '/srv/a'), 0)
  assert.equal(await s.run('add', 'b.example.com', '--dir', '/srv/b'), 0)
  await fs.mkdir(path.join(s.dataDir, 'layout'), { recursive: true })
  await fs.writeFile(path.join(s.dataDir, 'layout', 'a.example.com.journal'), '{}')
  await fs.writeFile(path.join(s.dataDir, 'layout', 'b.example.com.hold'), '{}')
  assert.equal(await s.run('rm', 'a.example.com'), 1)
  assert.match(s.err.text, /a\.example\.com is mid-move/)
  assert.equal(await s.run('rm', 'b.example.com'), 1)
  assert.match(s.err.text, /b\.example\.com is held down/)
  assert.deepEqual(
    s.registry.list().map((r) => r.host),
    ['a.example.com', 'b.example.com'],
  )
})

void test('rm refuses a host a batch journal names among others, and every host while a batch journal cannot be read', async (t) => {
  const s = await setup(t)
  for (const h of ['a.example.com', 'b.example.com', 'c.example.com'])
    assert.equal(await s.run('add', h, '--dir', `/srv/${h}`), 0)
  const layout = path.join(s.dataDir, 'layout')
  await fs.mkdir(layout, { recursive: true })
  const move = (host: string) => ({
    host,
    to: 'nested',
    from: { dir: `/srv/${host}`, socket: '', db: '' },
    dest: { dir: '', socket: '', db: '' },
  })
  await fs.writeFile(
    path.join(layout, '_batch-7.journal'),
    JSON.stringify({
      v: 2,
      generation: 7,
      startedAt: '2026-12-01T00:00:00.000Z',
      moves: [move('a.example.com'), move('b.example.com')],
    }),
  )
  for (const h of ['a.example.com', 'b.example.com']) {
    assert.equal(await s.run('rm', h), 1)
    assert.ok(s.err.text.includes(`${h} is mid-move (${path.join(layout, '_batch-7.journal')})`), s.err.text)
  }
  assert.equal(await s.run('rm', 'c.example.com'), 0, s.err.text)
  assert.equal(await s.run('add', 'c.example.com', '--dir', '/srv/c.example.com'), 0)
  await fs.writeFile(path.join(layout, '_batch-8.journal'), '{"v":2,')
  assert.equal(await s.run('rm', 'c.example.com'), 1)
  assert.match(s.err.text, /_batch-8\.journal .*cannot be read and may name c\.example\.com/)
  assert.deepEqual(
    s.registry.list().map((r) => r.host),
    ['a.example.com', 'b.example.com', 'c.example.com'],
  )
})

void test('usage errors exit 2 with the usage and change nothing', async (t) => {
  const s = await setup(t)
  const cases = [
    [],
    ['frob'],
    ['add'],
    ['add', 'a.example.com', '--bogus'],
    ['add', 'a.example.com', '--kind', 'nope'],
    ['add', 'a.example.com', '--dir'],
    ['add', 'a.example.com', 'b.example.com'],
    ['list', 'extra'],
    ['rm'],
    ['rm', 'a.example.com', 'b.example.com'],
  ]
  for (const argv of cases) {
    s.err.chunks.length = 0
    assert.equal(await routesCommand(argv, s.io), 2, argv.join(' '))
    assert.match(s.err.text, /^layoutd routes: .+\nusage:\n/, argv.join(' '))
  }
  assert.deepEqual(s.registry.list(), [])
  assert.equal(s.mints(), 0)
})

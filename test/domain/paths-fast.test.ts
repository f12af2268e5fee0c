// The paths are built without path.join and hasShape tests a db without
// path.relative in the common case: each answer must equal the one the
// plain path functions give, for awkward data roots and db paths too.
import assert from 'node:assert/strict'
import path from 'node:path'
import { test } from 'node:test'
import { hostError } from '../../src/domain/hostname.js'
import { carryDb, flatPaths, hasShape, nestedPaths, nestedRoot, type Dirs } from '../../src/domain/paths.js'

const DIRS: Dirs[] = [
  { dataDir: '/srv/layoutd/data', runDir: '/srv/layoutd/data/run' },
  { dataDir: '/', runDir: '/' },
  { dataDir: '/srv/data/', runDir: '/run/layoutd/' },
  { dataDir: 'rel/data', runDir: 'run' },
  { dataDir: '/a/../b', runDir: '/a/./run' },
  { dataDir: '.', runDir: '' },
]
const HOSTS = ['a.example.com', 'x', 'xn--bcher-kva.example', `${'a'.repeat(63)}.b`]

void test('flat and nested paths equal path.join of the parts, whatever the data root looks like', () => {
  for (const d of DIRS) {
    for (const h of HOSTS) {
      assert.deepEqual(
        flatPaths(d, h),
        { dir: path.join(d.dataDir, 'apps', h), socket: path.join(d.runDir, `${h}.sock`), db: '' },
        `${d.dataDir} ${h}`,
      )
      const root = path.join(d.dataDir, 'nested', h)
      assert.equal(nestedRoot(d, h), root)
      assert.deepEqual(nestedPaths(d, h), {
        dir: path.join(root, 'data'),
        socket: path.join(root, 'run', 'app.sock'),
        db: '',
      })
    }
  }
  // A Dirs changed after use is joined again.
  const d: Dirs = { dataDir: '/one', runDir: '/one/run' }
  assert.equal(flatPaths(d, 'a.b').dir, '/one/apps/a.b')
  d.dataDir = '/two'
  assert.equal(flatPaths(d, 'a.b').dir, '/two/apps/a.b')
})

void test('hasShape judges a db inside dir exactly as path.relative does', () => {
  const d = DIRS[0] as Dirs
  const dir = flatPaths(d, 'a.example.com').dir
  const reference = (db: string) => {
    const rel = path.relative(dir, db)
    return rel !== '' && !rel.startsWith('..') && !path.isAbsolute(rel)
  }
  const dbs = [
    'x.db',
    'db/app.sqlite',
    '..x',
    '..x/y',
    '.x',
    'a/./b',
    'a/../b',
    'a/../../b',
    'a//b',
    'a/',
    '.',
    '..',
    '',
    '/',
    'a/..',
    'a/.',
  ]
  for (const rest of dbs) {
    const db = `${dir}/${rest}`
    assert.equal(
      hasShape(
        d,
        {
          host: 'a.example.com',
          kind: 'instance',
          hibernate: true,
          dir,
          socket: flatPaths(d, 'a.example.com').socket,
          db,
        },
        'flat',
      ),
      reference(db),
      JSON.stringify(rest),
    )
  }
  for (const db of [`${dir}x/y`, dir, '/elsewhere/x.db', 'relative.db']) {
    assert.equal(
      hasShape(
        d,
        {
          host: 'a.example.com',
          kind: 'instance',
          hibernate: true,
          dir,
          socket: flatPaths(d, 'a.example.com').socket,
          db,
        },
        'flat',
      ),
      reference(db),
      db,
    )
  }
})

void test('carryDb carries a db exactly as path.relative and path.join do, and refuses the same ones', () => {
  const reference = (db: string, from: string, to: string): string => {
    if (db === '') return ''
    const rel = path.relative(from, db)
    if (rel === '' || rel.startsWith('..') || path.isAbsolute(rel)) throw new Error('not inside')
    return path.join(to, rel)
  }
  const answer = (f: () => string): string => {
    try {
      return f()
    } catch {
      return 'refused'
    }
  }
  const froms = [
    '/srv/data/apps/a.b',
    '/srv/data/apps/a.b/',
    '/srv/./data/apps/a.b',
    '/srv/x/../data/apps/a.b',
    '/',
    '',
  ]
  const tos = ['/srv/data/nested/a.b/data', '/srv/data/nested/a.b/data/', '/srv//data/nested/a.b/data', '/']
  const rests = ['x.db', 'db/app.sqlite', '..x', '.x', 'a/./b', 'a/../b', 'a/../../b', 'a//b', 'a/', '.', '..', '']
  // The pass's own case (both dirs normal, db below with a clean rest) is
  // among these, and the fast path's two normal checks are each needed:
  // taking either out makes one of the other pairs answer differently.
  for (const from of froms) {
    for (const to of tos) {
      for (const db of [...rests.map((r) => `${from}/${r}`), `${from}x/y`, from, '/elsewhere/x.db']) {
        const got = answer(() => carryDb(db, from, to))
        assert.equal(
          got,
          answer(() => reference(db, from, to)),
          `${db} from ${from} to ${to}`,
        )
      }
    }
  }
  assert.equal(carryDb('/srv/data/apps/a.b/db/x', '/srv/data/apps/a.b', '/n/a.b/data'), '/n/a.b/data/db/x')
  assert.equal(carryDb('', '/a', '/b'), '')
})

void test('hostError: the one-expression check agrees with the label-by-label rule', () => {
  const ok = ['a', 'a.b', 'a-b.c', `${'a'.repeat(63)}`, `${'a.'.repeat(126)}a`, '0.0']
  const bad = [
    '',
    'A',
    'a..b',
    '.a',
    'a.',
    '-a',
    'a-',
    `${'a'.repeat(64)}`,
    `${'a.'.repeat(126)}ab`,
    'a_b',
    'é.com',
    'a b',
    'a/b',
    '..',
  ]
  for (const h of ok) assert.equal(hostError(h), null, h)
  for (const h of bad) assert.notEqual(hostError(h), null, h)
  assert.equal(hostError(`${'a.'.repeat(126)}ab`), 'hostname is 254 bytes, over 253')
})

void test('a conflict between dirs inside one another is found whether the paths are normal or not', async () => {
  const { classifyAll } = await import('../../src/domain/classify.js')
  const d = DIRS[0] as Dirs
  const row = (host: string, dir: string) => ({
    host,
    kind: 'instance' as const,
    hibernate: true,
    dir,
    socket: `/s/${host}.sock`,
    db: '',
  })
  for (const [outer, inner] of [
    ['/srv/x', '/srv/x/y/z'],
    ['/srv/x/', '/srv/x/./y'],
    ['/', '/srv'],
  ] as const) {
    const words = classifyAll([row('a.b', outer), row('c.d', inner)], { dirs: d, fenced: () => undefined })
    assert.equal(words.get('a.b')?.layout, 'conflict', `${outer} around ${inner}`)
    assert.equal(words.get('c.d')?.layout, 'conflict', `${inner} inside ${outer}`)
  }
})

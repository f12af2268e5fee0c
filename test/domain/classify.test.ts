import assert from 'node:assert/strict'
import { test } from 'node:test'
import { classify, classifyAll, PathClaims } from '../../src/domain/classify.js'
import { flatPaths, nestedPaths, type Dirs } from '../../src/domain/paths.js'
import type { Route } from '../../src/domain/schemas.js'
import { why } from '../../src/domain/reason-codes.js'

const dirs: Dirs = { dataDir: '/data', runDir: '/data/run' }

function flat(host: string, over: Partial<Route> = {}): Route {
  return { host, kind: 'instance', hibernate: true, ...flatPaths(dirs, host), ...over }
}
function nested(host: string, over: Partial<Route> = {}): Route {
  return { host, kind: 'instance', hibernate: true, ...nestedPaths(dirs, host), ...over }
}

const none = { dirs, fenced: () => undefined }

void test('the row words, in order of precedence', () => {
  const cases: Array<[string, Route, Route[], string, RegExp | string]> = [
    ['flat shape', flat('a.example.com'), [], 'flat', ''],
    ['flat with a db inside', flat('a.example.com', { db: '/data/apps/a.example.com/db/app.db' }), [], 'flat', ''],
    ['nested shape', nested('a.example.com'), [], 'nested', ''],
    ['external: unflagged socket', flat('a.example.com', { hibernate: false }), [], 'external', ''],
    [
      'foreign: neither shape',
      flat('a.example.com', { dir: '/srv/a' }),
      [],
      'foreign',
      /^paths are neither the flat nor the nested shape/,
    ],
    [
      'foreign: mixed shapes',
      flat('a.example.com', { socket: nestedPaths(dirs, 'a.example.com').socket }),
      [],
      'foreign',
      /neither/,
    ],
    ['foreign: db outside dir', flat('a.example.com', { db: '/data/other.db' }), [], 'foreign', /neither/],
    [
      'foreign: invalid host',
      flat('a.example.com', { host: 'A_B.example.com' }),
      [],
      'foreign',
      /^not a valid hostname: /,
    ],
    ['foreign: no socket', flat('a.example.com', { socket: '' }), [], 'foreign', /^no socket/],
    [
      'conflict: same dir',
      flat('a.example.com'),
      [flat('b.example.com', { dir: '/data/apps/a.example.com' })],
      'conflict',
      'dir /data/apps/a.example.com is also claimed by b.example.com',
    ],
    [
      'conflict: dir inside',
      flat('a.example.com'),
      [flat('b.example.com', { dir: '/data/apps' })],
      'conflict',
      "dir /data/apps/a.example.com is inside b.example.com's dir /data/apps",
    ],
    [
      'conflict: dir contains',
      flat('a.example.com'),
      [flat('b.example.com', { dir: '/data/apps/a.example.com/x' })],
      'conflict',
      "dir /data/apps/a.example.com contains b.example.com's dir /data/apps/a.example.com/x",
    ],
    [
      'conflict: trailing slash is the same dir',
      flat('a.example.com'),
      [flat('b.example.com', { dir: '/data/apps/a.example.com/' })],
      'conflict',
      /also claimed by b/,
    ],
    [
      'conflict: same socket',
      flat('a.example.com'),
      [flat('b.example.com', { socket: '/data/run/a.example.com.sock' })],
      'conflict',
      /^socket .* is also b.example.com's$/,
    ],
    [
      'conflict: a sidecar counts',
      nested('a.example.com'),
      [{ ...nested('a.example.com'), host: 's.example.com', kind: 'sidecar' }],
      'conflict',
      /s\.example\.com/,
    ],
    [
      'conflict beats foreign',
      flat('a.example.com', { dir: '/srv/x' }),
      [flat('b.example.com', { dir: '/srv/x' })],
      'conflict',
      /b\.example\.com/,
    ],
    [
      'a sibling with a longer name is no conflict',
      flat('a.example.com'),
      [flat('a.example.com-2', { dir: '/data/apps/a.example.com-2' })],
      'flat',
      '',
    ],
  ]
  for (const [name, rt, others, layout, reason] of cases) {
    const c = classify(rt, [rt, ...others], none)
    assert.equal(c.layout, layout, name)
    if (typeof reason === 'string') assert.equal(c.reason, reason, name)
    else assert.match(c.reason, reason, name)
    // A reason always has its code, and the code says the kind: no reader parses the sentence.
    assert.equal(c.code === '', c.reason === '', name)
    if (layout === 'conflict') assert.ok(c.code === 'dir_claimed' || c.code === 'socket_claimed', name)
  }
})

void test('fenced comes first, with the reason the pass gives', () => {
  const rt = flat('a.example.com')
  const inFlight = why('in_flight', 'layout move to nested in flight')
  const ctx = { dirs, fenced: (h: string) => (h === 'a.example.com' ? inFlight : undefined) }
  assert.deepEqual(classify(rt, [rt, flat('b.example.com', { dir: rt.dir })], ctx), {
    layout: 'fenced',
    code: 'in_flight',
    reason: 'layout move to nested in flight',
  })
  // Even over a conflict; but an external row is never ours to fence.
  assert.equal(classify({ ...rt, hibernate: false }, [rt], ctx).layout, 'external')
})

void test('classifyAll answers every row with one index', () => {
  const rows = [
    flat('a.example.com'),
    nested('b.example.com'),
    flat('c.example.com', { dir: nestedPaths(dirs, 'b.example.com').dir }),
  ]
  const all = classifyAll(rows, none)
  assert.deepEqual(
    [...all.values()].map((c) => c.layout),
    ['flat', 'conflict', 'conflict'],
  )
})

void test('PathClaims finds claimants of any directory', () => {
  const claims = new PathClaims([
    flat('a.example.com'),
    flat('b.example.com', { dir: '/data/nested/x.example.com/data/in' }),
  ])
  assert.equal(claims.dirClaimant('/data/nested/x.example.com', 'x.example.com')?.host, 'b.example.com')
  assert.equal(claims.dirClaimant('/data/nested/y.example.com', 'y.example.com'), undefined)
  assert.equal(
    claims.dirClaimant('/data/apps/a.example.com', 'a.example.com'),
    undefined,
    'a row is not its own claimant',
  )
  assert.equal(claims.socketClaimant('/data/run/a.example.com.sock', 'z.example.com')?.host, 'a.example.com')
})

void test('PathClaims followed row by row answers as one built afresh', () => {
  const a = flat('a.example.com')
  const b = flat('b.example.com')
  const c = flat('c.example.com', { dir: '/data/apps/b.example.com/inner' })
  const claims = new PathClaims([c, a])
  claims.add(b)
  const fresh = new PathClaims([a, b, c])
  for (const host of ['a.example.com', 'b.example.com', 'c.example.com', 'z.example.com']) {
    assert.deepEqual(
      claims.dirClaimant('/data/apps/b.example.com', host),
      fresh.dirClaimant('/data/apps/b.example.com', host),
      host,
    )
  }
  assert.equal(
    claims.dirClaimant('/data/apps/b.example.com', 'z.example.com')?.host,
    'b.example.com',
    'the least other host is named, whatever the order rows came in',
  )
  // b moves away: its claims go, c's stay.
  claims.remove(b)
  claims.add({ ...b, dir: '/data/nested/b.example.com/data', socket: '/data/nested/b.example.com/run/app.sock' })
  assert.equal(claims.dirClaimant('/data/apps/b.example.com', 'z.example.com')?.host, 'c.example.com')
  assert.equal(claims.socketClaimant('/data/run/b.example.com.sock', 'z.example.com'), undefined)
  assert.equal(claims.dirClaimant('/data/nested/b.example.com', 'z.example.com')?.host, 'b.example.com')
  claims.remove(c)
  assert.equal(
    claims.dirClaimant('/data/apps/b.example.com', 'z.example.com'),
    undefined,
    'nothing claims it once both are gone',
  )
})

void test("PathClaims.replace moves a row's claims as remove and add would, a path emptied or set included", () => {
  const rows = [
    flat('a.example.com'),
    flat('b.example.com'),
    flat('c.example.com', { dir: '/data/apps/b.example.com/inner' }),
  ]
  const claims = new PathClaims(rows)
  const moves: Array<[number, Partial<Route>]> = [
    [1, { dir: '/data/nested/b.example.com/data', socket: '/data/nested/b.example.com/run/app.sock' }],
    [0, { dir: '/data/nested/b.example.com/data/deeper' }],
    [2, { dir: '', socket: '' }],
    [2, { dir: '/data/apps/c.example.com', socket: '/data/run/c.example.com.sock' }],
    [0, { dir: '/data/apps/a.example.com' }],
  ]
  const paths = [
    '/data/apps/b.example.com',
    '/data/nested/b.example.com',
    '/data/nested/b.example.com/data',
    '/data/apps/a.example.com',
    '/data/apps/c.example.com',
    '/data',
    '/',
  ]
  const sockets = [
    '/data/run/b.example.com.sock',
    '/data/nested/b.example.com/run/app.sock',
    '/data/run/c.example.com.sock',
  ]
  for (const [i, over] of moves) {
    const old = rows[i] as Route
    rows[i] = { ...old, ...over }
    claims.replace(old, rows[i])
    const fresh = new PathClaims(rows)
    for (const host of ['a.example.com', 'b.example.com', 'c.example.com', 'z.example.com']) {
      for (const p of paths)
        assert.deepEqual(
          claims.dirClaimant(p, host),
          fresh.dirClaimant(p, host),
          `${p} for ${host} after ${JSON.stringify(over)}`,
        )
      for (const s of sockets)
        assert.deepEqual(claims.socketClaimant(s, host), fresh.socketClaimant(s, host), `${s} for ${host}`)
    }
  }
})

void test('a path thousands of rows share names the least other host as they come and go, across its chunks', () => {
  // More hosts under D/apps than one chunk of the index holds (1,024): the
  // least other one is still named, through removals that empty chunks.
  const hosts = Array.from({ length: 3000 }, (_, i) => `h${String(i).padStart(4, '0')}.example.com`)
  const claims = new PathClaims()
  for (const host of [...hosts].reverse()) claims.add(flat(host))
  const claimantOfApps = (): string | undefined => claims.dirClaimant('/data/apps', 'z.example.com')?.host
  assert.equal(claimantOfApps(), 'h0000.example.com')
  assert.equal(claims.dirClaimant('/data/apps', 'h0000.example.com')?.host, 'h0001.example.com', 'never itself')
  // The first 2,500 leave (a chunk and more emptied, whichever order they were added in).
  for (const host of hosts.slice(0, 2500)) claims.remove(flat(host))
  assert.equal(claimantOfApps(), 'h2500.example.com')
  const fresh = new PathClaims(hosts.slice(2500).map((h) => flat(h)))
  assert.deepEqual(claims.dirClaimant('/data', 'z.example.com'), fresh.dirClaimant('/data', 'z.example.com'))
  // One added back, twice (once held is once), then every one gone.
  claims.add(flat(hosts[7] ?? ''))
  claims.add(flat(hosts[7] ?? ''))
  assert.equal(claimantOfApps(), 'h0007.example.com')
  for (const host of [...hosts.slice(2500), hosts[7] ?? '']) claims.remove(flat(host))
  assert.equal(claimantOfApps(), undefined, 'nothing claims D/apps once every row has left it')
})

void test('an index of thousands of rows, each moved to nested and some back, answers as one built afresh', () => {
  // Enough paths for every one of the index's Maps to hold many, and each
  // row's keys spread over several: a key looked for where it was not put
  // would show as a claimant missing or named where none is.
  const hosts = Array.from({ length: 2000 }, (_, i) => `t${String(i).padStart(4, '0')}.example.com`)
  const rows = hosts.map((host) => flat(host))
  const claims = new PathClaims(rows)
  for (let i = 0; i < rows.length; i++) {
    const old = rows[i] as Route
    const now = i % 7 === 3 ? flat(old.host) : nested(old.host)
    rows[i] = now
    claims.replace(old, now)
  }
  const fresh = new PathClaims(rows)
  for (const [i, host] of hosts.entries()) {
    const row = rows[i] as Route
    const neighbour = hosts[(i + 1) % hosts.length] as string
    assert.equal(claims.dirClaimant(row.dir, host), undefined, `${host} is not its own claimant`)
    assert.equal(claims.dirClaimant(row.dir, neighbour)?.host, host, `${host}'s dir is claimed`)
    assert.equal(claims.socketClaimant(row.socket, neighbour)?.host, host, `${host}'s socket is claimed`)
    assert.deepEqual(
      claims.dirClaimant(`/data/nested/${host}`, neighbour),
      fresh.dirClaimant(`/data/nested/${host}`, neighbour),
    )
    assert.deepEqual(
      claims.dirClaimant(`/data/apps/${host}`, neighbour),
      fresh.dirClaimant(`/data/apps/${host}`, neighbour),
    )
  }
  assert.deepEqual(
    claims.dirClaimant('/data/nested', 'z.example.com'),
    fresh.dirClaimant('/data/nested', 'z.example.com'),
  )
  assert.deepEqual(claims.dirClaimant('/data/apps', 'z.example.com'), fresh.dirClaimant('/data/apps', 'z.example.com'))
})

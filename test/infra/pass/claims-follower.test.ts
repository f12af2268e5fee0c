import assert from 'node:assert/strict'
import { test, type TestContext } from 'node:test'
import v8 from 'node:v8'
import vm from 'node:vm'
import { PathClaims } from '../../../src/domain/classify.js'
import type { Route } from '../../../src/domain/schemas.js'
import { followRows, followSome, type ClaimsOf } from '../../../src/infra/pass/claims-follower.js'
import { Registry } from '../../../src/infra/registry.js'
import { lineageOf, rewritesOf } from '../../../src/infra/rows-snapshot.js'
import { tmpDir } from '../../helpers/tmp.js'

async function registry(t: TestContext, n: number): Promise<{ reg: Registry; dataDir: string }> {
  const dataDir = await tmpDir(t)
  const reg = Registry.open(dataDir)
  t.after(() => reg.close())
  reg.addMany(Array.from({ length: n }, (_, i) => flatRow(`h${i}.example.com`)))
  return { reg, dataDir }
}

function flatRow(host: string): Route {
  return { host, kind: 'instance', socket: `/d/run/${host}.sock`, dir: `/d/apps/${host}`, db: '', hibernate: true }
}

function nestedPaths(host: string): { host: string; dir: string; socket: string; db: string } {
  return { host, dir: `/d/nested/${host}/data`, socket: `/d/nested/${host}/run/app.sock`, db: '' }
}

/** What every row's claimants are under claims, beside those of an index built afresh from routes. */
function assertSameClaims(followed: ClaimsOf, routes: readonly Route[]): void {
  const fresh = new PathClaims(routes)
  for (const r of routes) {
    assert.deepEqual(
      followed.claims.dirClaimant(r.dir, r.host),
      fresh.dirClaimant(r.dir, r.host),
      `dir claimant of ${r.host}`,
    )
    assert.deepEqual(
      followed.claims.socketClaimant(r.socket, r.host),
      fresh.socketClaimant(r.socket, r.host),
      `socket claimant of ${r.host}`,
    )
  }
}

void test('a list carried over rewrites names its listing and the hosts rewritten since, write by write', async (t) => {
  const { reg } = await registry(t, 4)
  const listed = reg.snapshot().routes
  assert.equal(rewritesOf(listed), undefined, 'a listing was carried from nothing')
  reg.setPaths([nestedPaths('h1.example.com')])
  reg.setPaths([nestedPaths('h3.example.com'), nestedPaths('h1.example.com')])
  const carried = reg.snapshot().routes
  assert.notEqual(carried, listed)
  assert.equal(rewritesOf(carried)?.since, lineageOf(listed))
  assert.equal(lineageOf(carried), lineageOf(listed))
  assert.deepEqual(
    rewritesOf(carried)?.hosts,
    ['h1.example.com', 'h3.example.com', 'h1.example.com'],
    "each write's hosts as it named them",
  )
  assert.deepEqual(
    carried.map((r) => r.dir),
    reg.list().map((r) => r.dir),
  )
})

void test('claims followed over carried lists, skipping some, are those built afresh, and only the rewritten hosts are followed', async (t) => {
  const { reg } = await registry(t, 50)
  let followed = followRows(undefined, reg.snapshot().routes)
  const listed = followed.since
  reg.setPaths(Array.from({ length: 10 }, (_, i) => nestedPaths(`h${i}.example.com`)))
  followed = followRows(followed, reg.snapshot().routes)
  assertSameClaims(followed, reg.snapshot().routes)
  assert.equal(followed.since, listed)
  assert.equal(followed.followed, 10)
  // Two batches the follower never saw, one of them putting h20's dir inside h21's: a conflict both ways.
  reg.setPaths([nestedPaths('h30.example.com')])
  reg.setPaths([
    { host: 'h20.example.com', dir: '/d/apps/h21.example.com/inner', socket: '/d/run/h20.example.com.sock', db: '' },
    nestedPaths('h0.example.com'),
  ])
  const now = reg.snapshot().routes
  followed = followRows(followed, now)
  assert.equal(followed.followed, 13)
  assertSameClaims(followed, now)
  assert.match(
    followed.claims.dirClaimant('/d/apps/h21.example.com', 'h21.example.com')?.reason ?? '',
    /contains h20\.example\.com/,
  )
})

void test('a list someone else changed is compared whole, and claims follow it all the same', async (t) => {
  const { reg, dataDir } = await registry(t, 20)
  let followed = followRows(undefined, reg.snapshot().routes)
  reg.setPaths([nestedPaths('h2.example.com')])
  followed = followRows(followed, reg.snapshot().routes)
  // Another process (the CLI beside the agent) removes a row and adds one over h5's socket.
  const other = Registry.open(dataDir)
  other.remove('h7.example.com')
  other.add({ ...flatRow('new.example.com'), socket: '/d/run/h5.example.com.sock' })
  other.close()
  const relisted = reg.snapshot().routes
  assert.equal(rewritesOf(relisted), undefined, 'listed again, not carried')
  followed = followRows(followed, relisted)
  assert.equal(followed.since, lineageOf(relisted))
  assertSameClaims(followed, relisted)
  assert.equal(
    followed.claims.dirClaimant('/d/apps/h7.example.com', 'x.example.com'),
    undefined,
    'the removed row claims nothing',
  )
  assert.equal(followed.claims.socketClaimant('/d/run/h5.example.com.sock', 'h5.example.com')?.host, 'new.example.com')
})

void test('once the rewrites outnumber the rows, a carried list starts a lineage of its own', async (t) => {
  const { reg } = await registry(t, 2)
  const listed = reg.snapshot().routes
  reg.setPaths([nestedPaths('h0.example.com'), nestedPaths('h1.example.com')])
  assert.equal(rewritesOf(reg.snapshot().routes)?.since, lineageOf(listed))
  reg.setPaths([flatRow('h0.example.com')])
  const dropped = reg.snapshot().routes
  assert.equal(rewritesOf(dropped), undefined, 'three rewrites of two rows: no lineage kept')
  reg.setPaths([nestedPaths('h0.example.com')])
  assert.equal(rewritesOf(reg.snapshot().routes)?.since, lineageOf(dropped))
  assertSameClaims(followRows(undefined, reg.snapshot().routes), reg.snapshot().routes)
})

void test('the catch-up after a commit: step by step to the carried list, and any reader between steps follows the rest', async (t) => {
  const { reg } = await registry(t, 40)
  const listed = reg.snapshot().routes
  // Half move nested; h5 moves inside h6's directory, so a claimant is at stake.
  const moved = Array.from({ length: 20 }, (_, i) => nestedPaths(`h${String(i * 2)}.example.com`))
  reg.setPaths([
    ...moved,
    { host: 'h5.example.com', dir: '/d/apps/h6.example.com/inner', socket: '/d/run/h5.example.com.sock', db: '' },
  ])
  const carried = reg.snapshot().routes
  const fresh = (): ClaimsOf => followRows(undefined, listed)

  // Stepped to the end: the claims of the carried list, and that list named only at the last step.
  let c = fresh()
  let steps = 0
  while (c.routes !== carried) {
    const next = followSome(c, carried, 7)
    assert.ok(next !== undefined, 'a carried list is followed')
    if (next.routes !== carried) assert.notEqual(next.routes, listed, 'between steps the claims answer to no list')
    c = next
    steps++
  }
  assert.equal(steps, Math.ceil(21 / 7))
  assertSameClaims(c, carried)
  assert.equal(c.claims.dirClaimant('/d/apps/h6.example.com', 'h6.example.com')?.host, 'h5.example.com')

  // A wake between two steps follows the rest itself.
  const part = followSome(fresh(), carried, 7)
  assert.ok(part !== undefined && part.followed === 7)
  const woke = followRows(part, carried)
  assert.equal(woke.routes, carried)
  assertSameClaims(woke, carried)

  // A reader of the older list between steps is answered for that list (compared whole).
  const part2 = followSome(fresh(), carried, 7)
  assert.ok(part2 !== undefined)
  const back = followRows(part2, listed)
  assertSameClaims(back, listed)
  assert.equal(back.claims.dirClaimant('/d/apps/h6.example.com', 'h6.example.com'), undefined)

  // A list not carried from the claims' own (another process's listing) is left to the next wake.
  assert.equal(followSome(fresh(), reg.list(), 7), undefined)
})

void test('a list carried over every row holds no reference to the rows it replaced', async (t) => {
  const { reg } = await registry(t, 3)
  let listed: readonly Route[] | undefined = reg.snapshot().routes
  const lineage = lineageOf(listed)
  const gone = new WeakRef(listed)
  listed = undefined
  reg.setPaths(['h0', 'h1', 'h2'].map((h) => nestedPaths(`${h}.example.com`)))
  const carried = reg.snapshot().routes
  assert.equal(rewritesOf(carried)?.since, lineage, 'still named by its listing')
  await collected()
  assert.equal(gone.deref(), undefined, 'the listing was let go')
})

/** A full collection, after this turn's references are gone. */
async function collected(): Promise<void> {
  v8.setFlagsFromString('--expose-gc')
  const gc = vm.runInNewContext('gc') as () => void
  await new Promise((resolve) => setImmediate(resolve))
  gc()
}

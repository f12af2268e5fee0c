import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { test, type TestContext } from 'node:test'
import { PathClaims } from '../../../src/domain/classify.js'
import { flatPaths, isFlat, isNested, nestedPaths, nestedRoot } from '../../../src/domain/paths.js'
import { Registry } from '../../../src/infra/registry.js'
import { GRACE_FILE } from '../../../src/infra/pass/grace.js'
import { tmpName } from '../../../src/infra/fsutil.js'
import { batchJournalName } from '../../../src/infra/pass/journal.js'
import { Pass } from '../../../src/infra/pass/pass.js'
import type { PassIo } from '../../../src/infra/pass/pass-io.js'
import { addByteNamedEntries, deepTree, hashTree } from '../../helpers/tenants.js'
import { tmpDir } from '../../helpers/tmp.js'
import { GRACE_MS, harness, outcomes } from './pass-harness.js'

const host = (i: number) => `t${i}.example.com`

function layoutFiles(dataDir: string): string[] {
  const dir = path.join(dataDir, 'layout')
  return fs.existsSync(dir)
    ? fs
        .readdirSync(dir)
        .filter((n) => n !== 'aside' && n !== GRACE_FILE)
        .sort()
    : []
}

void test('migrates and reverts many hosts in batches, every tree byte-identical', async (t) => {
  const h = await harness(t, { batchSize: 4 })
  const hosts = Array.from({ length: 10 }, (_, i) => host(i))
  const before = new Map(hosts.map((x, i) => [x, hashTree(h.addFlat(x, i + 1).dir)]))
  const moves: string[] = []
  h.pass = h.newPass({ batchSize: 4, onMove: (to, outcome) => moves.push(`${to}/${outcome}`) })

  const res = await h.converge('nested')
  assert.deepEqual(outcomes(res), Object.fromEntries(hosts.map((x) => [x, 'moved'])))
  assert.deepEqual(
    res.map((r) => r.host),
    hosts,
    'results in row order',
  )
  for (const x of hosts) {
    const rt = h.reg.get(x)
    assert.ok(rt && isNested(h.dirs, rt), `${x} row is nested`)
    assert.equal(rt.db, path.join(nestedPaths(h.dirs, x).dir, 'data', 'app.db'))
    assert.equal(hashTree(rt.dir), before.get(x), `${x} tree unchanged by the move`)
    assert.equal(fs.existsSync(flatPaths(h.dirs, x).dir), false)
    assert.equal(fs.statSync(nestedRoot(h.dirs, x)).mode & 0o7777, 0o710)
    assert.equal(fs.statSync(path.join(nestedRoot(h.dirs, x), 'run')).mode & 0o7777, 0o2770)
    assert.equal(h.fence.fenced(x), undefined, 'fence lifted')
    assert.equal(h.pass.classify(rt, h.reg.list()).layout, 'nested')
  }
  assert.deepEqual(layoutFiles(h.dirs.dataDir), [], 'no journal or hold left')
  assert.equal(moves.filter((m) => m === 'nested/moved').length, 10)
  // Batches of 4: the journals of a batch share their commit.
  assert.equal(h.steps.filter((s) => s === 'after-journal').length, 3)

  assert.deepEqual(outcomes(await h.converge('nested')), Object.fromEntries(hosts.map((x) => [x, 'unchanged'])))

  const back = await h.converge('flat')
  assert.deepEqual(outcomes(back), Object.fromEntries(hosts.map((x) => [x, 'moved'])))
  for (const x of hosts) {
    const rt = h.reg.get(x)
    assert.ok(rt && isFlat(h.dirs, rt), `${x} row is flat`)
    assert.equal(hashTree(rt.dir), before.get(x), `${x} tree unchanged by the revert`)
  }
  assert.deepEqual(layoutFiles(h.dirs.dataDir), [])
})

void test('the steps of a move run in order', async (t) => {
  const h = await harness(t)
  h.addFlat('a.example.com')
  await h.converge('nested')
  const plain = h.steps.filter((s) => !s.includes(':'))
  assert.deepEqual(plain, [
    'after-fence',
    'after-aside',
    'after-journal',
    'after-preflight',
    'after-prepare',
    'after-rename',
    'after-row',
    'after-journal-remove',
    'after-lift',
  ])
  assert.ok(h.steps.includes('after-rename:a.example.com'))
})

void test('a symlinked dir is held, stays fenced across a restart, and moves once fixed', async (t) => {
  const h = await harness(t)
  const rt = h.addFlat('a.example.com')
  const real = path.join(h.dirs.dataDir, 'elsewhere')
  fs.renameSync(rt.dir, real)
  fs.symlinkSync(real, rt.dir)
  const sum = hashTree(real)

  const [r] = await h.converge('nested')
  assert.equal(r?.outcome, 'held')
  assert.equal(r?.code, 'symlink_source')
  assert.match(r?.reason ?? '', /is a symlink/)
  assert.deepEqual(layoutFiles(h.dirs.dataDir), ['a.example.com.hold'])
  assert.notEqual(h.fence.fenced('a.example.com'), undefined, 'held hosts stay fenced')
  assert.equal(h.pass.held('a.example.com')?.code, 'symlink_source', 'the marker carries the code')
  assert.match(h.pass.held('a.example.com')?.reason ?? '', /is a symlink/)
  const c = h.pass.classify(rt, h.reg.list())
  assert.equal(c.layout, 'fenced')
  assert.match(c.reason, /held down after a refused move to nested: .*is a symlink/)
  assert.ok(fs.lstatSync(rt.dir).isSymbolicLink(), 'nothing moved')
  assert.equal(hashTree(real), sum)

  // A restart: the hold marker is what keeps the host down.
  h.fence.lift(h.fence.hosts())
  h.pass = h.newPass()
  await h.pass.recover('nested')
  assert.deepEqual(outcomes(await h.pass.restoreHolds('nested')), { 'a.example.com': 'held' })
  assert.notEqual(h.fence.fenced('a.example.com'), undefined)

  // The operator puts the files back in place; the next run moves it.
  fs.unlinkSync(rt.dir)
  fs.renameSync(real, rt.dir)
  assert.deepEqual(outcomes(await h.converge('nested')), { 'a.example.com': 'moved' })
  assert.equal(h.fence.fenced('a.example.com'), undefined)
  assert.equal(h.pass.held('a.example.com'), undefined)
  assert.deepEqual(layoutFiles(h.dirs.dataDir), [])
  assert.equal(hashTree(nestedPaths(h.dirs, 'a.example.com').dir), sum)
})

void test('a file with a second name holds the host; removing the link clears it', async (t) => {
  const h = await harness(t)
  const rt = h.addFlat('a.example.com')
  const outside = path.join(h.dirs.dataDir, 'neighbour-file')
  fs.linkSync(path.join(rt.dir, 'sub', 'dir', 'deep', 'blob.bin'), outside)
  const [r] = await h.converge('nested')
  assert.equal(r?.outcome, 'held')
  assert.equal(r?.reason, 'a file of its has a second name: sub/dir/deep/blob.bin has 2 links')
  assert.ok(fs.existsSync(rt.dir))
  fs.unlinkSync(outside)
  assert.deepEqual(outcomes(await h.converge('nested')), { 'a.example.com': 'moved' })
})

void test('a tree deeper than PATH_MAX holds the host with path_too_long, not a preflight failure on every retry', async (t) => {
  const h = await harness(t)
  const rt = h.addFlat('a.example.com')
  deepTree(path.join(rt.dir, 'sub'))
  try {
    const [r] = await h.converge('nested')
    assert.equal(r?.outcome, 'held', JSON.stringify(r))
    assert.equal(r?.code, 'path_too_long')
    assert.match(
      r?.reason ?? '',
      /^its tree is deeper than a path can name \(ENAMETOOLONG\): sub\/d+… is a path of \d{4} bytes$/,
    )
    assert.equal(h.pass.held('a.example.com')?.code, 'path_too_long')
    assert.ok(fs.existsSync(path.join(h.dirs.dataDir, 'layout', 'a.example.com.hold')), 'a hold marker')
    assert.ok(fs.existsSync(rt.dir), 'nothing moved')
  } finally {
    // rm(1) descends by relative names too; a path-based removal would meet ENAMETOOLONG itself.
    execFileSync('rm', ['-rf', path.join(rt.dir, 'sub')])
  }
  assert.deepEqual(outcomes(await h.converge('nested')), { 'a.example.com': 'moved' })
})

void test('a held host is released when the intent turns flat', async (t) => {
  const h = await harness(t)
  const rt = h.addFlat('a.example.com')
  fs.linkSync(path.join(rt.dir, 'empty'), path.join(h.dirs.dataDir, 'x'))
  await h.converge('nested')
  assert.ok(h.pass.held('a.example.com'))
  const [r] = await h.converge('flat')
  assert.equal(r?.outcome, 'released')
  assert.equal(h.fence.fenced('a.example.com'), undefined)
  assert.deepEqual(layoutFiles(h.dirs.dataDir), [])
})

void test('what is at the destination is set aside, noted, and the move goes on', async (t) => {
  const h = await harness(t)
  const rt = h.addFlat('a.example.com')
  const sum = hashTree(rt.dir)
  const dest = nestedPaths(h.dirs, 'a.example.com')
  fs.mkdirSync(dest.dir, { recursive: true })
  fs.writeFileSync(path.join(dest.dir, 'planted'), 'not the tenant’s')
  fs.mkdirSync(path.dirname(dest.socket), { recursive: true })
  fs.writeFileSync(dest.socket, 'a regular file where the socket goes')

  assert.deepEqual(outcomes(await h.converge('nested')), { 'a.example.com': 'moved' })
  assert.equal(hashTree(dest.dir), sum, 'only the tenant’s files at the destination')
  assert.equal(fs.existsSync(dest.socket), false)
  const asideHost = path.join(h.dirs.dataDir, 'layout', 'aside', 'a.example.com')
  const [stamp] = fs.readdirSync(asideHost)
  assert.match(stamp ?? '', /^20261130T080000\.000Z$/)
  const asideDir = path.join(asideHost, stamp ?? '')
  assert.deepEqual(fs.readdirSync(asideDir).sort(), ['app.sock', 'data'])
  assert.equal(fs.readFileSync(path.join(asideDir, 'data', 'planted'), 'utf8'), 'not the tenant’s')
  const note = h.pass.note('a.example.com')
  assert.equal(note, `set aside at 2026-11-30T08:00:00.000Z: app.sock, data (in ${asideDir})`)
  assert.ok(h.logger.lines.some((l) => l.level === 'warn' && l.msg.includes('set aside')))

  // A new Pass learns the note from aside/ at recovery.
  const again = h.newPass()
  await again.recover('nested')
  assert.equal(again.note('a.example.com'), note)
})

void test('nested is refused before anything is stopped when the gate says no', async (t) => {
  const h = await harness(t)
  h.addFlat('a.example.com')
  h.claims.awake.add('a.example.com')
  h.gate.why = 'probe: not yet run'
  const res = await h.converge('nested', { deferAwake: false })
  assert.deepEqual(res, [
    {
      host: 'a.example.com',
      outcome: 'refused',
      code: 'gate_shut',
      reason: 'isolation not ready: probe: not yet run',
      to: 'nested',
    },
  ])
  assert.deepEqual(h.claims.stops, [])
  assert.equal(h.fence.fenced('a.example.com'), undefined)
  assert.deepEqual(h.steps, [])
  // The gate does not stand in the way of a revert.
  h.addNested('b.example.com')
  assert.deepEqual(outcomes(await h.converge('flat')), { 'a.example.com': 'unchanged', 'b.example.com': 'moved' })
})

void test('a nested socket path over 107 bytes is refused before the host is stopped', async (t) => {
  const h = await harness(t)
  const long = `${'a'.repeat(60)}.${'b'.repeat(60)}.example.com`
  h.addFlat(long)
  h.claims.awake.add(long)
  const [r] = await h.converge('nested', { deferAwake: false })
  assert.equal(r?.outcome, 'refused')
  assert.match(r?.reason ?? '', /^nested socket path .*app\.sock is \d+ bytes, over 107: it could not be bound$/)
  assert.equal(r?.code, 'socket_too_long')
  assert.deepEqual(h.claims.stops, [])
  assert.equal(h.fence.fenced(long), undefined)
})

void test('an awake host is deferred with its grace, which survives a restart, then stopped', async (t) => {
  const h = await harness(t)
  h.addFlat('a.example.com')
  h.addFlat('b.example.com', 2)
  h.claims.awake.add('a.example.com')

  let res = await h.converge('nested')
  assert.deepEqual(
    res.map((r) => [r.host, r.outcome, r.reason]),
    [
      ['a.example.com', 'deferred', 'awake: 60m of grace left'],
      ['b.example.com', 'moved', ''],
    ],
  )
  assert.equal(h.fence.fenced('a.example.com'), undefined, 'a deferred host is not fenced')
  h.clock.advance(18 * 60_000)
  res = await h.converge('nested')
  assert.equal(res[0]?.reason, 'awake: 42m of grace left')

  // A new Pass reads grace.json: the hour does not start again.
  h.pass = h.newPass()
  await h.pass.recover('nested')
  res = await h.converge('nested')
  assert.equal(res[0]?.reason, 'awake: 42m of grace left')
  assert.deepEqual(h.claims.stops, [])

  h.clock.advance(GRACE_MS)
  res = await h.converge('nested')
  assert.deepEqual(outcomes(res), { 'a.example.com': 'moved', 'b.example.com': 'unchanged' })
  assert.deepEqual(h.claims.stops, ['a.example.com'])
  const book = JSON.parse(fs.readFileSync(path.join(h.dirs.dataDir, 'layout', GRACE_FILE), 'utf8')) as { hosts: object }
  assert.deepEqual(book.hosts, {}, 'the entry ends when the host reaches the mode')
})

void test('a grace entry ends when the intent changes mode', async (t) => {
  const h = await harness(t)
  h.addFlat('a.example.com')
  h.addNested('b.example.com')
  h.claims.awake.add('a.example.com')
  h.claims.awake.add('b.example.com')
  await h.converge('nested')
  h.clock.advance(30 * 60_000)
  let res = await h.converge('flat')
  assert.equal(res.find((r) => r.host === 'b.example.com')?.reason, 'awake: 60m of grace left')
  res = await h.converge('nested')
  assert.equal(
    res.find((r) => r.host === 'a.example.com')?.reason,
    'awake: 60m of grace left',
    'a fresh hour after the mode changed',
  )
})

void test('a forced intent stops an awake host at once', async (t) => {
  const h = await harness(t)
  const rt = h.addFlat('a.example.com')
  const sum = hashTree(rt.dir)
  h.claims.awake.add('a.example.com')
  assert.deepEqual(outcomes(await h.converge('nested', { deferAwake: false })), { 'a.example.com': 'moved' })
  assert.deepEqual(h.claims.stops, ['a.example.com'])
  assert.equal(hashTree(nestedPaths(h.dirs, 'a.example.com').dir), sum)
  assert.ok(h.steps.indexOf('after-stop') > h.steps.indexOf('after-fence'))
})

void test('a stop that times out fails the host, lifts its fence, and moves nothing', async (t) => {
  const h = await harness(t)
  const rt = h.addFlat('a.example.com')
  h.claims.awake.add('a.example.com')
  h.claims.behaviour = 'hang'
  const asked = h.claims.stopAsked()
  const run = h.converge('nested', { deferAwake: false })
  await asked
  assert.notEqual(h.fence.fenced('a.example.com'), undefined, 'fenced while it is being stopped')
  assert.equal(h.pass.classify(rt, h.reg.list()).layout, 'fenced')
  h.clock.advance(59_999)
  assert.equal(h.clock.pending(), 1, 'still waiting just before 60 s')
  h.clock.advance(1)
  const [r] = await run
  assert.equal(r?.outcome, 'failed')
  assert.match(r?.reason ?? '', /^stop timed out: still awake after 60s/)
  assert.equal(r?.code, 'stop_timeout')
  assert.equal(h.fence.fenced('a.example.com'), undefined)
  assert.ok(isFlat(h.dirs, h.reg.get('a.example.com') ?? rt))
  assert.ok(fs.existsSync(rt.dir))
  assert.deepEqual(layoutFiles(h.dirs.dataDir), [])
})

void test('the pass says what it waits on while an awake host is stopped, and stops saying it after', async (t) => {
  const waits: Array<string | null> = []
  const h = await harness(t, { onWait: (what) => waits.push(what) })
  h.addFlat('a.example.com')
  h.claims.awake.add('a.example.com')
  h.claims.behaviour = 'hang'
  const asked = h.claims.stopAsked()
  const run = h.converge('nested', { deferAwake: false })
  await asked
  assert.deepEqual(waits, ['the activator to stop a.example.com (awake, force)'])
  h.clock.advance(60_000)
  await run
  assert.deepEqual(waits, ['the activator to stop a.example.com (awake, force)', null])
  // With nobody to ask, it says it waits for the release.
  Object.assign(h.claims, { canAskStop: () => false })
  h.claims.behaviour = 'release'
  h.claims.awake.add('a.example.com')
  waits.length = 0
  await h.converge('nested', { deferAwake: false })
  assert.deepEqual(waits, [
    'a.example.com to be released (no CARLOS_ACTIVATOR_URL to ask for a stop) (awake, force)',
    null,
  ])
})

void test('conflict, foreign and external rows are never moved', async (t) => {
  const h = await harness(t)
  const a = h.addFlat('a.example.com')
  h.reg.add({
    host: 'b.example.com',
    kind: 'instance',
    hibernate: true,
    dir: path.join(a.dir, 'sub'),
    socket: '/tmp/b.sock',
    db: '',
  })
  h.reg.add({ host: 'c.example.com', kind: 'instance', hibernate: true, dir: '/srv/c', socket: '/srv/c.sock', db: '' })
  h.reg.add({ host: 'd.example.com', kind: 'instance', hibernate: false, ...flatPaths(h.dirs, 'd.example.com') })
  h.reg.add({ host: 'e.example.com', kind: 'sidecar', hibernate: true, ...flatPaths(h.dirs, 'e.example.com') })
  const res = await h.converge('nested')
  assert.deepEqual(
    res.map((r) => [r.host, r.outcome]),
    [
      ['a.example.com', 'refused'],
      ['b.example.com', 'refused'],
      ['c.example.com', 'refused'],
    ],
  )
  assert.match(res[0]?.reason ?? '', /^conflict: dir .* contains b\.example\.com's dir/)
  assert.equal(res[0]?.code, 'dir_claimed')
  assert.match(res[2]?.reason ?? '', /^foreign: paths are neither/)
  assert.equal(res[2]?.code, 'unknown_shape')
  assert.ok(fs.existsSync(a.dir))
  assert.deepEqual(h.steps, [])
})

void test('the claims index is built in slices, and a classify meanwhile finishes it and answers as after', async (t) => {
  const h = await harness(t)
  const a = { host: 'a.example.com', kind: 'instance', hibernate: true, ...flatPaths(h.dirs, 'a.example.com') } as const
  h.reg.add(a)
  for (let i = 0; i < 300; i++)
    h.reg.add({ host: host(i), kind: 'instance', hibernate: true, ...flatPaths(h.dirs, host(i)) })
  // Listed after every other row, so the first slices do not index it.
  h.reg.add({
    host: 'z.example.com',
    kind: 'static',
    hibernate: false,
    dir: path.join(a.dir, 'sub'),
    socket: '',
    db: '',
  })
  const routes = h.reg.snapshot().routes
  const row = routes.find((r) => r.host === 'a.example.com')
  assert.ok(row)
  const warming = h.pass.warmClaims()
  const during = h.pass.classify(row, routes)
  assert.equal(during.layout, 'conflict')
  assert.match(during.reason, /contains z\.example\.com's dir/)
  await warming
  assert.deepEqual(h.pass.classify(row, routes), during)
  assert.equal(h.pass.classify(routes.find((r) => r.host === host(7)) ?? row, routes).layout, 'flat')
})

void test('a destination another row claims is refused', async (t) => {
  const h = await harness(t)
  h.addFlat('a.example.com')
  h.reg.add({
    host: 'z.example.com',
    kind: 'static',
    hibernate: false,
    dir: nestedPaths(h.dirs, 'a.example.com').dir,
    socket: '',
    db: '',
  })
  const [r] = await h.converge('nested')
  assert.equal(r?.outcome, 'refused')
  assert.match(r?.reason ?? '', /^destination taken: dir .* contains z\.example\.com's dir/)
  assert.equal(r?.code, 'dest_taken')
})

void test('a run cancelled while a batch is journaled starts no batch after it, and finishes the one under way', async (t) => {
  const h = await harness(t, { batchSize: 1 })
  h.addFlat('a.example.com')
  h.addFlat('b.example.com')
  const ac = new AbortController()
  // The next batch starts once this one is walked (design §3.3): cancelled before, it never starts.
  h.pass = h.newPass({ failpoint: (s) => s === 'after-journal' && ac.abort() })
  const res = await h.converge('nested', { signal: ac.signal })
  assert.deepEqual(outcomes(res), { 'a.example.com': 'moved' })
  assert.ok(isFlat(h.dirs, h.reg.get('b.example.com') ?? ({} as never)))
})

void test('a registry that refuses the rows puts the files back', async (t) => {
  const h = await harness(t)
  const rt = h.addFlat('a.example.com')
  const sum = hashTree(rt.dir)
  const reg = h.reg
  const failing = new Proxy(reg, {
    get(target, prop, recv) {
      if (prop === 'setPaths')
        return () => {
          throw new Error('disk I/O error')
        }
      const v: unknown = Reflect.get(target, prop, recv)
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v
    },
  })
  const pass = new Pass({ ...passDepsOf(h), registry: failing })
  const [r] = await pass.converge('nested', { deferAwake: true, signal: new AbortController().signal })
  assert.equal(r?.outcome, 'failed')
  assert.match(r?.reason ?? '', /registry not updated: disk I\/O error; the files were moved back/)
  assert.equal(r?.code, 'registry_not_updated')
  assert.equal(hashTree(rt.dir), sum)
  assert.equal(h.fence.fenced('a.example.com'), undefined)
  assert.deepEqual(layoutFiles(h.dirs.dataDir), [])
})

function passDepsOf(h: Awaited<ReturnType<typeof harness>>) {
  return {
    dirs: h.dirs,
    registry: h.reg,
    fence: h.fence,
    claims: h.claims,
    gate: h.gate,
    logger: h.logger,
    clock: h.clock,
    graceMs: GRACE_MS,
    socketsGid: () => Promise.resolve(-1),
  }
}

void test('two batches at a time: the next starts once this one is walked, and a third waits for the first to end', async (t) => {
  const h = await harness(t)
  for (const host of ['a.example.com', 'b.example.com', 'c.example.com']) h.addFlat(host)
  const steps: string[] = []
  h.pass = h.newPass({ batchSize: 1, failpoint: (s) => steps.push(s) })
  const res = await h.converge('nested')
  assert.deepEqual(outcomes(res), { 'a.example.com': 'moved', 'b.example.com': 'moved', 'c.example.com': 'moved' })
  /** Where the nth (from 1) of a step was reached. */
  const nth = (step: string, n: number): number => {
    const at = steps.flatMap((s, i) => (s === step ? [i] : []))[n - 1]
    assert.ok(at !== undefined, `${step} reached ${n} times: ${steps.join(' ')}`)
    return at
  }
  assert.ok(nth('after-fence', 2) > nth('after-preflight', 1), 'the second batch starts once the first is walked')
  assert.ok(nth('after-fence', 2) < nth('after-lift', 1), 'and before the first has ended')
  assert.ok(nth('after-fence', 3) > nth('after-lift', 1), 'the third waits for the first to end')
  assert.ok(nth('after-fence', 3) > nth('after-preflight', 2), 'and for the second to be walked')
  assert.deepEqual(layoutFiles(h.dirs.dataDir), [])
})

/**
 * A hold around the pass's own I/O port: it says when each walk starts and
 * ends, and lets none reach the port until `go` is called.
 */
function heldWalker(events: string[]): { aroundIo: (io: PassIo) => PassIo; go: () => void } {
  let go = (): void => {}
  const going = new Promise<void>((resolve) => (go = resolve))
  return {
    go: () => go(),
    aroundIo: (io) => ({
      ...io,
      async walk(sources) {
        events.push('walk-start')
        await going
        const found = await io.walk(sources)
        events.push('walk-end')
        return found
      },
    }),
  }
}

void test('a batch is walked while its journal is written, and what the walk found is used once the journal landed', async (t) => {
  const h = await harness(t)
  for (const host of ['a.example.com', 'b.example.com']) h.addFlat(host)
  const events: string[] = []
  const preflight = heldWalker(events)
  h.pass = h.newPass({
    aroundIo: preflight.aroundIo,
    failpoint: (s) => {
      events.push(s)
      if (s === 'after-journal') preflight.go()
    },
  })
  const res = await h.converge('nested')
  assert.deepEqual(outcomes(res), { 'a.example.com': 'moved', 'b.example.com': 'moved' })
  const at = (e: string): number => events.indexOf(e)
  assert.ok(
    at('walk-start') < at('after-journal'),
    `the walk starts before the journal is on disk: ${events.join(' ')}`,
  )
  assert.ok(
    at('after-journal') < at('after-preflight') && at('walk-end') < at('after-preflight'),
    'what it found is acted on after both',
  )
})

void test('a journal that cannot be written fails its batch only once the walk of the batch is over', async (t) => {
  const h = await harness(t)
  for (const host of ['a.example.com', 'b.example.com']) h.addFlat(host)
  const events: string[] = []
  const preflight = heldWalker(events)
  const layout = path.join(h.dirs.dataDir, 'layout')
  let generation = 0
  h.pass = h.newPass({
    aroundIo: preflight.aroundIo,
    failpoint: (s) => {
      events.push(s)
      // A symlink where the batch's journal is about to be written: it is never opened through one.
      if (s === 'after-fence') generation = h.fence.fenced('a.example.com') ?? 0
      if (s !== 'after-aside') return
      fs.mkdirSync(layout, { recursive: true })
      fs.symlinkSync('/nowhere', path.join(layout, tmpName(batchJournalName(generation))))
    },
  })
  setTimeout(() => preflight.go(), 50)
  const res = await h.converge('nested')
  assert.deepEqual(outcomes(res), { 'a.example.com': 'failed', 'b.example.com': 'failed' })
  assert.match(res[0]?.reason ?? '', /journal not written/)
  assert.equal(res[0]?.code, 'journal_not_written')
  assert.ok(events.includes('walk-end'), `no walk outlives its batch: ${events.join(' ')}`)
  assert.ok(!events.includes('after-journal'))
  for (const host of ['a.example.com', 'b.example.com']) {
    assert.ok(isFlat(h.dirs, h.reg.get(host)!), 'the row is where it was')
    assert.equal(h.fence.fenced(host), undefined, 'and the host may wake')
  }
})

void test('a gate that shuts during a run refuses the hosts not yet stopped', async (t) => {
  const h = await harness(t)
  h.addFlat('a.example.com')
  h.addFlat('b.example.com')
  // Shut while a's batch is journaled, before b's batch starts (once a's is walked): a goes on, b is refused.
  h.pass = h.newPass({ batchSize: 1, failpoint: (s) => s === 'after-journal' && (h.gate.why = 'probe: ready: false') })
  const res = await h.converge('nested')
  assert.deepEqual(
    res.map((r) => [r.host, r.outcome, r.reason]),
    [
      ['a.example.com', 'moved', ''],
      ['b.example.com', 'refused', 'isolation not ready: probe: ready: false'],
    ],
  )
  assert.equal(h.fence.fenced('b.example.com'), undefined)
})

void test('a row removed while its host moved fails that host alone', async (t) => {
  const h = await harness(t)
  const a = h.addFlat('a.example.com')
  h.addFlat('b.example.com', 2)
  const sum = hashTree(a.dir)
  h.pass = h.newPass({ failpoint: (s) => s === 'after-rename' && h.reg.remove('a.example.com') })
  const res = await h.converge('nested')
  assert.deepEqual(outcomes(res), { 'b.example.com': 'moved', 'a.example.com': 'failed' })
  assert.match(
    res.find((r) => r.host === 'a.example.com')?.reason ?? '',
    /^registry not updated: .*not in the registry.*; the files were moved back$/,
  )
  assert.equal(hashTree(a.dir), sum, 'its files are back where they were')
  assert.ok(isNested(h.dirs, h.reg.get('b.example.com') ?? ({} as never)))
  assert.deepEqual(layoutFiles(h.dirs.dataDir), [])
})

void test('a row whose files are missing is not moved, and nothing is set aside for it', async (t) => {
  const h = await harness(t)
  const rt = h.addFlat('a.example.com')
  const dest = nestedPaths(h.dirs, 'a.example.com').dir
  fs.mkdirSync(path.dirname(dest), { recursive: true })
  fs.renameSync(rt.dir, dest)
  const [r] = await h.converge('nested')
  assert.equal(r?.outcome, 'failed')
  assert.equal(r?.reason, `files missing: ${rt.dir} does not exist (${dest} does; an operator decides)`)
  assert.ok(fs.existsSync(dest), 'left where it is')
  assert.equal(h.pass.note('a.example.com'), '')
  assert.equal(h.fence.fenced('a.example.com'), undefined)
  assert.deepEqual(
    h.steps.filter((s) => s === 'after-journal'),
    [],
  )
})

void test('file names that are not UTF-8 move to nested and back, every byte identical', async (t) => {
  const h = await harness(t)
  const rt = h.addFlat('a.example.com')
  addByteNamedEntries(rt.dir)
  const before = hashTree(rt.dir)
  assert.deepEqual(outcomes(await h.converge('nested')), { 'a.example.com': 'moved' })
  assert.equal(hashTree(nestedPaths(h.dirs, 'a.example.com').dir), before)
  assert.deepEqual(outcomes(await h.converge('flat')), { 'a.example.com': 'moved' })
  assert.equal(hashTree(flatPaths(h.dirs, 'a.example.com').dir), before)
  assert.deepEqual(layoutFiles(h.dirs.dataDir), [])
})

void test('a directory swapped after preflight is moved back, not committed, and held with the swap as its reason', async (t) => {
  const outside = await tmpDir(t, 'layoutd-outside-')
  const victim = path.join(outside, 'victim')
  fs.mkdirSync(victim)
  fs.writeFileSync(path.join(victim, 'secret'), "not the tenant's")
  const outsideBefore = hashTree(outside)
  const swaps: Record<string, (dir: string) => void> = {
    // The tenant's directory becomes a symlink to a directory outside the data root.
    'link.example.com': (dir) => {
      fs.renameSync(dir, `${dir}.moved-away`)
      fs.symlinkSync(victim, dir)
    },
    // Or another directory altogether, one preflight never saw.
    'other.example.com': (dir) => {
      fs.renameSync(dir, `${dir}.moved-away`)
      fs.mkdirSync(dir)
      fs.writeFileSync(path.join(dir, 'f'), 'unchecked')
    },
  }
  const h = await harness(t, {
    failpoint: (step) => {
      if (step !== 'after-preflight') return
      for (const [host, swap] of Object.entries(swaps)) swap(flatPaths(h.dirs, host).dir)
    },
  })
  for (const host of Object.keys(swaps)) h.addFlat(host)
  const results = await h.converge('nested')
  assert.deepEqual(outcomes(results), { 'link.example.com': 'held', 'other.example.com': 'held' })
  for (const host of Object.keys(swaps)) {
    const result = results.find((r) => r.host === host)
    const reason = result?.reason ?? ''
    assert.equal(result?.code, 'source_swapped', reason)
    assert.match(reason, /swapped after preflight/, reason)
    const row = h.reg.get(host)
    assert.ok(row && isFlat(h.dirs, row), `${host}: the row still says flat`)
    assert.equal(fs.existsSync(nestedPaths(h.dirs, host).dir), false, `${host}: nothing left at the nested path`)
    assert.ok(fs.lstatSync(flatPaths(h.dirs, host).dir), `${host}: what was renamed is back where it was`)
    assert.deepEqual(h.pass.held(host), { code: 'source_swapped', reason }, `${host}: held with the swap as the reason`)
    assert.ok(h.fence.fenced(host) !== undefined, `${host}: stays fenced`)
  }
  assert.ok(fs.lstatSync(flatPaths(h.dirs, 'link.example.com').dir).isSymbolicLink())
  assert.deepEqual(
    layoutFiles(h.dirs.dataDir),
    ['link.example.com.hold', 'other.example.com.hold'],
    'held, no journal left',
  )
  assert.equal(hashTree(outside), outsideBefore, 'nothing outside the data root changed')
})

void test('classify follows a changed list of rows: a conflict that appears, and goes, reads as a fresh index would', async (t) => {
  const h = await harness(t)
  const a = h.addFlat(host(1), 1)
  h.addFlat(host(2), 2)
  const rows = h.reg.list()
  assert.equal(h.pass.classify(a, rows).layout, 'flat')
  // Another row comes to claim a's directory: the next list has it.
  const inside = {
    host: host(3),
    kind: 'instance' as const,
    hibernate: true,
    socket: path.join(h.dirs.dataDir, 'x.sock'),
    dir: path.join(a.dir, 'inner'),
    db: '',
  }
  const withIntruder = [...rows, inside]
  assert.equal(h.pass.classify(a, withIntruder).layout, 'conflict')
  assert.equal(
    h.pass.classify(a, withIntruder).reason,
    h.newPass().classify(a, withIntruder).reason,
    'the same reason as an index built afresh',
  )
  // The intruder moves away, then is gone: a is flat again.
  const moved = [...rows, { ...inside, dir: path.join(h.dirs.dataDir, 'elsewhere') }]
  assert.equal(h.pass.classify(a, moved).layout, 'flat')
  assert.equal(h.pass.classify(a, [...rows, inside]).layout, 'conflict')
  assert.equal(h.pass.classify(a, rows).layout, 'flat')
})

void test('a plan classifies against the path claims the wakes follow: built once, then followed, never built again', async (t) => {
  const h = await harness(t, { batchSize: 4 })
  const hosts = Array.from({ length: 6 }, (_, i) => host(i))
  const flat = hosts.map((x, i) => h.addFlat(x, i + 1))
  // Every row put into an index of path claims, by whichever index (the method itself still runs).
  const add = t.mock.method(PathClaims.prototype, 'add')
  const added = (): string[] => add.mock.calls.map((call) => call.arguments[0].host)
  const all = (outcome: string) => Object.fromEntries(hosts.map((x) => [x, outcome]))

  // The first run after a start finds none: its plan builds them, once, and keeps them.
  assert.deepEqual(outcomes(await h.converge('nested')), all('moved'))
  assert.deepEqual(added().sort(), hosts)
  add.mock.resetCalls()
  // A wake follows the very claims the plan built over the rows the run rewrote.
  const first = h.reg.get(host(0))
  assert.ok(first)
  assert.equal(h.pass.classify(first, h.reg.snapshot().routes).layout, 'nested')
  // The next run plans against them too.
  assert.deepEqual(outcomes(await h.converge('flat')), all('moved'))
  assert.deepEqual(added(), [], 'no row put into a new index')

  // A row another connection adds inside a tenant's directory: followed into
  // the same claims, and the next plan meets it as a fresh index would.
  const other = Registry.open(h.dirs.dataDir)
  other.add({
    host: 'intruder.example.com',
    kind: 'instance',
    hibernate: true,
    ...flatPaths(h.dirs, 'intruder.example.com'),
    dir: path.join(flat[0]?.dir ?? '', 'inner'),
    db: '',
  })
  other.close()
  const res = await h.converge('nested')
  assert.deepEqual(added(), ['intruder.example.com'], 'only the new row is added')
  const refused = res.find((r) => r.host === host(0))
  assert.equal(refused?.outcome, 'refused')
  assert.equal(refused?.code, 'dir_claimed')
  assert.deepEqual(
    res.filter((r) => r.outcome === 'moved').map((r) => r.host),
    hosts.slice(1),
  )
})

/** Mounts a small tmpfs at dir (as root, as the suite is); the test's end unmounts it. */
function tmpfsAt(t: TestContext, dir: string, opts: string): void {
  fs.mkdirSync(dir, { recursive: true })
  execFileSync('mount', ['-t', 'tmpfs', '-o', opts, 'tmpfs', dir])
  t.after(() => execFileSync('umount', ['-l', dir]))
}

void test('a journal write that fails on a full disk (ENOSPC) leaves no temporary file behind', async (t) => {
  const h = await harness(t)
  h.addFlat('a.example.com')
  h.addFlat('b.example.com', 2)
  const layout = path.join(h.dirs.dataDir, 'layout')
  tmpfsAt(t, layout, 'size=64k')
  // Every block taken, inodes left: the journal's temporary file is made, and its write fails.
  try {
    fs.writeFileSync(path.join(layout, 'filler'), Buffer.alloc(1024 * 1024))
  } catch (err) {
    assert.equal((err as NodeJS.ErrnoException).code, 'ENOSPC')
  }
  const results = await h.converge('nested')
  assert.deepEqual(outcomes(results), { 'a.example.com': 'failed', 'b.example.com': 'failed' })
  assert.match(results[0]?.reason ?? '', /ENOSPC/)
  assert.deepEqual(
    fs.readdirSync(layout).filter((n) => n !== 'filler'),
    [],
    'no _batch-N.journal.tmp until the next start',
  )
  assert.ok(fs.existsSync(flatPaths(h.dirs, 'a.example.com').dir))
})

void test('a move to nested that fails on a full disk (ENOSPC making its directories) leaves no empty D/nested/<host>', async (t) => {
  const h = await harness(t)
  h.addFlat('a.example.com')
  h.addFlat('b.example.com', 2)
  const nested = path.join(h.dirs.dataDir, 'nested')
  // The root takes one inode; one more is left: one host's D/nested/<host> is made, and then its run/ is not.
  tmpfsAt(t, nested, 'size=1m,nr_inodes=2')
  const results = await h.converge('nested')
  assert.deepEqual(outcomes(results), { 'a.example.com': 'failed', 'b.example.com': 'failed' })
  assert.ok(
    results.every((r) => r.code === 'dest_not_prepared' && /ENOSPC/.test(r.reason)),
    JSON.stringify(results),
  )
  assert.deepEqual(fs.readdirSync(nested), [], 'no empty D/nested/<host>')
  assert.ok(fs.existsSync(flatPaths(h.dirs, 'a.example.com').dir))
  assert.ok(fs.existsSync(flatPaths(h.dirs, 'b.example.com').dir))
})

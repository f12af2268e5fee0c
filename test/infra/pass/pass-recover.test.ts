// design §4, row by row: each on-disk state is built by hand (journal,
// files, row) and recovery's action asserted from what is left on disk.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { test } from 'node:test'
import { FenceTable } from '../../../src/domain/fence.js'
import type { Mode } from '../../../src/domain/modes.js'
import { carryDb, flatPaths, isFlat, isNested, nestedPaths, pathsFor } from '../../../src/domain/paths.js'
import { FAILPOINT_STEPS } from '../../../src/infra/failpoint.js'
import { writeHolds } from '../../../src/infra/pass/holds.js'
import { writeJournals, type Journal } from '../../../src/infra/pass/journal.js'
import { hashTree } from '../../helpers/tenants.js'
import { harness, outcomes, type Harness } from './pass-harness.js'

const A = 'a.example.com'

function journalFor(h: Harness, host: string, to: Mode): Journal {
  const rt = h.reg.get(host)
  assert.ok(rt)
  const dest = pathsFor(h.dirs, host, to)
  return {
    v: 1,
    host,
    to,
    from: { dir: rt.dir, socket: rt.socket, db: rt.db },
    dest: { ...dest, db: carryDb(rt.db, rt.dir, dest.dir) },
    generation: 7,
    startedAt: '2026-11-30T07:59:00.000Z',
  }
}

function journalFile(h: Harness, host = A): string {
  return path.join(h.dirs.dataDir, 'layout', `${host}.journal`)
}

/** A flat host caught after its journal (step 4): files and row at from. */
async function midMove(h: Harness, to: Mode = 'nested'): Promise<{ j: Journal; sum: string }> {
  const rt = to === 'nested' ? h.addFlat(A) : h.addNested(A)
  const j = journalFor(h, A, to)
  await writeJournals(h.dirs, [j])
  return { j, sum: hashTree(rt.dir) }
}

function renameToDest(j: Journal): void {
  fs.mkdirSync(path.dirname(j.dest.dir), { recursive: true })
  fs.renameSync(j.from.dir, j.dest.dir)
}

void test('files at from, row at from: steps 5–9 are redone', async (t) => {
  const h = await harness(t)
  const { j, sum } = await midMove(h)
  const [r] = await h.pass.recover('nested')
  assert.deepEqual(r, {
    host: A,
    outcome: 'recovered',
    code: 'move_finished',
    reason: 'finished the move to nested',
    to: 'nested',
  })
  assert.ok(isNested(h.dirs, h.reg.get(A) ?? ({} as never)))
  assert.equal(hashTree(j.dest.dir), sum)
  assert.equal(fs.existsSync(journalFile(h)), false)
  assert.equal(h.fence.fenced(A), undefined)
})

void test('files at from, row at from, and the intent now wants from: rolled back', async (t) => {
  for (const [intent, optedOut] of [
    ['flat', false],
    ['none', true],
  ] as const) {
    await t.test(`under ${intent}${optedOut ? ' (default opted out)' : ''}`, async (t) => {
      const h = await harness(t)
      const { j, sum } = await midMove(h)
      const [r] = await h.pass.recover(intent, { defaultOptedOut: optedOut })
      assert.equal(r?.outcome, 'recovered')
      assert.match(r?.reason ?? '', /^rolled back to flat/)
      assert.equal(r?.code, 'rolled_back')
      assert.ok(isFlat(h.dirs, h.reg.get(A) ?? ({} as never)))
      assert.equal(hashTree(j.from.dir), sum)
      assert.equal(fs.existsSync(j.dest.dir), false)
      assert.equal(fs.existsSync(journalFile(h)), false)
      assert.equal(h.fence.fenced(A), undefined)
    })
  }
})

void test('under none with the nested default, a move to nested is finished, not rolled back', async (t) => {
  const h = await harness(t)
  await midMove(h)
  assert.deepEqual(outcomes(await h.pass.recover('none')), { [A]: 'recovered' })
  assert.ok(isNested(h.dirs, h.reg.get(A) ?? ({} as never)))
})

void test('files at dest, row at from: steps 8 and 9 are redone', async (t) => {
  const h = await harness(t)
  const { j, sum } = await midMove(h)
  renameToDest(j)
  // Even under flat: the table finishes this move; the next run reverts it.
  assert.deepEqual(outcomes(await h.pass.recover('flat')), { [A]: 'recovered' })
  assert.deepEqual({ ...h.reg.get(A) }, { host: A, kind: 'instance', hibernate: true, ...j.dest })
  assert.equal(hashTree(j.dest.dir), sum)
  assert.equal(fs.existsSync(journalFile(h)), false)
  assert.equal(h.fence.fenced(A), undefined)
})

void test('a symlink at dest is never committed to: kept fenced, nothing touched', async (t) => {
  const h = await harness(t)
  const { j } = await midMove(h)
  // A crash after the rename of a source swapped for a symlink, before the check that would have moved it back.
  const outside = path.join(h.dirs.dataDir, '..', `${path.basename(h.dirs.dataDir)}-outside`)
  fs.renameSync(j.from.dir, outside)
  t.after(() => fs.rmSync(outside, { recursive: true, force: true }))
  fs.mkdirSync(path.dirname(j.dest.dir), { recursive: true })
  fs.symlinkSync(outside, j.dest.dir)
  const [r] = await h.pass.recover('nested')
  assert.deepEqual(r, {
    host: A,
    outcome: 'held',
    code: 'dest_symlink',
    reason: `${j.dest.dir} is a symlink, not the directory the move renamed there; an operator decides`,
    to: 'nested',
  })
  assert.ok(isFlat(h.dirs, h.reg.get(A) ?? ({} as never)), 'the row still says from')
  assert.ok(fs.existsSync(journalFile(h)), 'the journal stays')
  assert.ok(h.fence.fenced(A) !== undefined)
})

void test('files at dest, row at dest: step 9 is redone', async (t) => {
  const h = await harness(t)
  const { j } = await midMove(h)
  renameToDest(j)
  h.reg.setPaths([{ host: A, ...j.dest }])
  const reloads: string[] = []
  h.pass = h.newPass({ reload: () => Promise.resolve(void reloads.push('reload')) })
  assert.deepEqual(outcomes(await h.pass.recover('nested')), { [A]: 'recovered' })
  assert.equal(fs.existsSync(journalFile(h)), false)
  assert.equal(h.fence.fenced(A), undefined)
  assert.deepEqual(reloads, ['reload'])
})

void test('files at both ends: ambiguous, kept fenced, nothing touched', async (t) => {
  const h = await harness(t)
  const { j, sum } = await midMove(h)
  fs.mkdirSync(j.dest.dir, { recursive: true })
  fs.writeFileSync(path.join(j.dest.dir, 'other'), 'x')
  const [r] = await h.pass.recover('nested')
  assert.equal(r?.outcome, 'held')
  assert.equal(r?.reason, `ambiguous: files at both ${j.from.dir} and ${j.dest.dir}; an operator decides which to keep`)
  assert.equal(h.fence.fenced(A), 7, 'fenced under the journal’s generation')
  assert.ok(fs.existsSync(journalFile(h)))
  assert.equal(hashTree(j.from.dir), sum)
  assert.deepEqual(fs.readdirSync(j.dest.dir), ['other'])
  const c = h.pass.classify(h.reg.get(A) ?? ({} as never), h.reg.list())
  assert.equal(r?.code, 'ambiguous')
  assert.deepEqual(c, { layout: 'fenced', code: 'ambiguous', reason: r?.reason })

  // The operator decides (removes the stray copy); the next run finishes the move.
  fs.rmSync(j.dest.dir, { recursive: true })
  assert.deepEqual(outcomes(await h.converge('nested')), { [A]: 'recovered' })
  assert.equal(hashTree(j.dest.dir), sum)
  assert.equal(h.fence.fenced(A), undefined)
})

void test('files at neither end: kept fenced, "files missing", nothing invented', async (t) => {
  const h = await harness(t)
  const { j } = await midMove(h)
  fs.rmSync(j.from.dir, { recursive: true })
  const [r] = await h.pass.recover('nested')
  assert.equal(r?.outcome, 'held')
  assert.match(r?.reason ?? '', /^files missing: neither /)
  assert.equal(r?.code, 'files_missing')
  assert.equal(fs.existsSync(j.dest.dir), false)
  assert.ok(isFlat(h.dirs, h.reg.get(A) ?? ({} as never)))
  assert.ok(h.fence.fenced(A) !== undefined)

  // An operator removing the journal is their decision: the host is
  // released, and the run then tries its move, which finds no files.
  fs.unlinkSync(journalFile(h))
  const [again] = await h.converge('nested')
  assert.equal(again?.outcome, 'failed')
  assert.equal(again?.reason, `files missing: ${j.from.dir} does not exist`)
  assert.equal(h.fence.fenced(A), undefined)
  assert.ok(isFlat(h.dirs, h.reg.get(A) ?? ({} as never)))
})

void test('any other state is kept fenced with a reason naming what was found', async (t) => {
  const cases: Array<[string, (h: Harness, j: Journal) => void, RegExp]> = [
    [
      'files at from, row at dest',
      (h, j) => h.reg.setPaths([{ host: A, ...j.dest }]),
      /^files are at .* but the row already says /,
    ],
    ['the row is gone', (h) => h.reg.remove(A), /^the row is gone from the registry/],
    [
      'the row points elsewhere',
      (h) => h.reg.setPaths([{ host: A, dir: '/srv/elsewhere', socket: '/srv/e.sock', db: '' }]),
      /^the row's paths are neither the journal's from/,
    ],
  ]
  for (const [name, arrange, want] of cases) {
    await t.test(name, async (t) => {
      const h = await harness(t)
      const { j, sum } = await midMove(h)
      arrange(h, j)
      const row = h.reg.get(A)
      const [r] = await h.pass.recover('nested')
      assert.equal(r?.outcome, 'held')
      assert.match(r?.reason ?? '', want)
      assert.ok(h.fence.fenced(A) !== undefined)
      assert.deepEqual(h.reg.get(A), row)
      assert.equal(hashTree(j.from.dir), sum)
      assert.ok(fs.existsSync(journalFile(h)))
    })
  }
})

void test('a corrupt journal keeps its host fenced and changes nothing', async (t) => {
  const bad: Array<[string, (j: Journal) => string, RegExp]> = [
    ['not JSON', () => '{"v":1, "host": "a.exa', /is not JSON/],
    ['wrong shape', (j) => JSON.stringify({ ...j, generation: 'x' }), /not a journal: \/generation/],
    ['another host', (j) => JSON.stringify({ ...j, host: 'b.example.com' }), /names host "b.example.com"/],
    [
      'paths outside the host’s shapes',
      (j) => JSON.stringify({ ...j, from: { ...j.from, dir: '/etc' } }),
      /from is not the flat paths/,
    ],
  ]
  for (const [name, body, want] of bad) {
    await t.test(name, async (t) => {
      const h = await harness(t)
      const { j, sum } = await midMove(h)
      fs.writeFileSync(journalFile(h), body(j))
      const row = h.reg.get(A)
      const [r] = await h.pass.recover('nested')
      assert.equal(r?.outcome, 'held')
      assert.match(r?.reason ?? '', want)
      assert.match(r?.reason ?? '', /the host stays fenced and nothing is changed$/)
      assert.equal(r?.code, 'journal_invalid')
      assert.ok(h.fence.fenced(A) !== undefined)
      assert.equal(fs.readFileSync(journalFile(h), 'utf8'), body(j))
      assert.deepEqual(h.reg.get(A), row)
      assert.equal(hashTree(j.from.dir), sum)
      assert.ok(h.logger.lines.some((l) => l.level === 'error' && l.msg.includes(A)))
      assert.equal(h.pass.classify(row ?? ({} as never), h.reg.list()).layout, 'fenced')
    })
  }
})

void test('unfinished temporary files are removed; files named for no valid host are reported', async (t) => {
  const h = await harness(t)
  const layout = path.join(h.dirs.dataDir, 'layout')
  fs.mkdirSync(layout)
  fs.writeFileSync(path.join(layout, `${A}.journal.tmp`), '{"v":1')
  fs.writeFileSync(path.join(layout, 'Not_A_Host.journal'), '{}')
  const res = await h.pass.recover('nested')
  assert.deepEqual(
    res.map((r) => [r.host, r.outcome]),
    [['', 'failed']],
  )
  assert.match(res[0]?.reason ?? '', /Not_A_Host\.journal: not named for a valid host; left alone$/)
  assert.equal(res[0]?.code, 'stray_file')
  assert.deepEqual(fs.readdirSync(layout), ['Not_A_Host.journal'])
})

void test('under unreadable, a completed revert is kept fenced as a hold', async (t) => {
  const h = await harness(t)
  const { j, sum } = await midMove(h, 'flat')
  renameToDest(j)
  h.reg.setPaths([{ host: A, ...j.dest }])
  const [r] = await h.pass.recover('unreadable')
  assert.equal(r?.outcome, 'held')
  assert.match(r?.reason ?? '', /^revert completed while the intent was unreadable/)
  assert.equal(r?.code, 'revert_unreadable')
  assert.ok(h.fence.fenced(A) !== undefined)
  assert.equal(fs.existsSync(journalFile(h)), false)
  const marker = JSON.parse(fs.readFileSync(path.join(h.dirs.dataDir, 'layout', `${A}.hold`), 'utf8')) as { to: string }
  assert.equal(marker.to, 'nested')
  assert.equal(hashTree(j.dest.dir), sum)

  // A restart under unreadable keeps it down; a recorded flat releases it.
  const again = h.newPass({ fence: new FenceTable() })
  await again.recover('unreadable')
  assert.deepEqual(outcomes(await again.restoreHolds('unreadable')), { [A]: 'held' })
  assert.deepEqual(outcomes(await again.restoreHolds('flat')), { [A]: 'released' })
  assert.equal(fs.existsSync(path.join(h.dirs.dataDir, 'layout', `${A}.hold`)), false)
})

void test('under unreadable, a revert caught mid-way is finished and then held', async (t) => {
  const h = await harness(t)
  const { j, sum } = await midMove(h, 'flat')
  assert.deepEqual(outcomes(await h.pass.recover('unreadable')), { [A]: 'held' })
  assert.ok(isFlat(h.dirs, h.reg.get(A) ?? ({} as never)))
  assert.equal(hashTree(j.dest.dir), sum)
  assert.equal(h.pass.held(A)?.code, 'revert_unreadable')
  assert.match(h.pass.held(A)?.reason ?? '', /^revert completed/)
  // Under nested the hold's move is retried, and goes.
  assert.deepEqual(outcomes(await h.converge('nested')), { [A]: 'moved' })
  assert.equal(h.pass.held(A), undefined)
  assert.equal(h.fence.fenced(A), undefined)
})

void test('a completed migration under unreadable is released: nested hosts wake only through the gate', async (t) => {
  const h = await harness(t)
  const { j } = await midMove(h)
  renameToDest(j)
  assert.deepEqual(outcomes(await h.pass.recover('unreadable')), { [A]: 'recovered' })
  assert.equal(h.fence.fenced(A), undefined)
})

void test('an awake host is stopped before recovery moves its files', async (t) => {
  const h = await harness(t)
  await midMove(h)
  h.claims.awake.add(A)
  assert.deepEqual(outcomes(await h.pass.recover('nested')), { [A]: 'recovered' })
  assert.deepEqual(h.claims.stops, [A])
})

void test('restoreHolds: which holds stand under which intent', async (t) => {
  const cases: Array<[string, boolean, 'held' | 'released']> = [
    ['nested', false, 'held'],
    ['unreadable', false, 'held'],
    ['none', false, 'held'],
    ['flat', false, 'released'],
    ['none', true, 'released'],
  ]
  for (const [intent, optedOut, want] of cases) {
    await t.test(`${intent}${optedOut ? ' (opted out)' : ''} -> ${want}`, async (t) => {
      const h = await harness(t)
      h.addFlat(A)
      await writeHolds(h.dirs, [
        { v: 1, host: A, to: 'nested', reason: 'a file of its has a second name: x has 2 links', heldAt: 'x' },
      ])
      await h.pass.recover(intent as 'nested')
      const [r] = await h.pass.restoreHolds(intent as 'nested', optedOut)
      assert.equal(r?.outcome, want)
      assert.equal(h.fence.fenced(A) !== undefined, want === 'held')
      assert.equal(fs.existsSync(path.join(h.dirs.dataDir, 'layout', `${A}.hold`)), want === 'held')
    })
  }
})

void test('a hold whose move has happened since is dropped', async (t) => {
  const h = await harness(t)
  h.addNested(A)
  await writeHolds(h.dirs, [{ v: 1, host: A, to: 'nested', reason: 'x', heldAt: 'x' }])
  await h.pass.recover('nested')
  const [r] = await h.pass.restoreHolds('nested')
  assert.equal(r?.outcome, 'released')
  assert.match(r?.reason ?? '', /its move to nested is done/)
  assert.equal(r?.code, 'hold_dropped')
})

// A crash at every step of a batch, simulated in process: the failpoint
// throws, the Pass and its fences are dropped (as a kill would), and a new
// Pass recovers from the files alone. Every host must end exactly: in one
// shape, row and files agreeing, tree intact, no journal, no fence.
for (const step of [
  ...FAILPOINT_STEPS.filter((s) => s !== 'after-stop' && s !== 'after-hold'),
  'after-rename:t1.example.com',
]) {
  for (const intent of ['nested', 'flat'] as const) {
    void test(`a crash ${step} of a move to nested, recovered under ${intent}, is exact`, async (t) => {
      const h = await harness(t)
      const hosts = ['t0.example.com', 't1.example.com', 't2.example.com']
      const sums = new Map(hosts.map((x, i) => [x, hashTree(h.addFlat(x, i + 3).dir)]))
      const crash = new Error(`crash ${step}`)
      let fired = false
      h.pass = h.newPass({
        failpoint: (s) => {
          if (s !== step) return
          fired = true
          throw crash
        },
      })
      await h.converge('nested').catch((err: unknown) => assert.equal(err, crash))
      // A step the pass never reaches would make this test pass on nothing.
      assert.ok(fired, `the failpoint ${step} fired`)

      const fence = new FenceTable()
      const pass = h.newPass({ fence, failpoint: () => {} })
      await pass.recover(intent)
      await pass.restoreHolds(intent)
      for (const x of hosts) {
        const rt = h.reg.get(x)
        assert.ok(rt)
        const shape = isNested(h.dirs, rt) ? 'nested' : isFlat(h.dirs, rt) ? 'flat' : 'neither'
        assert.notEqual(shape, 'neither', `${x}: row in one shape`)
        const other = shape === 'nested' ? flatPaths(h.dirs, x).dir : nestedPaths(h.dirs, x).dir
        assert.equal(hashTree(rt.dir), sums.get(x), `${x}: files where the row says, intact`)
        assert.equal(fs.existsSync(other), false, `${x}: nothing left at the other end`)
        assert.equal(fence.fenced(x), undefined, `${x}: not fenced`)
      }
      const layout = path.join(h.dirs.dataDir, 'layout')
      const left = fs.existsSync(layout)
        ? fs.readdirSync(layout).filter((n) => n.endsWith('.journal') || n.endsWith('.hold'))
        : []
      assert.deepEqual(left, [])
      // And the next run converges the rest.
      const next = await pass.converge(intent, { deferAwake: true, signal: new AbortController().signal })
      assert.ok(
        next.every((r) => r.outcome === 'moved' || r.outcome === 'unchanged'),
        JSON.stringify(next),
      )
      for (const x of hosts) assert.equal(hashTree(h.reg.get(x)?.dir ?? ''), sums.get(x))
    })
  }
}

void test('a crash between the hold marker and the journal removal holds the host again', async (t) => {
  const h = await harness(t)
  const rt = h.addFlat(A)
  fs.linkSync(path.join(rt.dir, 'index.html'), path.join(h.dirs.dataDir, 'other-name'))
  const crash = new Error('crash')
  h.pass = h.newPass({
    failpoint: (s) => {
      if (s === 'after-hold') throw crash
    },
  })
  await h.converge('nested')
  assert.ok(fs.existsSync(journalFile(h)) && fs.existsSync(path.join(h.dirs.dataDir, 'layout', `${A}.hold`)))
  const fence = new FenceTable()
  const pass = h.newPass({ fence, failpoint: () => {} })
  assert.deepEqual(outcomes(await pass.recover('nested')), { [A]: 'held' })
  assert.deepEqual(outcomes(await pass.restoreHolds('nested')), { [A]: 'held' })
  assert.equal(fs.existsSync(journalFile(h)), false)
  assert.ok(fence.fenced(A) !== undefined)
  assert.equal(pass.held(A)?.code, 'second_name')
  assert.match(pass.held(A)?.reason ?? '', /second name/)
})

void test('a bad move in a batch journal keeps its hosts fenced with a reason that names the file from the data root and the command that shows it', async (t) => {
  const h = await harness(t)
  h.addFlat(A)
  h.addFlat('b.example.com')
  const moves = [A, 'b.example.com'].map((host) => {
    const j = journalFor(h, host, 'nested')
    return { host: j.host, to: j.to, from: j.from, dest: j.dest }
  })
  const bad = { ...moves[1], from: { ...moves[1]?.from, dir: '/etc' } }
  const name = '_batch-7.journal'
  fs.mkdirSync(path.join(h.dirs.dataDir, 'layout'), { recursive: true })
  fs.writeFileSync(
    path.join(h.dirs.dataDir, 'layout', name),
    JSON.stringify({ v: 2, generation: 7, startedAt: '2026-12-03T10:00:00.000Z', moves: [moves[0], bad] }),
  )
  const results = await h.pass.recover('nested')
  assert.deepEqual(results.map((r) => [r.host, r.outcome, r.code]).sort(), [
    [A, 'held', 'journal_invalid'],
    ['b.example.com', 'held', 'journal_invalid'],
  ])
  for (const r of results) {
    assert.match(r.reason, /^batch journal layout\/_batch-7\.journal \(/)
    assert.match(r.reason, /its 2 hosts stay fenced and nothing is changed: `layoutd journal show _batch-7\.journal`$/)
  }
})

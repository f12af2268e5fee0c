// The pass state keeps `<data>/layout` and memory together: what it
// reports fenced is what is on disk, before and after each change, and
// when a change fails on disk, memory says what the disk says.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import path from 'node:path'
import { test, type TestContext } from 'node:test'
import { FenceTable } from '../../../src/domain/fence.js'
import { flatPaths, journalPath, nestedPaths, type Dirs } from '../../../src/domain/paths.js'
import { why } from '../../../src/domain/reason-codes.js'
import type { HoldMarker } from '../../../src/infra/pass/holds.js'
import type { Journal } from '../../../src/infra/pass/journal.js'
import { HOLD_AFTER_REVERT, PassState } from '../../../src/infra/pass/pass-state.js'
import { tmpDir } from '../../helpers/tmp.js'

const A = 'a.example.com'
const B = 'b.example.com'

async function setup(t: TestContext): Promise<{ dirs: Dirs; fence: FenceTable; state: PassState; layout: string }> {
  const dataDir = await tmpDir(t, 'layoutd-state-')
  const dirs: Dirs = { dataDir, runDir: path.join(dataDir, 'run') }
  const fence = new FenceTable()
  return { dirs, fence, state: new PassState(dirs, fence), layout: path.join(dataDir, 'layout') }
}

function journal(dirs: Dirs, host: string): Journal {
  return {
    v: 1,
    host,
    to: 'nested',
    from: flatPaths(dirs, host),
    dest: nestedPaths(dirs, host),
    generation: 7,
    startedAt: '2026-11-30T08:00:00.000Z',
  }
}

function marker(host: string, reason = 'a file of its has a second name', code = 'second_name'): HoldMarker {
  return { v: 1, host, to: 'nested', code, reason, heldAt: '2026-11-30T08:00:00.000Z' }
}

void test("a batch's journal names every host; a closed host's fence waits for the file, which goes once every host has ended", async (t) => {
  const { dirs, fence, state, layout } = await setup(t)
  assert.equal(state.fencedReason(A), undefined)
  await state.openJournals([journal(dirs, A), journal(dirs, B)])
  fence.fence([A, B], 7)
  assert.deepEqual(fs.readdirSync(layout), ['_batch-7.journal'], 'one file for the batch')
  const batch = JSON.parse(fs.readFileSync(path.join(layout, '_batch-7.journal'), 'utf8')) as {
    v: number
    moves: Array<{ host: string }>
  }
  assert.equal(batch.v, 2)
  assert.deepEqual(
    batch.moves.map((m) => m.host),
    [A, B],
  )
  assert.deepEqual(state.fencedReason(A), {
    code: 'in_flight',
    reason: `layout move to nested in flight; see ${journalPath(dirs, A)}`,
  })
  assert.ok(state.inFlight(A) && state.journaled(A) && state.named(A))

  await state.closeJournals([A])
  state.lift([A])
  assert.deepEqual(await state.settle(), [])
  assert.ok(fs.existsSync(path.join(layout, '_batch-7.journal')), 'B is still in flight: the file stays')
  assert.equal(state.journaled(A), false)
  assert.equal(state.fencedReason(A)?.code, 'fenced_for_move', 'a file still names A: its fence waits')
  assert.ok(state.inFlight(B), 'the other move is still open')

  await state.closeJournals([B])
  assert.deepEqual(await state.settle(), [])
  assert.deepEqual(fs.readdirSync(layout), [], 'every host ended: the file is gone')
  assert.equal(state.fencedReason(A), undefined, 'and the fence waiting for it is lifted')
  assert.equal(state.fencedReason(B)?.code, 'fenced_for_move', 'B was never lifted')
})

void test("a lone move's journal is its host's own", async (t) => {
  const { dirs, state, layout } = await setup(t)
  await state.openJournals([journal(dirs, A)])
  assert.deepEqual(fs.readdirSync(layout), ['a.example.com.journal'])
  await state.closeJournals([A])
  await state.settle()
  assert.deepEqual(fs.readdirSync(layout), [])
})

void test('a batch whose hosts partly end and partly stay: the kept hosts get journals of their own before the file goes', async (t) => {
  const { dirs, fence, state, layout } = await setup(t)
  const C = 'c.example.com'
  await state.openJournals([journal(dirs, A), journal(dirs, B), journal(dirs, C)])
  fence.fence([A, B, C], 7)
  await state.closeJournals([A])
  state.lift([A])
  state.keepJournal(B, why('ambiguous', 'ambiguous: files at both ends'))
  state.keepJournal(C, why('move_interrupted', 'move interrupted'))
  assert.deepEqual(await state.settle(), [])
  assert.deepEqual(fs.readdirSync(layout).sort(), ['b.example.com.journal', 'c.example.com.journal'])
  for (const h of [B, C])
    assert.deepEqual(
      JSON.parse(fs.readFileSync(journalPath(dirs, h), 'utf8')),
      journal(dirs, h),
      `${h}: its own journal names its move`,
    )
  assert.equal(state.fencedReason(A), undefined, "the finished host is no longer fenced by the others' journal")
  assert.equal(state.fencedReason(B)?.reason, 'ambiguous: files at both ends')
  assert.ok(state.named(B) && state.journaled(B))
})

void test('a journal that cannot be written is not reported in flight', async (t) => {
  const { dirs, state, layout } = await setup(t)
  fs.writeFileSync(layout, 'not a directory')
  await assert.rejects(state.openJournals([journal(dirs, A)]))
  assert.equal(state.inFlight(A), false)
  assert.equal(state.fencedReason(A), undefined)
})

void test('a journal that cannot be removed keeps its host fenced, as it stays on disk', async (t) => {
  const { dirs, fence, state } = await setup(t)
  await state.openJournals([journal(dirs, A)])
  fence.fence([A], 7)
  // A directory with something in it where the journal was: unlink(2) refuses it.
  fs.rmSync(journalPath(dirs, A))
  fs.mkdirSync(journalPath(dirs, A))
  fs.writeFileSync(path.join(journalPath(dirs, A), 'x'), '')
  await state.closeJournals([A])
  state.lift([A])
  const unsettled = await state.settle()
  assert.deepEqual(
    unsettled.map((u) => u.host),
    [A],
  )
  assert.ok(state.journaled(A) && !state.inFlight(A))
  assert.equal(state.fencedReason(A)?.code, 'journal_kept')
  assert.match(state.fencedReason(A)?.reason ?? '', /could not be removed/)
  assert.equal(fence.fenced(A), 7, 'the lift that waited for the file is not made')
  state.knowFile('a.example.com.journal', [A], [journal(dirs, A)])
  assert.equal(fence.fenced(A), 7, 'nor when recovery reads the file again')
})

void test('a kept journal is fenced with its reason until an operator removes it; a hold then still holds', async (t) => {
  const { dirs, fence, state } = await setup(t)
  await state.openJournals([journal(dirs, A), journal(dirs, B)])
  fence.fence([A, B], 7)
  state.keepJournal(A, why('ambiguous', 'ambiguous: files at both ends'))
  state.keepJournal(B, why('files_missing', 'files missing'))
  assert.equal(state.inFlight(A), false)
  assert.ok(state.journaled(A), 'a kept journal still governs its host')
  assert.equal(state.fencedReason(A)?.reason, 'ambiguous: files at both ends')
  assert.deepEqual(state.keptHosts().sort(), [A, B])

  await state.writeHolds([marker(B)])
  state.releaseKept(A)
  state.releaseKept(B)
  assert.equal(state.keptReason(A), undefined)
  assert.equal(fence.fenced(A), undefined, 'released: it wakes as its row says')
  assert.equal(state.fencedReason(A), undefined)
  assert.equal(fence.fenced(B), 7, 'its hold marker still holds it down')
  assert.deepEqual(state.fencedReason(B), {
    code: 'second_name',
    reason: 'held down after a refused move to nested: a file of its has a second name',
  })
})

void test('a journal taken up again by recovery is in flight, and no longer kept', async (t) => {
  const { dirs, state } = await setup(t)
  state.keepJournal(A, why('awake_unreleased', 'awake: its claim was not released'))
  state.resumeJournal(journal(dirs, A))
  assert.equal(state.keptReason(A), undefined)
  assert.ok(state.inFlight(A))
})

void test('a hold lives exactly as long as its marker, across a restart', async (t) => {
  const { dirs, fence, state, layout } = await setup(t)
  await state.writeHolds([marker(A), marker(B, HOLD_AFTER_REVERT, 'revert_unreadable')])
  assert.ok(fs.existsSync(path.join(layout, `${A}.hold`)))
  assert.equal(state.hold(A)?.reason, 'a file of its has a second name')
  assert.equal(
    state.fencedReason(A)?.reason,
    'held down after a refused move to nested: a file of its has a second name',
  )
  assert.equal(state.fencedReason(B)?.reason, `held down: ${HOLD_AFTER_REVERT}`)
  assert.deepEqual(
    [state.fencedReason(A)?.code, state.fencedReason(B)?.code],
    ['second_name', 'revert_unreadable'],
    'each hold carries its code',
  )

  // What a restart reads back.
  const again = new PassState(dirs, new FenceTable())
  await again.load([A, B])
  assert.deepEqual(
    again.holds().map((h) => h.host),
    [A, B],
  )
  assert.deepEqual(again.fencedReason(A), state.fencedReason(A), 'the code reads back with the reason')

  fence.fence([A, B], 9)
  await state.dropHolds([A])
  assert.equal(fs.existsSync(path.join(layout, `${A}.hold`)), false)
  assert.equal(state.hold(A), undefined)
  assert.equal(fence.fenced(A), 9, 'dropping a marker leaves the fence to the caller')
  assert.deepEqual(state.fencedReason(A), { code: 'fenced_for_move', reason: 'fenced for its move (generation 9)' })

  await state.releaseHolds([B])
  assert.equal(fs.existsSync(path.join(layout, `${B}.hold`)), false)
  assert.equal(state.hold(B), undefined)
  assert.equal(fence.fenced(B), undefined, 'released: it may wake')
  assert.equal(state.fencedReason(B), undefined)
})

void test('a marker that does not read back holds, with a reason naming the file', async (t) => {
  const { state, layout } = await setup(t)
  fs.mkdirSync(layout)
  fs.writeFileSync(path.join(layout, `${A}.hold`), '{not json')
  await state.load([A])
  assert.equal(state.hold(A)?.corrupt, true)
  assert.equal(state.fencedReason(A)?.code, 'hold_corrupt')
  assert.match(state.fencedReason(A)?.reason ?? '', /^hold marker .*a\.example\.com\.hold is not JSON/)
})

void test('a marker of an older agent, with no code or one this build does not know, holds as legacy_hold', async (t) => {
  const { state, layout } = await setup(t)
  fs.mkdirSync(layout)
  const old = {
    v: 1,
    host: A,
    to: 'nested',
    reason: 'a file of its has a second name',
    heldAt: '2026-11-30T08:00:00.000Z',
  }
  fs.writeFileSync(path.join(layout, `${A}.hold`), JSON.stringify(old))
  fs.writeFileSync(path.join(layout, `${B}.hold`), JSON.stringify({ ...old, host: B, code: 'from_the_future' }))
  await state.load([A, B])
  for (const h of [A, B]) {
    assert.equal(state.hold(h)?.corrupt, false, h)
    assert.deepEqual(state.fencedReason(h), {
      code: 'legacy_hold',
      reason: 'held down after a refused move to nested: a file of its has a second name',
    })
  }
})

void test('notes: an aside found on disk at load, and one set by a move', async (t) => {
  const { state, layout } = await setup(t)
  fs.mkdirSync(path.join(layout, 'aside', A, '20261130T080102.123Z'), { recursive: true })
  fs.writeFileSync(path.join(layout, 'aside', A, '20261130T080102.123Z', 'stray.txt'), '')
  await state.load([])
  assert.match(state.note(A) ?? '', /^set aside at 2026-11-30T08:01:02\.123Z: stray\.txt/)
  state.setNote(B, 'set aside at now: x')
  assert.equal(state.note(B), 'set aside at now: x')
  assert.equal(state.fencedReason(A), undefined, 'a note fences nothing')
})

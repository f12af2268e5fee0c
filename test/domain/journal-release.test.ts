// The rule of `layoutd journal release` (design §8): a move is released only
// when its files sit whole at exactly the end its row names and nothing is
// at the other (or the row is gone and no files are anywhere); every other
// state is refused with what was found and what to do first.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { releaseVerdict, type EndFound, type ReleaseFacts } from '../../src/domain/journal-release.js'
import type { MoveRecord } from '../../src/domain/pass-plan.js'
import { flatPaths, nestedPaths, type Dirs } from '../../src/domain/paths.js'

const dirs: Dirs = { dataDir: '/data', runDir: '/data/run' }
const H = 'a.example.com'
const move: MoveRecord = { host: H, to: 'nested', from: flatPaths(dirs, H), dest: nestedPaths(dirs, H) }
const DIR: EndFound = { kind: 'directory' }
const NONE: EndFound = { kind: 'absent' }

function facts(over: Partial<ReleaseFacts>): ReleaseFacts {
  return { atFrom: NONE, atDest: NONE, row: 'from', rowDir: move.from.dir, agentCode: undefined, ...over }
}

void test('files whole at the end the row names, nothing at the other: released', () => {
  assert.deepEqual(releaseVerdict(move, facts({ atFrom: DIR, row: 'from' })), {
    release: true,
    found: `its files are at ${move.from.dir}, as its row says; nothing is at ${move.dest.dir}`,
  })
  const atDest = releaseVerdict(move, facts({ atDest: DIR, row: 'dest', rowDir: move.dest.dir }))
  assert.equal(atDest.release, true)
  assert.match(atDest.found, /as its row says/)
  // A kept host the agent reports with its kept reason, or with none, is the operator's to release.
  assert.equal(releaseVerdict(move, facts({ atFrom: DIR, agentCode: 'ambiguous' })).release, true)
  assert.equal(releaseVerdict(move, facts({ atFrom: DIR, agentCode: '' })).release, true)
})

void test('the row gone and no files at either end: nothing to move, released', () => {
  const v = releaseVerdict(move, facts({ row: 'missing', rowDir: undefined }))
  assert.deepEqual(v, { release: true, found: 'no row, and no files at either end: nothing to move' })
})

void test('every other state is refused, naming what was found and what to do first', () => {
  const cases: Array<[string, Partial<ReleaseFacts>, RegExp, RegExp]> = [
    ['both ends', { atFrom: DIR, atDest: DIR }, /^files at both /, /keep the tenant's files at the end its row names/],
    ['neither end', {}, /^files at neither /, /find the tenant's files/],
    ['a symlink at dest', { atFrom: NONE, atDest: { kind: 'symlink' } }, /data is a symlink/, /real directory/],
    ['a symlink at from', { atFrom: { kind: 'symlink' } }, /a\.example\.com is a symlink/, /remove the link/],
    ['a file at from', { atFrom: { kind: 'other', what: 'a regular file' } }, /is a regular file$/, /remove it/],
    ['files at from, row at dest', { atFrom: DIR, row: 'dest' }, /but its row names \/data\/nested/, /move the files/],
    ['files at dest, row at from', { atDest: DIR, row: 'from' }, /but its row names \/data\/apps/, /converge --wait/],
    ['the row elsewhere', { atFrom: DIR, row: 'other', rowDir: '/srv/x' }, /row names \/srv\/x, neither/, /move/],
    ['the row gone, files at from', { atFrom: DIR, row: 'missing' }, /^the row is gone/, /routes add a\.example/],
    ['in flight', { atFrom: DIR, agentCode: 'in_flight' }, /reports in_flight/, /converge --wait/],
    ['recovery pending', { atFrom: DIR, agentCode: 'recovery_pending' }, /not judged yet/, /look again/],
  ]
  for (const [name, over, found, todo] of cases) {
    const v = releaseVerdict(move, facts(over))
    assert.equal(v.release, false, name)
    if (v.release) continue
    assert.match(v.found, found, name)
    assert.match(v.todo, todo, name)
  }
})

import assert from 'node:assert/strict'
import { test } from 'node:test'
import { classify, PathClaims } from '../../src/domain/classify.js'
import type { Mode } from '../../src/domain/modes.js'
import {
  awakeReason,
  holdStands,
  planRow,
  recordShapeError,
  recoveryAction,
  rowAt,
  wantedMode,
  type MoveRecord,
  type RecoveryFacts,
} from '../../src/domain/pass-plan.js'
import { flatPaths, nestedPaths, type Dirs } from '../../src/domain/paths.js'
import type { Route } from '../../src/domain/schemas.js'

const dirs: Dirs = { dataDir: '/data', runDir: '/data/run' }
const H = 'a.example.com'
const rec: MoveRecord = { host: H, to: 'nested', from: flatPaths(dirs, H), dest: nestedPaths(dirs, H) }

void test('the recovery table (DESIGN §4), row by row', () => {
  const cases: Array<[RecoveryFacts, Mode | undefined, string]> = [
    [{ fromExists: true, destExists: false, row: 'from' }, 'nested', 'redo-move'],
    [{ fromExists: true, destExists: false, row: 'from' }, undefined, 'redo-move'],
    [{ fromExists: true, destExists: false, row: 'from' }, 'flat', 'rollback'],
    [{ fromExists: false, destExists: true, row: 'from' }, 'nested', 'redo-row'],
    [{ fromExists: false, destExists: true, row: 'from' }, 'flat', 'redo-row'],
    [{ fromExists: false, destExists: true, row: 'dest' }, 'flat', 'redo-finish'],
    [{ fromExists: true, destExists: true, row: 'from' }, 'nested', 'keep:ambiguous: files at both /data/apps/a.example.com and /data/nested/a.example.com/data; an operator decides which to keep'],
    [{ fromExists: true, destExists: true, row: 'dest' }, 'nested', 'keep:ambiguous'],
    [{ fromExists: false, destExists: false, row: 'from' }, 'nested', 'keep:files missing: neither /data/apps/a.example.com nor /data/nested/a.example.com/data exists; nothing is invented'],
    [{ fromExists: false, destExists: false, row: 'dest' }, 'nested', 'keep:files missing'],
    [{ fromExists: true, destExists: false, row: 'dest' }, 'nested', 'keep:files are at /data/apps/a.example.com but the row already says /data/nested/a.example.com/data'],
    [{ fromExists: true, destExists: false, row: 'other' }, 'nested', "keep:the row's paths are neither"],
    [{ fromExists: false, destExists: true, row: 'missing' }, 'nested', 'keep:the row is gone from the registry while its files are at /data/nested/a.example.com/data'],
  ]
  for (const [facts, wants, want] of cases) {
    const a = recoveryAction(rec, facts, wants)
    const got = a.kind === 'keep' ? `keep:${a.reason}` : a.kind
    assert.ok(got.startsWith(want), `${JSON.stringify(facts)} wants ${wants}: got ${got}`)
  }
})

void test('rowAt compares all three paths', () => {
  const row = (p: object): Route => ({ host: H, kind: 'instance', hibernate: true, ...flatPaths(dirs, H), ...p })
  assert.equal(rowAt(row({}), rec), 'from')
  assert.equal(rowAt(row(nestedPaths(dirs, H)), rec), 'dest')
  assert.equal(rowAt(row({ db: '/data/apps/a.example.com/x.db' }), rec), 'other')
  assert.equal(rowAt(undefined, rec), 'missing')
})

void test('wantedMode: unreadable wants nothing, none wants flat only when opted out', () => {
  assert.equal(wantedMode('nested', false), 'nested')
  assert.equal(wantedMode('flat', false), 'flat')
  assert.equal(wantedMode('unreadable', true), undefined)
  assert.equal(wantedMode('none', false), undefined)
  assert.equal(wantedMode('none', true), 'flat')
})

void test('holdStands', () => {
  assert.deepEqual(holdStands('nested', 'flat', 'nested', false), { stands: true })
  assert.deepEqual(holdStands('nested', 'flat', 'unreadable', true), { stands: true })
  assert.deepEqual(holdStands('nested', 'flat', 'none', false), { stands: true })
  assert.equal(holdStands('nested', 'flat', 'flat', false).stands, false)
  assert.equal(holdStands('nested', 'flat', 'none', true).stands, false)
  assert.equal(holdStands('nested', 'nested', 'unreadable', false).stands, false, 'the held move has happened')
  assert.deepEqual(holdStands('nested', undefined, 'flat', false), { stands: true }, 'a row in neither shape is not released')
  assert.deepEqual(holdStands('flat', 'nested', 'flat', false), { stands: true })
  assert.equal(holdStands('flat', 'nested', 'nested', false).stands, false)
})

void test('recordShapeError accepts only the two shapes of the host', () => {
  assert.equal(recordShapeError(rec, dirs), null)
  const db = { ...rec, from: { ...rec.from, db: '/data/apps/a.example.com/d/app.db' }, dest: { ...rec.dest, db: '/data/nested/a.example.com/data/d/app.db' } }
  assert.equal(recordShapeError(db, dirs), null)
  assert.match(recordShapeError({ ...db, dest: { ...db.dest, db: '/etc/passwd' } }, dirs) ?? '', /dest\.db/)
  assert.match(recordShapeError({ ...rec, from: { ...rec.from, dir: '/' } }, dirs) ?? '', /^from is not the flat paths/)
  assert.match(recordShapeError({ ...rec, to: 'flat' }, dirs) ?? '', /^dest is not the flat paths/)
})

void test('planRow decides before anything is stopped', () => {
  const flatRow: Route = { host: H, kind: 'instance', hibernate: true, ...flatPaths(dirs, H), db: '/data/apps/a.example.com/app.db' }
  const plan = (rt: Route, mode: Mode, over: { gate?: string | null; hold?: Mode; others?: Route[] } = {}) => {
    const rows = [rt, ...(over.others ?? [])]
    return planRow(rt, mode, {
      dirs,
      word: classify(rt, rows, { dirs, fenced: () => undefined }),
      hold: over.hold,
      gate: over.gate ?? null,
      claims: new PathClaims(rows),
    })
  }
  assert.deepEqual(plan(flatRow, 'nested'), {
    kind: 'move',
    from: { dir: flatRow.dir, socket: flatRow.socket, db: flatRow.db },
    dest: { ...nestedPaths(dirs, H), db: '/data/nested/a.example.com/data/app.db' },
  })
  assert.deepEqual(plan(flatRow, 'flat'), { kind: 'unchanged' })
  assert.equal(plan(flatRow, 'flat', { hold: 'nested' }).kind, 'release')
  assert.deepEqual(plan(flatRow, 'nested', { gate: 'probe: not yet run' }), { kind: 'refused', reason: 'isolation not ready: probe: not yet run' })
  const nestedRow: Route = { ...flatRow, ...nestedPaths(dirs, H), db: '' }
  assert.equal(plan(nestedRow, 'flat', { gate: 'shut' }).kind, 'move', 'the gate only guards nested')
  const far: Route = { ...flatRow, host: `${'x'.repeat(63)}.${'y'.repeat(40)}.example.com`, db: '' }
  Object.assign(far, flatPaths(dirs, far.host))
  assert.match((plan(far, 'nested') as { reason: string }).reason, /over 107/)
  const squatter: Route = { host: 'z.example.com', kind: 'static', hibernate: false, socket: '', dir: '/data/nested/a.example.com/run', db: '' }
  assert.match((plan(flatRow, 'nested', { others: [squatter] }) as { reason: string }).reason, /^destination taken: /)
  assert.equal(plan({ ...flatRow, dir: '/srv/a', db: '' }, 'nested').kind, 'refused')
})

void test('awakeReason rounds up to whole minutes', () => {
  assert.equal(awakeReason(42 * 60_000), 'awake: 42m of grace left')
  assert.equal(awakeReason(41 * 60_000 + 1), 'awake: 42m of grace left')
  assert.equal(awakeReason(5_000), 'awake: 1m of grace left')
})

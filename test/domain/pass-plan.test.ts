import assert from 'node:assert/strict'
import { test } from 'node:test'
import { classify, PathClaims } from '../../src/domain/classify.js'
import type { Mode, Result } from '../../src/domain/modes.js'
import {
  adaptiveBatchSize,
  awakeReason,
  holdStands,
  inBatches,
  inRowOrder,
  MAX_BATCH,
  MIN_BATCH,
  planRow,
  recordShapeError,
  recoveryAction,
  rowAt,
  sortByClaim,
  wantedMode,
  type MoveCandidate,
  type MoveRecord,
  type RecoveryFacts,
} from '../../src/domain/pass-plan.js'
import { flatPaths, nestedPaths, type Dirs } from '../../src/domain/paths.js'
import type { Route } from '../../src/domain/schemas.js'

const dirs: Dirs = { dataDir: '/data', runDir: '/data/run' }
const H = 'a.example.com'
const rec: MoveRecord = { host: H, to: 'nested', from: flatPaths(dirs, H), dest: nestedPaths(dirs, H) }

void test('the recovery table (design §4), row by row', () => {
  // A kept journal is judged by its code; where a sentence is given, the reason must also name the paths.
  const cases: Array<[RecoveryFacts, Mode | undefined, string, string?]> = [
    [{ fromExists: true, destExists: false, row: 'from' }, 'nested', 'redo-move'],
    [{ fromExists: true, destExists: false, row: 'from' }, undefined, 'redo-move'],
    [{ fromExists: true, destExists: false, row: 'from' }, 'flat', 'rollback'],
    [{ fromExists: false, destExists: true, row: 'from' }, 'nested', 'redo-row'],
    [{ fromExists: false, destExists: true, row: 'from' }, 'flat', 'redo-row'],
    [{ fromExists: false, destExists: true, row: 'dest' }, 'flat', 'redo-finish'],
    [
      { fromExists: true, destExists: true, row: 'from' },
      'nested',
      'keep:ambiguous',
      'ambiguous: files at both /data/apps/a.example.com and /data/nested/a.example.com/data; an operator decides which to keep',
    ],
    [{ fromExists: true, destExists: true, row: 'dest' }, 'nested', 'keep:ambiguous'],
    [
      { fromExists: false, destExists: false, row: 'from' },
      'nested',
      'keep:files_missing',
      'files missing: neither /data/apps/a.example.com nor /data/nested/a.example.com/data exists; nothing is invented',
    ],
    [{ fromExists: false, destExists: false, row: 'dest' }, 'nested', 'keep:files_missing'],
    [
      { fromExists: true, destExists: false, row: 'dest' },
      'nested',
      'keep:row_ahead',
      'files are at /data/apps/a.example.com but the row already says /data/nested/a.example.com/data',
    ],
    [{ fromExists: true, destExists: false, row: 'other' }, 'nested', 'keep:row_elsewhere'],
    [
      { fromExists: false, destExists: true, row: 'missing' },
      'nested',
      'keep:row_gone',
      'the row is gone from the registry while its files are at /data/nested/a.example.com/data',
    ],
    [{ fromExists: false, destExists: true, destIsLink: true, row: 'from' }, 'nested', 'keep:dest_symlink'],
  ]
  for (const [facts, wants, want, sentence] of cases) {
    const a = recoveryAction(rec, facts, wants)
    const got = a.kind === 'keep' ? `keep:${a.code}` : a.kind
    assert.equal(got, want, `${JSON.stringify(facts)} wants ${wants}`)
    if (sentence !== undefined) assert.equal(a.kind === 'keep' && a.reason, sentence)
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
  assert.deepEqual(
    holdStands('nested', undefined, 'flat', false),
    { stands: true },
    'a row in neither shape is not released',
  )
  assert.deepEqual(holdStands('flat', 'nested', 'flat', false), { stands: true })
  assert.equal(holdStands('flat', 'nested', 'nested', false).stands, false)
})

void test('recordShapeError accepts only the two shapes of the host', () => {
  assert.equal(recordShapeError(rec, dirs), null)
  const db = {
    ...rec,
    from: { ...rec.from, db: '/data/apps/a.example.com/d/app.db' },
    dest: { ...rec.dest, db: '/data/nested/a.example.com/data/d/app.db' },
  }
  assert.equal(recordShapeError(db, dirs), null)
  assert.match(recordShapeError({ ...db, dest: { ...db.dest, db: '/etc/passwd' } }, dirs) ?? '', /dest\.db/)
  assert.match(recordShapeError({ ...rec, from: { ...rec.from, dir: '/' } }, dirs) ?? '', /^from is not the flat paths/)
  assert.match(recordShapeError({ ...rec, to: 'flat' }, dirs) ?? '', /^dest is not the flat paths/)
})

void test('planRow decides before anything is stopped', () => {
  const flatRow: Route = {
    host: H,
    kind: 'instance',
    hibernate: true,
    ...flatPaths(dirs, H),
    db: '/data/apps/a.example.com/app.db',
  }
  const plan = (rt: Route, mode: Mode, over: { gate?: string | null; hold?: Mode; others?: Route[] } = {}) => {
    const rows = [rt, ...(over.others ?? [])]
    return planRow(rt, mode, {
      dirs,
      classification: classify(rt, rows, { dirs, fenced: () => undefined }),
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
  assert.deepEqual(plan(flatRow, 'nested', { gate: 'probe: not yet run' }), {
    kind: 'refused',
    code: 'gate_shut',
    reason: 'isolation not ready: probe: not yet run',
  })
  const nestedRow: Route = { ...flatRow, ...nestedPaths(dirs, H), db: '' }
  assert.equal(plan(nestedRow, 'flat', { gate: 'shut' }).kind, 'move', 'the gate only guards nested')
  const far: Route = { ...flatRow, host: `${'x'.repeat(63)}.${'y'.repeat(40)}.example.com`, db: '' }
  Object.assign(far, flatPaths(dirs, far.host))
  assert.equal((plan(far, 'nested') as { code: string }).code, 'socket_too_long')
  assert.match((plan(far, 'nested') as { reason: string }).reason, /over 107/)
  const squatter: Route = {
    host: 'z.example.com',
    kind: 'static',
    hibernate: false,
    socket: '',
    dir: '/data/nested/a.example.com/run',
    db: '',
  }
  assert.equal((plan(flatRow, 'nested', { others: [squatter] }) as { code: string }).code, 'dest_taken')
  assert.match((plan(flatRow, 'nested', { others: [squatter] }) as { reason: string }).reason, /^destination taken: /)
  assert.equal(plan({ ...flatRow, dir: '/srv/a', db: '' }, 'nested').kind, 'refused')
})

void test('awakeReason rounds up to whole minutes', () => {
  assert.deepEqual(awakeReason(42 * 60_000), { code: 'awake_grace', reason: 'awake: 42m of grace left' })
  assert.equal(awakeReason(41 * 60_000 + 1).reason, 'awake: 42m of grace left')
  assert.equal(awakeReason(5_000).reason, 'awake: 1m of grace left')
})

const candidate = (host: string, wasHeld = false): MoveCandidate => ({
  record: { host, to: 'nested', from: flatPaths(dirs, host), dest: nestedPaths(dirs, host) },
  wasHeld,
})

void test('inBatches cuts a run into group commits of at most the batch size, in order', () => {
  assert.deepEqual(inBatches([1, 2, 3, 4, 5], 2), [[1, 2], [3, 4], [5]])
  assert.deepEqual(inBatches([1, 2, 3], 3), [[1, 2, 3]])
  assert.deepEqual(inBatches([], 4), [])
  assert.deepEqual(inBatches([1, 2], 0), [[1], [2]], 'a batch holds one host at the least')
  // A size asked of what still waits: 5 waiting take 3, the 2 left take 1 each.
  assert.deepEqual(
    inBatches([1, 2, 3, 4, 5], (waiting) => (waiting > 2 ? 3 : 1)),
    [[1, 2, 3], [4], [5]],
  )
})

void test('sortByClaim: asleep moves together, awake inside its grace is deferred, the rest is stopped', () => {
  const awake = new Set(['b.example.com', 'c.example.com', 'd.example.com'])
  const left = new Map([
    ['b.example.com', 42 * 60_000],
    ['c.example.com', 0],
    ['d.example.com', 5_000],
  ])
  const asked: string[] = []
  const batch = [
    candidate('a.example.com'),
    candidate('b.example.com'),
    candidate('c.example.com'),
    candidate('d.example.com', true),
  ]
  const sorted = sortByClaim(batch, {
    claimed: (host) => awake.has(host),
    deferAwake: true,
    graceLeft: (host) => {
      asked.push(host)
      return left.get(host) ?? 0
    },
  })
  assert.deepEqual(
    sorted.sleeping.map((c) => c.record.host),
    ['a.example.com'],
  )
  assert.deepEqual(
    sorted.deferred.map((d) => [d.candidate.record.host, d.because.code, d.because.reason]),
    [['b.example.com', 'awake_grace', 'awake: 42m of grace left']],
  )
  assert.deepEqual(
    sorted.awake.map((c) => c.record.host),
    ['c.example.com', 'd.example.com'],
    'grace over, or held before the run',
  )
  assert.deepEqual(asked, ['b.example.com', 'c.example.com'], 'the grace of a sleeping or held host is never started')
})

void test('sortByClaim under a forced intent stops every awake host and starts no grace', () => {
  const sorted = sortByClaim([candidate('a.example.com'), candidate('b.example.com')], {
    claimed: (host) => host === 'b.example.com',
    deferAwake: false,
    graceLeft: () => assert.fail('no grace is asked for under a forced intent'),
  })
  assert.deepEqual(
    sorted.sleeping.map((c) => c.record.host),
    ['a.example.com'],
  )
  assert.deepEqual(
    sorted.awake.map((c) => c.record.host),
    ['b.example.com'],
  )
  assert.deepEqual(sorted.deferred, [])
})

void test('inRowOrder: whole-run results first, then one per host in row order, the last that is not only unchanged', async () => {
  const rows = [{ host: 'a.example.com' }, { host: 'b.example.com' }, { host: 'c.example.com' }]
  const results: Result[] = [
    { host: 'c.example.com', outcome: 'moved', code: '', reason: '' },
    {
      host: 'b.example.com',
      outcome: 'recovered',
      code: 'move_finished',
      reason: 'finished the move to nested',
      to: 'nested',
    },
    { host: '', outcome: 'failed', code: 'stray_file', reason: 'x.journal: not named for a valid host; left alone' },
    { host: 'a.example.com', outcome: 'deferred', code: 'awake_grace', reason: 'awake: 3m of grace left' },
    { host: 'b.example.com', outcome: 'unchanged', code: '', reason: '', to: 'nested' },
    {
      host: 'gone.example.com',
      outcome: 'released',
      code: 'journal_removed',
      reason: 'its journal was removed by an operator',
    },
  ]
  assert.deepEqual(
    (await inRowOrder(results, rows)).map((r) => `${r.host}:${r.outcome}`),
    [
      ':failed',
      'gone.example.com:released',
      'a.example.com:deferred',
      'b.example.com:recovered',
      'c.example.com:moved',
    ],
  )
  const later: Result[] = [
    { host: 'a.example.com', outcome: 'recovered', code: '', reason: '' },
    { host: 'a.example.com', outcome: 'refused', code: 'gate_shut', reason: 'isolation not ready: shut' },
  ]
  assert.deepEqual(
    (await inRowOrder(later, rows)).map((r) => r.outcome),
    ['refused'],
    'a later outcome other than unchanged wins',
  )
})

void test('inRowOrder asks to give the loop back as it orders a long run, and orders it the same', async () => {
  const rows = Array.from({ length: 1000 }, (_, i) => ({ host: `h${i}.example.com` }))
  const results: Result[] = rows
    .map((r): Result => ({ host: r.host, outcome: 'moved', code: '', reason: '' }))
    .reverse()
  let pauses = 0
  let turned = false
  setImmediate(() => (turned = true))
  const ordered = await inRowOrder(results, rows, async () => {
    pauses++
    await new Promise((resolve) => setImmediate(resolve))
  })
  assert.deepEqual(
    ordered.map((r) => r.host),
    rows.map((r) => r.host),
  )
  // Every 256 results of each of its two walks: 4 + 4.
  assert.equal(pauses, 8)
  assert.ok(turned, 'the loop turned while it ordered')
})

void test('adaptiveBatchSize: half of what waits, between the bounds', () => {
  assert.equal(adaptiveBatchSize(1), MIN_BATCH, 'a few hosts: the smallest batch')
  assert.equal(adaptiveBatchSize(200), MIN_BATCH)
  assert.equal(adaptiveBatchSize(400), 200)
  assert.equal(adaptiveBatchSize(10_000), MAX_BATCH, 'ten thousand: the largest batch')
  const sizes = inBatches(
    Array.from({ length: 10_000 }, (_, i) => i),
    adaptiveBatchSize,
  ).map((b) => b.length)
  assert.equal(
    sizes.reduce((a, b) => a + b, 0),
    10_000,
    'every host in one batch',
  )
  assert.ok(
    sizes.every((n, i) => n <= MAX_BATCH && (n >= MIN_BATCH || i === sizes.length - 1)),
    sizes.join(','),
  )
})

// The wake verdict, as a pure decision: every refusal, the unmanaged
// answer, the claim metric's kind, and the grant's paths. No temp box.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { Classification } from '../../src/domain/ports.js'
import { why } from '../../src/domain/reason-codes.js'
import type { Route } from '../../src/domain/schemas.js'
import { judgeWake, NO_ACTIVATOR, type FilesSeen, type WakeFacts } from '../../src/domain/wake-verdict.js'
import { refusedState } from '../../src/domain/gate-state.js'
import { filesTarget, type FilesLook, type Found } from '../../src/domain/row-files.js'
import { FakeGate } from './fakes.js'

const A = 'a.example.com'

function instance(host: string, over: Partial<Route> = {}): Route {
  return {
    host,
    kind: 'instance',
    hibernate: true,
    dir: `/data/apps/${host}`,
    socket: `/data/run/${host}.sock`,
    db: '',
    ...over,
  }
}

/** Facts for a ready, armed box whose pass says what classified and held say. */
function facts(
  routes: Route[],
  classified: Record<string, Classification> = {},
  held: Record<string, string> = {},
  gate = new FakeGate(),
): WakeFacts {
  return {
    armed: true,
    phase: 'ready',
    pass: {
      classify: (route) => classified[route.host] ?? { layout: 'flat', code: '', reason: '' },
      held: (host) => (held[host] === undefined ? undefined : why('second_name', held[host])),
    },
    rows: () => ({ routes, byHost: new Map(routes.map((r) => [r.host, r])) }),
    gate,
    dirs: { dataDir: '/data', runDir: '/data/run' },
  }
}

/** No look at the files was taken: the verdict goes by the rest (what `PUT /wakes` does for a host not looked at). */
const UNLOOKED: FilesSeen = { look: undefined, fresh: false }

void test('a flat row is granted with its paths; so is a foreign one, gate or no gate', () => {
  const route = instance(A, { db: `/data/apps/${A}/db.sqlite` })
  const shut = new FakeGate('probe: not yet run')
  assert.deepEqual(judgeWake(A, facts([route], {}, {}, shut), UNLOOKED), {
    ok: true,
    grant: { host: A, layout: 'flat', dir: route.dir, socket: route.socket, db: route.db },
  })
  const foreign = judgeWake(A, facts([route], { [A]: { layout: 'foreign', code: '', reason: '' } }, {}, shut), UNLOOKED)
  assert.equal(foreign.ok && foreign.grant.layout, 'foreign')
  assert.equal(shut.asked, 0, 'the gate is asked only about nested rows')
})

void test('with no activator armed, every claim is the unmanaged answer, counted not_ready, and nothing is read', () => {
  let read = false
  const verdict = judgeWake(
    A,
    {
      ...facts([instance(A)]),
      armed: false,
      rows: () => {
        read = true
        return { routes: [], byHost: new Map() }
      },
    },
    UNLOOKED,
  )
  assert.deepEqual(verdict, {
    ok: false,
    refusal: { host: A, layout: 'unmanaged', code: 'no_activator', reason: NO_ACTIVATOR },
    kind: 'not_ready',
  })
  assert.equal(read, false)
})

void test('before the agent is ready, or before the pass is published, a claim is refused not ready', () => {
  assert.deepEqual(judgeWake(A, { ...facts([instance(A)]), phase: 'recovering' }, UNLOOKED), {
    ok: false,
    refusal: { host: A, layout: 'unknown', code: 'not_ready', reason: 'not ready: layoutd is recovering' },
    kind: 'not_ready',
  })
  const noPass = judgeWake(A, { ...facts([instance(A)]), pass: null }, UNLOOKED)
  assert.equal(!noPass.ok && noPass.kind, 'not_ready')
})

void test('an unknown host, and rows the activator does not manage, say why and count as unknown_host', () => {
  const rows = [
    instance('s.example.com', { kind: 'sidecar', hibernate: false, socket: '', dir: '' }),
    instance('n.example.com', { socket: '' }),
    instance('e.example.com', { hibernate: false }),
  ]
  const cases: Array<[string, string, string, string]> = [
    ['z.example.com', 'unknown', 'unknown_host', 'unknown host: z.example.com is not in the registry'],
    [
      's.example.com',
      'unmanaged',
      'not_managed',
      "not activator-managed: a sidecar row is not the activator's to wake",
    ],
    ['n.example.com', 'unmanaged', 'not_managed', 'not activator-managed: the row has no socket'],
    [
      'e.example.com',
      'external',
      'not_managed',
      'not activator-managed: the row does not hibernate: another supervisor runs it',
    ],
  ]
  for (const [host, layout, code, reason] of cases) {
    assert.deepEqual(
      judgeWake(host, facts(rows), UNLOOKED),
      { ok: false, refusal: { host, layout, code, reason }, kind: 'unknown_host' },
      host,
    )
  }
})

void test('fenced, conflict and held rows are refused with their reason and their own kind', () => {
  const routes = [instance(A)]
  assert.deepEqual(
    judgeWake(
      A,
      facts(routes, { [A]: { layout: 'fenced', code: 'files_missing', reason: 'files missing' } }),
      UNLOOKED,
    ),
    {
      ok: false,
      refusal: { host: A, layout: 'fenced', code: 'files_missing', reason: 'fenced: files missing' },
      kind: 'fenced',
    },
  )
  assert.deepEqual(
    judgeWake(
      A,
      facts(routes, {
        [A]: { layout: 'conflict', code: 'dir_claimed', reason: 'dir is also claimed by b.example.com' },
      }),
      UNLOOKED,
    ),
    {
      ok: false,
      refusal: {
        host: A,
        layout: 'conflict',
        code: 'dir_claimed',
        reason: 'conflict: dir is also claimed by b.example.com',
      },
      kind: 'conflict',
    },
  )
  // A held host reads fenced; its reason is the hold's, unless the pass already fences it for a reason of its own.
  assert.deepEqual(judgeWake(A, facts(routes, {}, { [A]: 'a file of its has a second name' }), UNLOOKED), {
    ok: false,
    refusal: {
      host: A,
      layout: 'fenced',
      code: 'second_name',
      reason: 'held down after a refused move to nested: a file of its has a second name',
    },
    kind: 'held',
  })
  const heldAndFenced = judgeWake(
    A,
    facts(routes, { [A]: { layout: 'fenced', code: 'second_name', reason: 'held: x' } }, { [A]: 'x' }),
    UNLOOKED,
  )
  assert.deepEqual(heldAndFenced, {
    ok: false,
    refusal: { host: A, layout: 'fenced', code: 'second_name', reason: 'held: x' },
    kind: 'held',
  })
  // An external word from the pass is not the activator's either.
  const ext = judgeWake(A, facts(routes, { [A]: { layout: 'external', code: '', reason: '' } }), UNLOOKED)
  assert.equal(!ext.ok && ext.kind, 'unknown_host')
})

void test('a nested row wakes while the gate is open and is refused, naming the check, while it is shut', () => {
  const routes = [instance(A)]
  const nested = { [A]: { layout: 'nested' as const, code: '' as const, reason: '' } }
  const gate = new FakeGate('probe: the probe says ready: false')
  assert.deepEqual(judgeWake(A, facts(routes, nested, {}, gate), UNLOOKED), {
    ok: false,
    refusal: {
      host: A,
      layout: 'nested',
      code: 'gate_shut',
      reason: 'isolation not ready: probe: the probe says ready: false',
    },
    kind: 'gate_shut',
  })
  gate.verdict = null
  const open = judgeWake(A, facts(routes, nested, {}, gate), UNLOOKED)
  assert.equal(open.ok && open.grant.layout, 'nested')
})

// ---- the row's files (design §6.1) ------------------------------------------

const DIRS = { dataDir: '/data', runDir: '/data/run' }
const FLAT_DIR = `/data/apps/${A}`
const NESTED_DIR = `/data/nested/${A}/data`

function look(at: Found, elsewhere: Found, over: Partial<FilesLook> = {}): FilesLook {
  return { dir: FLAT_DIR, other: NESTED_DIR, at, elsewhere, error: '', ...over }
}

void test('a flat row wakes only while its dir is a real directory and the nested one is absent', () => {
  const routes = [instance(A)]
  assert.deepEqual(filesTarget(DIRS, instance(A)), { dir: FLAT_DIR, other: NESTED_DIR })
  const granted = judgeWake(A, facts(routes), { look: look('dir', 'absent'), fresh: true })
  assert.equal(granted.ok && granted.grant.dir, FLAT_DIR)
  const cases: Array<[FilesLook, string, RegExp]> = [
    [look('absent', 'dir'), 'files_elsewhere', /does not exist, and .*nested.* does/],
    [look('absent', 'absent'), 'files_missing', /neither .* nor .* exists/],
    [look('dir', 'dir'), 'files_elsewhere', /two places/],
    [look('dir', 'symlink'), 'files_elsewhere', /two places/],
    [look('symlink', 'absent'), 'files_not_directory', /is a symlink/],
    [look('not_dir', 'absent'), 'files_not_directory', /not a directory/],
    [look('error', 'absent', { error: 'EACCES' }), 'files_unknown', /EACCES/],
  ]
  for (const [found, code, reason] of cases) {
    for (const fresh of [true, false]) {
      const v = judgeWake(A, facts(routes), { look: found, fresh })
      assert.equal(v.ok, false, `${found.at}/${found.elsewhere} fresh=${fresh}`)
      if (v.ok) continue
      assert.deepEqual([v.refusal.layout, v.refusal.code, v.kind], ['fenced', code, 'files'])
      assert.match(v.refusal.reason, reason)
    }
  }
})

void test('a nested row is judged by its files before the gate: a flat dir beside it is refused', () => {
  const route = instance(A, { dir: NESTED_DIR, socket: `/data/nested/${A}/run/app.sock` })
  const nested = { [A]: { layout: 'nested' as const, code: '' as const, reason: '' } }
  assert.deepEqual(filesTarget(DIRS, route), { dir: NESTED_DIR, other: FLAT_DIR })
  const there = { dir: NESTED_DIR, other: FLAT_DIR, error: '' }
  const gate = new FakeGate('probe: the probe says ready: false')
  const both = judgeWake(A, facts([route], nested, {}, gate), {
    look: { ...there, at: 'dir', elsewhere: 'dir' },
    fresh: true,
  })
  assert.equal(!both.ok && both.refusal.code, 'files_elsewhere')
  gate.verdict = null
  const ok = judgeWake(A, facts([route], nested, {}, gate), {
    look: { ...there, at: 'dir', elsewhere: 'absent' },
    fresh: true,
  })
  assert.equal(ok.ok && ok.grant.layout, 'nested')
})

void test('a look taken at other paths than the row has now is not yet judged when fresh, and ignored when not', () => {
  const routes = [instance(A)]
  const stale = look('absent', 'absent', { dir: '/data/apps/elsewhere', other: '/data/nested/elsewhere/data' })
  const fresh = judgeWake(A, facts(routes), { look: stale, fresh: true })
  assert.deepEqual(!fresh.ok && [fresh.refusal.code, fresh.kind], ['fenced_for_move', 'fenced'])
  const none = judgeWake(A, facts(routes), { look: undefined, fresh: true })
  assert.deepEqual(!none.ok && none.refusal.code, 'fenced_for_move')
  assert.equal(judgeWake(A, facts(routes), { look: stale, fresh: false }).ok, true)
  // A foreign row is never looked at: it wakes as it is.
  const foreign = instance(A, { dir: '/srv/a', socket: '/srv/a.sock' })
  assert.equal(filesTarget(DIRS, foreign), null)
  const v = judgeWake(A, facts([foreign], { [A]: { layout: 'foreign', code: '', reason: '' } }), {
    look: undefined,
    fresh: true,
  })
  assert.equal(v.ok, true)
})

void test("before the gate's first checks a nested host is not yet judged (gate_pending), never refused gate_shut", () => {
  const route = instance(A, { dir: NESTED_DIR, socket: `/data/nested/${A}/run/app.sock` })
  const nested = { [A]: { layout: 'nested' as const, code: '' as const, reason: '' } }
  const gate = new FakeGate('selfcheck: not yet run')
  gate.hasJudged = false
  const there = {
    look: { dir: NESTED_DIR, other: FLAT_DIR, error: '', at: 'dir', elsewhere: 'absent' } as const,
    fresh: true,
  }
  const early = judgeWake(A, facts([route], nested, {}, gate), there)
  assert.deepEqual(early, {
    ok: false,
    refusal: {
      host: A,
      layout: 'nested',
      code: 'gate_pending',
      reason: 'not yet judged: isolation gate selfcheck: not yet run',
    },
    kind: 'not_ready',
  })
  assert.equal(refusedState({ layout: 'nested', code: 'gate_pending' }, 'ready'), 'starting')
  gate.hasJudged = true
  gate.verdict = 'selfcheck: cannot create, chmod and remove a tree under /data/nested (EROFS)'
  const shut = judgeWake(A, facts([route], nested, {}, gate), there)
  assert.deepEqual(!shut.ok && [shut.refusal.code, shut.kind], ['gate_shut', 'gate_shut'])
  // A flat host never waits for the gate.
  gate.hasJudged = false
  assert.equal(judgeWake(A, facts([instance(A)], {}, {}, gate), { look: look('dir', 'absent'), fresh: true }).ok, true)
})

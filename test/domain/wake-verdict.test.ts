// The wake verdict, as a pure decision: every refusal, the unmanaged
// answer, the claim metric's kind, and the grant's paths. No temp box.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { Classification } from '../../src/domain/ports.js'
import { why } from '../../src/domain/reason-codes.js'
import type { Route } from '../../src/domain/schemas.js'
import { judgeWake, NO_ACTIVATOR, type WakeFacts } from '../../src/domain/wake-verdict.js'
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
  }
}

void test('a flat row is granted with its paths; so is a foreign one, gate or no gate', () => {
  const route = instance(A, { db: `/data/apps/${A}/db.sqlite` })
  const shut = new FakeGate('probe: not yet run')
  assert.deepEqual(judgeWake(A, facts([route], {}, {}, shut)), {
    ok: true,
    grant: { host: A, layout: 'flat', dir: route.dir, socket: route.socket, db: route.db },
  })
  const foreign = judgeWake(A, facts([route], { [A]: { layout: 'foreign', code: '', reason: '' } }, {}, shut))
  assert.equal(foreign.ok && foreign.grant.layout, 'foreign')
  assert.equal(shut.asked, 0, 'the gate is asked only about nested rows')
})

void test('with no activator armed, every claim is the unmanaged answer, counted not_ready, and nothing is read', () => {
  let read = false
  const verdict = judgeWake(A, {
    ...facts([instance(A)]),
    armed: false,
    rows: () => {
      read = true
      return { routes: [], byHost: new Map() }
    },
  })
  assert.deepEqual(verdict, {
    ok: false,
    refusal: { host: A, layout: 'unmanaged', code: 'no_activator', reason: NO_ACTIVATOR },
    kind: 'not_ready',
  })
  assert.equal(read, false)
})

void test('before the agent is ready, or before the pass is published, a claim is refused not ready', () => {
  assert.deepEqual(judgeWake(A, { ...facts([instance(A)]), phase: 'recovering' }), {
    ok: false,
    refusal: { host: A, layout: 'unknown', code: 'not_ready', reason: 'not ready: layoutd is recovering' },
    kind: 'not_ready',
  })
  const noPass = judgeWake(A, { ...facts([instance(A)]), pass: null })
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
      judgeWake(host, facts(rows)),
      { ok: false, refusal: { host, layout, code, reason }, kind: 'unknown_host' },
      host,
    )
  }
})

void test('fenced, conflict and held rows are refused with their reason and their own kind', () => {
  const routes = [instance(A)]
  assert.deepEqual(
    judgeWake(A, facts(routes, { [A]: { layout: 'fenced', code: 'files_missing', reason: 'files missing' } })),
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
  assert.deepEqual(judgeWake(A, facts(routes, {}, { [A]: 'a file of its has a second name' })), {
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
  )
  assert.deepEqual(heldAndFenced, {
    ok: false,
    refusal: { host: A, layout: 'fenced', code: 'second_name', reason: 'held: x' },
    kind: 'held',
  })
  // An external word from the pass is not the activator's either.
  const ext = judgeWake(A, facts(routes, { [A]: { layout: 'external', code: '', reason: '' } }))
  assert.equal(!ext.ok && ext.kind, 'unknown_host')
})

void test('a nested row wakes while the gate is open and is refused, naming the check, while it is shut', () => {
  const routes = [instance(A)]
  const nested = { [A]: { layout: 'nested' as const, code: '' as const, reason: '' } }
  const gate = new FakeGate('probe: the probe says ready: false')
  assert.deepEqual(judgeWake(A, facts(routes, nested, {}, gate)), {
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
  const open = judgeWake(A, facts(routes, nested, {}, gate))
  assert.equal(open.ok && open.grant.layout, 'nested')
})

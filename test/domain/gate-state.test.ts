// The gate's rules (design §6.4): a refusal's state by its code, the status
// of each form, and Retry-After from what the agent knows.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { gateStatus, MAX_RETRY_S, refusedState, retryAfterSeconds } from '../../src/domain/gate-state.js'
import { canonicalHost } from '../../src/domain/hostname.js'

void test('a refusal is not yet while it passes on its own, never while a person or the row must change', () => {
  assert.equal(refusedState({ layout: 'unknown', code: 'not_ready' }, 'recovering'), 'starting')
  assert.equal(refusedState({ layout: 'unknown', code: 'not_ready' }, 'stopping'), 'stopping')
  assert.equal(refusedState({ layout: 'fenced', code: 'in_flight' }, 'ready'), 'fenced')
  assert.equal(refusedState({ layout: 'fenced', code: 'fenced_for_move' }, 'ready'), 'fenced')
  assert.equal(refusedState({ layout: 'fenced', code: 'agent_starting' }, 'ready'), 'fenced')
  assert.equal(refusedState({ layout: 'nested', code: 'gate_shut' }, 'ready'), 'gate_shut')
  // A fence recovery kept, or a hold marker: an operator decides.
  assert.equal(refusedState({ layout: 'fenced', code: 'files_missing' }, 'ready'), 'held')
  assert.equal(refusedState({ layout: 'fenced', code: 'symlink_source' }, 'ready'), 'held')
  assert.equal(refusedState({ layout: 'conflict', code: 'dir_claimed' }, 'ready'), 'conflict')
  assert.equal(refusedState({ layout: 'unknown', code: 'unknown_host' }, 'ready'), 'unknown')
  assert.equal(refusedState({ layout: 'external', code: 'not_managed' }, 'ready'), 'unmanaged')
  assert.equal(refusedState({ layout: 'unmanaged', code: 'no_activator' }, 'ready'), 'unmanaged')
})

void test('the statuses: the client-facing form, and nginx auth_request’s 401/403', () => {
  assert.equal(gateStatus('ready', false), 204)
  assert.equal(gateStatus('ready', true), 204)
  for (const s of ['starting', 'stopping', 'fenced', 'gate_shut'] as const) {
    assert.equal(gateStatus(s, false), 503, s)
    assert.equal(gateStatus(s, true), 401, s)
  }
  for (const s of ['held', 'conflict', 'unmanaged'] as const) {
    assert.equal(gateStatus(s, false), 403, s)
    assert.equal(gateStatus(s, true), 403, s)
  }
  assert.equal(gateStatus('unknown', false), 404)
  assert.equal(gateStatus('unknown', true), 403)
})

void test('Retry-After: a fence for what is left of the average fence, a shut gate for the poll, else a second', () => {
  assert.equal(retryAfterSeconds({ state: 'fenced', fenceRemainingMs: 4200, pollMs: 5000 }), 5)
  assert.equal(retryAfterSeconds({ state: 'fenced', fenceRemainingMs: 0, pollMs: 5000 }), 1)
  assert.equal(retryAfterSeconds({ state: 'fenced', fenceRemainingMs: null, pollMs: 5000 }), 1)
  assert.equal(retryAfterSeconds({ state: 'fenced', fenceRemainingMs: 3_600_000, pollMs: 5000 }), MAX_RETRY_S)
  assert.equal(retryAfterSeconds({ state: 'gate_shut', pollMs: 5000 }), 5)
  assert.equal(retryAfterSeconds({ state: 'gate_shut', pollMs: 50 }), 1)
  assert.equal(retryAfterSeconds({ state: 'starting', pollMs: 5000 }), 1)
  assert.equal(retryAfterSeconds({ state: 'waiters', pollMs: 5000 }), 1)
})

void test('canonicalHost folds ASCII case and drops one trailing dot, nothing else', () => {
  assert.equal(canonicalHost('OK.Example.COM'), 'ok.example.com')
  assert.equal(canonicalHost('ok.example.com.'), 'ok.example.com')
  assert.equal(canonicalHost('ok.example.com..'), 'ok.example.com.')
  assert.equal(canonicalHost('.'), '.')
  // U+212A KELVIN SIGN lower-cases to k in JavaScript: left as it is, so the rule refuses it.
  assert.equal(canonicalHost('\u212Aass.example.com'), '\u212Aass.example.com')
})

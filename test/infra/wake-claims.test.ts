// The claim set the pass consults, when the sweep could not read the
// persisted claims: every host counts as awake until the activator proves
// otherwise, by a release or by its whole awake set.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { WakeClaims, type ClaimStore } from '../../src/infra/wake-claims.js'
import { FakeLogger } from '../domain/fakes.js'

/** A store whose persisted claims cannot be read; writes land in memory. */
function unreadableStore(): ClaimStore {
  const held = new Set<string>()
  return {
    wakes: () => {
      throw new Error('disk I/O error')
    },
    claimWake: (h) => void held.add(h),
    releaseWake: (h) => held.delete(h),
    replaceWakes: (hs) => {
      held.clear()
      for (const h of hs) held.add(h)
    },
  }
}

void test('an unread sweep counts every host awake until a release proves one asleep', () => {
  const claims = new WakeClaims({ store: unreadableStore(), activatorUrl: '', logger: new FakeLogger() })
  assert.equal(claims.sweep(), false)
  assert.equal(claims.claimed('a.example.com'), true)
  assert.equal(claims.claimed('b.example.com'), true)
  claims.release('a.example.com')
  assert.equal(claims.claimed('a.example.com'), false, 'released: proven asleep')
  assert.equal(claims.claimed('b.example.com'), true, 'never heard of: still counts as awake')
  claims.claim('a.example.com')
  assert.equal(claims.claimed('a.example.com'), true, 'claimed again: awake')
})

void test('a stop waiting on an unread sweep ends when the activator releases the host', async () => {
  const claims = new WakeClaims({ store: unreadableStore(), activatorUrl: '', logger: new FakeLogger() })
  claims.sweep()
  const stopped = claims.stop('a.example.com', AbortSignal.timeout(10_000))
  claims.release('a.example.com')
  assert.equal(await stopped, true)
  assert.equal(claims.claimed('a.example.com'), false, 'the pass may now trust the stop')
})

void test('PUT /wakes makes the set whole: hosts outside it are asleep', () => {
  const claims = new WakeClaims({ store: unreadableStore(), activatorUrl: '', logger: new FakeLogger() })
  claims.sweep()
  claims.replace(['b.example.com'])
  assert.equal(claims.swept, true)
  assert.equal(claims.claimed('a.example.com'), false)
  assert.equal(claims.claimed('b.example.com'), true)
})

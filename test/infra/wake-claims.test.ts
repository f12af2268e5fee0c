// The claim set the pass consults, when the sweep could not read the
// persisted claims: every host counts as awake until the activator proves
// otherwise, by a release or by its whole awake set.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import Database from 'better-sqlite3'
import type { AppError } from '../../src/errors.js'
import { Registry } from '../../src/infra/registry.js'
import { SqliteClaimStore, WakeClaims, type ClaimStore } from '../../src/infra/wake-claims.js'
import { FakeLogger } from '../domain/fakes.js'
import { tmpDir } from '../helpers/tmp.js'

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

void test('the claim store: claims round-trip across a reopen, keep their first time, and are replaced as a set', async (t) => {
  const dataDir = await tmpDir(t)
  const registry = Registry.open(dataDir)
  t.after(() => registry.close())
  const t0 = new Date('2026-01-01T00:00:00.000Z')
  const t1 = new Date('2026-01-01T01:00:00.000Z')
  const store = SqliteClaimStore.open(registry.file)
  store.claimWake('b.example.com', t0)
  store.claimWake('a.example.com', t0)
  store.claimWake('a.example.com', t1)
  assert.deepEqual(store.wakes(), ['a.example.com', 'b.example.com'])
  assert.equal(store.releaseWake('b.example.com'), true)
  assert.equal(store.releaseWake('b.example.com'), false)
  assert.throws(
    () => store.claimWake('Bad.example.com', t0),
    (err: unknown) => (err as AppError).code === 'invalid_host',
  )
  store.close()

  const again = SqliteClaimStore.open(registry.file)
  t.after(() => again.close())
  assert.deepEqual(again.wakes(), ['a.example.com'])
  again.replaceWakes(['c.example.com', 'a.example.com', 'c.example.com'], t1)
  assert.deepEqual(again.wakes(), ['a.example.com', 'c.example.com'])
  const raw = new Database(registry.file, { readonly: true })
  t.after(() => raw.close())
  assert.deepEqual(raw.prepare('SELECT host, claimed_at AS at FROM wakes ORDER BY host').all(), [
    { host: 'a.example.com', at: t0.toISOString() },
    { host: 'c.example.com', at: t1.toISOString() },
  ])
  assert.throws(
    () => again.replaceWakes(['d.example.com', 'a/b'], t1),
    (err: unknown) => (err as AppError).code === 'invalid_host',
  )
  assert.deepEqual(again.wakes(), ['a.example.com', 'c.example.com'])
  again.replaceWakes([], t1)
  assert.deepEqual(again.wakes(), [])
})

void test('with the sweep unread, PUT /wakes answers a stop waiting on a host it leaves out', async () => {
  const claims = new WakeClaims({ store: unreadableStore(), activatorUrl: '', logger: new FakeLogger() })
  claims.sweep()
  const stopped = claims.stop('x.example.com', AbortSignal.timeout(10_000))
  claims.replace(['y.example.com'])
  assert.equal(await stopped, true)
})

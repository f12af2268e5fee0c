// The watch of the intents' prefix against a real etcd
// (test/helpers/etcd.ts): its callbacks, its end with the caller's signal
// or the store's close, its break and return with etcd, and its failover
// past a dead endpoint.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { EtcdDeployStore } from '../../../src/infra/deploy-etcd/store.js'
import { freePort } from '../../helpers/agent-process.js'
import { EtcdServer } from '../../helpers/etcd.js'
import { changes, live, memLogger, rec, useSharedEtcd, watching } from './fixtures.js'

const shared = useSharedEtcd()

void test('the watch calls back when it is established and on a record; it ends with its signal', async (t) => {
  const { store } = shared.storeFor(t)
  const c = changes()
  const ac = new AbortController()
  const established = c.next('established')
  store.watch(c.onChange, ac.signal)
  await established
  const landed = c.next('a record')
  await store.record(rec('20261130T080102.123Z-aaaaaa'), live())
  await landed
  ac.abort()
  const before = c.count
  await store.record(rec('20261130T080102.124Z-bbbbbb'), live())
  // A record lands in etcd before its txn answers; give the stream a read of a list to deliver anything late.
  await store.list(live())
  assert.equal(c.count, before, 'no call after the signal ended the watch')
})

void test('the watch breaks with etcd, calls back, and comes back on its own when etcd does', async (t) => {
  const etcd = await EtcdServer.forTest(t)
  const { logger, lines } = memLogger()
  const store = new EtcdDeployStore([etcd.url], {
    prefix: '/test/restart/',
    logger,
    watchRetryFirstMs: 50,
    watchRetryMaxMs: 200,
  })
  t.after(() => store.close())
  const c = await watching(t, store)
  const broke = c.next('the break')
  await etcd.kill()
  await broke
  await assert.rejects(store.list(live()), /ECONNREFUSED/)
  const back = c.next('re-established', 10_000)
  await etcd.restart()
  await back
  const landed = c.next('a record after the restart')
  await store.record(rec('20261130T080102.123Z-aaaaaa'), live())
  await landed
  assert.ok(
    lines.some((l) => l.level === 'warn' && /watch broke on .*; polling until it is re-established/.test(l.msg)),
    JSON.stringify(lines),
  )
  assert.ok(lines.filter((l) => /watching \/test\/restart\//.test(l.msg)).length >= 2, 'established twice')
})

void test('the watch fails over past a dead endpoint', async (t) => {
  const dead = `http://127.0.0.1:${await freePort()}`
  const { logger, lines } = memLogger()
  const { store } = shared.storeFor(t, [dead, shared.server.url], {
    logger,
    watchRetryFirstMs: 20,
    watchRetryMaxMs: 50,
  })
  await watching(t, store)
  assert.ok(lines.some((l) => l.msg.includes(`watch not established on ${dead}`)))
  assert.ok(lines.some((l) => l.msg.includes(`on ${shared.server.url}`) && l.level === 'info'))
})

void test('close ends the watch and later calls', async (t) => {
  const { store, prefix } = shared.storeFor(t)
  const c = changes()
  const established = c.next('established')
  store.watch(c.onChange, live())
  await established
  await store.close()
  await assert.rejects(store.list(live()), /the etcd deploy store is closed/)
  const other = new EtcdDeployStore([shared.server.url], { prefix })
  t.after(() => other.close())
  const before = c.count
  await other.record(rec('20261130T080102.123Z-aaaaaa'), live())
  await other.list(live())
  assert.equal(c.count, before, 'no call after close')
})

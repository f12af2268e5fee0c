// The etcd gateway client through the store, against a real etcd
// (test/helpers/etcd.ts): failover past a dead, a stuck and a wrong
// endpoint, the request bound against a stopped member, and a member cut
// off from its quorum refusing at once (the require-leader header), for
// reads and for the watch; an endpoint silent at its first call given up
// after the dial bound and asked last after; a box's streams on one member
// sharing one probe.
import assert from 'node:assert/strict'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { test } from 'node:test'
import { loadLayoutIntent } from '../../../src/domain/intent.js'
import { EtcdGateway } from '../../../src/infra/deploy-etcd/gateway.js'
import { EtcdDeployStore } from '../../../src/infra/deploy-etcd/store.js'
import { freePort } from '../../helpers/agent-process.js'
import { EtcdServer } from '../../helpers/etcd.js'
import { blackhole, live, memLogger, rec, useSharedEtcd, watching } from './fixtures.js'

const shared = useSharedEtcd()

void test('a dead endpoint and a stuck one move the call to the next; the one that answered is asked first after', async (t) => {
  const dead = `http://127.0.0.1:${await freePort()}`
  const stuck = await blackhole(t)
  // The live endpoint's first call has the same dial bound the stuck one runs out: seconds, not a fraction of one.
  const bound = 5_000
  const { store } = shared.storeFor(t, [dead, stuck.url, shared.server.url], {
    requestTimeoutMs: bound,
    dialTimeoutMs: bound,
  })
  const r = rec('20261130T080102.123Z-aaaaaa')
  const t0 = performance.now()
  await store.record(r, live())
  const firstMs = performance.now() - t0
  assert.ok(firstMs >= bound - 50, `the stuck endpoint was given its dial bound (${firstMs} ms)`)
  assert.equal(stuck.requests(), 1)
  assert.deepEqual(await store.list(live()), [r])
  // Straight to the endpoint that answered: the stuck one was not asked again (and the dead one refuses at once).
  assert.equal(stuck.requests(), 1, 'the stuck endpoint was not asked again')
})

void test('an endpoint silent at its first call is given up after the dial bound and asked last after', async (t) => {
  const stuck = await blackhole(t)
  // Both bounds are seconds, so the live endpoint's first call runs out neither; the dial bound is far the shorter.
  const requestTimeoutMs = 60_000
  const { store } = shared.storeFor(t, [stuck.url, shared.server.url], { dialTimeoutMs: 5_000, requestTimeoutMs })
  const r = rec('20261130T080102.123Z-aaaaaa')
  const t0 = performance.now()
  await store.record(r, live())
  const firstMs = performance.now() - t0
  // The request bound is a floor on a call that waits it out; the dial bound gave the endpoint up sooner.
  assert.ok(firstMs < requestTimeoutMs, `the silent endpoint cost ${firstMs} ms`)
  assert.equal(stuck.requests(), 1)
  for (let i = 0; i < 3; i++) assert.deepEqual(await store.list(live()), [r])
  assert.equal(stuck.requests(), 1, 'the silent endpoint was asked last, so not again while the other answers')
})

void test('when no endpoint answers, the error names every endpoint and why', async (t) => {
  const dead = `http://127.0.0.1:${await freePort()}`
  const stuck = await blackhole(t)
  const { store } = shared.storeFor(t, [dead, stuck.url], { requestTimeoutMs: 200 })
  await assert.rejects(store.list(live()), (err: Error) => {
    assert.match(err.message, /^deploy store etcd: no endpoint answered: /)
    assert.match(err.message, new RegExp(`${dead}: .*ECONNREFUSED`))
    assert.match(err.message, new RegExp(`${stuck.url}: no answer within 200 ms`))
    return true
  })
})

void test('an endpoint that is not etcd is named, and the call moves on', async (t) => {
  const { store } = shared.storeFor(t, [`${shared.server.url}/not-here`, shared.server.url])
  await store.record(rec('20261130T080102.123Z-aaaaaa'), live())
  const { store: only } = shared.storeFor(t, [`${shared.server.url}/not-here`])
  await assert.rejects(only.list(live()), /not-here: answered HTTP 404 to \/v3\/kv\/range/)
})

void test('a stopped etcd: the request bound fails the read; the caller signal bounds it too; it reads again once resumed', async (t) => {
  const etcd = await EtcdServer.forTest(t)
  const prefix = '/test/paused/'
  // The bound must fire on the stopped etcd and not on the running one, before and after: seconds, not a fraction.
  const store = new EtcdDeployStore([etcd.url], { prefix, requestTimeoutMs: 5_000, dialTimeoutMs: 5_000 })
  t.after(() => store.close())
  const patient = new EtcdDeployStore([etcd.url], { prefix, requestTimeoutMs: 60_000 })
  t.after(() => patient.close())
  const r = rec('20261130T080102.123Z-aaaaaa')
  await store.record(r, live())
  await etcd.pause()
  try {
    await assert.rejects(store.list(live()), /no endpoint answered: .*no answer within 5000 ms/)
    const t0 = performance.now()
    await assert.rejects(loadLayoutIntent(patient, 'kass-1', undefined, 300), { name: 'TimeoutError' })
    // The caller's bound ended it, not the store's minute.
    assert.ok(performance.now() - t0 < 30_000)
  } finally {
    await etcd.resume()
  }
  assert.deepEqual(await store.list(live()), [r])
})

void test('a member cut off from its quorum answers no old intent: reads and the watch move on, and come back with the quorum', async (t) => {
  const [a, b] = await EtcdServer.clusterForTest(t, 2)
  assert.ok(a !== undefined && b !== undefined)
  const { logger, lines } = memLogger()
  const prefix = '/test/quorum/'
  const store = new EtcdDeployStore([a.url, b.url], {
    prefix,
    logger,
    // Never meant to fire: the member without a leader answers 503 at once, the killed one refuses.
    requestTimeoutMs: 10_000,
    dialTimeoutMs: 10_000,
    watchRetryFirstMs: 50,
    watchRetryMaxMs: 200,
  })
  t.after(() => store.close())
  const r = rec('20261130T080102.123Z-aaaaaa')
  await store.record(r, live())
  const c = await watching(t, store)

  // With b gone, a is up and answering, but has no leader: the partitioned side.
  const broke = c.next('the watch ended by a member without a leader')
  await b.kill()
  await broke
  assert.ok(
    lines.some((l) => l.level === 'warn' && l.msg.includes(`watch broke on ${a.url}: etcd: etcdserver: no leader`)),
    JSON.stringify(lines),
  )
  // A member without a leader says so (an answer, 503) rather than leave the request to its time bound.
  await assert.rejects(store.list(live()), (err: Error) => {
    assert.match(err.message, new RegExp(`${a.url}: answered HTTP 503 to /v3/kv/range: etcdserver: no leader`))
    assert.doesNotMatch(err.message, /no answer within/)
    assert.match(err.message, new RegExp(`${b.url}: .*ECONNREFUSED`))
    return true
  })

  const back = c.next('re-established with the quorum', 30_000)
  await b.restart()
  await back
  assert.deepEqual(await store.list(live()), [r])
  const landed = c.next('a record after the quorum came back')
  await store.record(rec('20261130T080102.124Z-bbbbbb'), live())
  await landed
})

void test("a box's quiet streams on one member share one probe, and its answer stands a while", async (t) => {
  let ranges = 0
  const server = http.createServer((req, res) => {
    if (req.url === '/v3/kv/range') ranges++
    req.resume().on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"count":"0"}'))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => server.close())
  const { port } = server.address() as AddressInfo
  const gateway = new EtcdGateway([`http://127.0.0.1:${port}`])
  t.after(() => gateway.close())
  const ep = gateway.endpoints[0]
  assert.ok(ep !== undefined)

  // Two streams' probes at once, one of whose streams ends meanwhile: one request, the other still answered.
  const gone = new AbortController()
  const both = Promise.allSettled([gateway.probe(ep, live(), 60_000, '/a/'), gateway.probe(ep, gone.signal, 60_000)])
  gone.abort(new Error('the stream ended'))
  const [kept, ended] = await both
  assert.equal(kept.status, 'fulfilled')
  assert.equal(ended.status, 'rejected')
  assert.equal(ranges, 1)
  // Asked again within a third of the bound: the answer stands.
  await gateway.probe(ep, live(), 60_000, '/b/')
  assert.equal(ranges, 1)
})

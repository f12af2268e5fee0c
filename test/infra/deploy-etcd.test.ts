// The etcd deploy store against a real etcd (test/helpers/etcd.ts): records,
// the refusal to overwrite, every kind of garbage a key can hold, failover
// across endpoints, the caller's bound, the watch through a kill and a
// restart, and the CLI's intent commands on it.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import net from 'node:net'
import path from 'node:path'
import { after, before, test, type TestContext } from 'node:test'
import { intentCommand } from '../../src/cli/commands/intent.js'
import { loadConfig } from '../../src/config.js'
import { loadLayoutIntent } from '../../src/domain/intent.js'
import type { Logger } from '../../src/domain/ports.js'
import type { IntentRecord } from '../../src/domain/schemas.js'
import { MAX_RECORD_BYTES } from '../../src/infra/deploy-dir.js'
import { EtcdDeployStore, INTENT_PREFIX, type EtcdStoreOptions } from '../../src/infra/deploy-etcd.js'
import { openDeployStore } from '../../src/infra/deploy-store.js'
import { freePort } from '../helpers/agent-process.js'
import { EtcdServer } from '../helpers/etcd.js'
import { tmpDir } from '../helpers/tmp.js'
import { sink } from '../helpers/sink.js'

const live = () => new AbortController().signal

function rec(id: string, extra: Partial<IntentRecord> = {}): IntentRecord {
  return { id, mode: 'nested', force: false, recordedAt: '2026-11-30T08:01:02.123Z', by: 'ops@test', ...extra }
}

// One etcd for the tests that do not stop it; each test keeps to a prefix of its own.
let shared!: EtcdServer
let sharedDir: string
before(async () => {
  sharedDir = await fs.mkdtemp(path.join((await import('node:os')).tmpdir(), 'layoutd-etcd-'))
  shared = await EtcdServer.start(sharedDir)
})
after(async () => {
  // Unset when start-up failed; the failure is the before hook's.
  await (shared as EtcdServer | undefined)?.kill()
  await fs.rm(sharedDir, { recursive: true, force: true })
})

let prefixes = 0
/** A store on the shared etcd under a prefix no other test uses, closed when the test ends. */
function storeFor(t: TestContext, endpoints: string[] = [shared.url], opts: EtcdStoreOptions = {}) {
  const prefix = `/test/${process.pid}-${++prefixes}/`
  const store = new EtcdDeployStore(endpoints, { prefix, ...opts })
  t.after(() => store.close())
  return { store, prefix }
}

/** A logger that keeps its lines. */
function memLogger() {
  const lines: Array<{ level: string; msg: string; fields: Record<string, unknown> }> = []
  const at = (level: string) => (fields: Record<string, unknown>, msg: string) => void lines.push({ level, msg, fields })
  const logger: Logger = { info: at('info'), warn: at('warn'), error: at('error') }
  return { logger, lines }
}

/** Counts onChange calls and lets a test wait for the next one, bounded. */
function changes() {
  let count = 0
  let waiters: Array<() => void> = []
  const onChange = () => {
    count++
    for (const w of waiters) w()
    waiters = []
  }
  const next = (what: string, ms = 5000) => {
    const seen = count
    return new Promise<void>((resolve, reject) => {
      if (count > seen) return resolve()
      const timer = setTimeout(() => reject(new Error(`${what}: no change within ${ms} ms`)), ms)
      waiters.push(() => {
        clearTimeout(timer)
        resolve()
      })
    })
  }
  return { onChange, next, get count() { return count } }
}

/** A TCP server that accepts and never answers: an endpoint that is up but stuck. */
async function blackhole(t: TestContext): Promise<{ url: string; requests: () => number }> {
  let n = 0
  const sockets = new Set<net.Socket>()
  const srv = net.createServer((s) => {
    sockets.add(s)
    // A request is what arrives; undici may open a connection it never uses.
    s.once('data', () => n++)
    s.on('error', () => sockets.delete(s))
  })
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve))
  t.after(() => {
    for (const s of sockets) s.destroy()
    return new Promise<void>((resolve) => srv.close(() => resolve()))
  })
  const addr = srv.address() as net.AddressInfo
  return { url: `http://127.0.0.1:${addr.port}`, requests: () => n }
}

void test('record then list round-trips every field, sorted by id; the shared selection picks the newest for the box', async (t) => {
  const { store } = storeFor(t)
  assert.deepEqual(await store.list(live()), [], 'nothing recorded yet')
  const b = rec('20261130T080102.124Z-bbbbbb', { mode: 'flat', box: 'kass-1' })
  const a = rec('20261130T080102.123Z-aaaaaa', { force: true })
  const c = rec('20261130T080102.125Z-cccccc', { mode: 'flat', box: 'kass-2' })
  for (const r of [b, a, c]) await store.record(r, live())
  assert.deepEqual(await store.list(live()), [a, b, c])
  assert.deepEqual(await loadLayoutIntent(store, 'kass-1'), { found: true, intent: b })
  assert.deepEqual(await loadLayoutIntent(store, 'kass-3'), { found: true, intent: a })
  assert.equal(store.describe(), `etcd ${shared.url}`)
})

void test('record refuses to overwrite an id, and a repeat of the very same record (a retried txn) is no error', async (t) => {
  const { store, prefix } = storeFor(t)
  const first = rec('20261130T080102.123Z-aaaaaa')
  await store.record(first, live())
  await assert.rejects(
    store.record({ ...first, mode: 'flat' }, live()),
    /intent 20261130T080102\.123Z-aaaaaa is already recorded \(etcd .* key \/test\/.*\/20261130T080102\.123Z-aaaaaa\); refusing to overwrite it/,
  )
  await store.record(first, live())
  assert.deepEqual(await store.list(live()), [first])
  const raw = await shared.range(prefix)
  assert.equal(raw.size, 1)
  assert.deepEqual(JSON.parse(raw.get(`${prefix}${first.id}`) ?? ''), first)
})

void test('record refuses an invalid intent and writes nothing', async (t) => {
  const { store, prefix } = storeFor(t)
  await assert.rejects(store.record({ ...rec('x'), id: 'a/b' }, live()), /refusing to record an invalid intent: id /)
  await assert.rejects(store.record({ ...rec('x'), extra: 1 } as IntentRecord, live()), /unknown field\(s\) extra/)
  assert.equal((await shared.range(prefix)).size, 0)
})

void test('every kind of garbage under the prefix makes list throw, naming the key and what is wrong', async (t) => {
  const good = JSON.stringify(rec('20261130T080102.123Z-aaaaaa'))
  const cases: Array<[string, string | Buffer, RegExp]> = [
    ['20261130T090000.000Z-zzzzzz', 'not json {', /not JSON/],
    ['20261130T090000.000Z-zzzzzz', '', /not JSON/],
    ['20261130T090000.000Z-zzzzzz', Buffer.from([0x22, 0xff, 0xfe, 0x22]), /not JSON: .*(encoded|utf-8|UTF-8)/i],
    ['20261130T090000.000Z-zzzzzz', JSON.stringify({ ...rec('20261130T090000.000Z-zzzzzz'), extra: true }), /not an intent record: unknown field\(s\) extra/],
    ['20261130T090000.000Z-zzzzzz', JSON.stringify({ id: '20261130T090000.000Z-zzzzzz', mode: 'nested' }), /not an intent record: .*force/],
    ['20261130T090000.000Z-zzzzzz', good, /holds id "20261130T080102\.123Z-aaaaaa", so its key must be .*20261130T080102\.123Z-aaaaaa/],
    ['nested/key', good, /the key is not .*<id>/],
    ['20261130T090000.000Z-zzzzzz', Buffer.alloc(MAX_RECORD_BYTES + 1, 0x20), new RegExp(`${MAX_RECORD_BYTES + 1} bytes, over the ${MAX_RECORD_BYTES}-byte limit`)],
  ]
  for (const [suffix, value, why] of cases) {
    const { store, prefix } = storeFor(t)
    await store.record(rec('20261130T080102.123Z-aaaaaa'), live())
    await shared.put(`${prefix}${suffix}`, value)
    await assert.rejects(store.list(live()), (err: Error) => {
      assert.match(err.message, new RegExp(`^intent record etcd ${prefix}${suffix.replace(/\./g, '\\.')}: `))
      assert.match(err.message, why)
      return true
    })
    await assert.rejects(loadLayoutIntent(store, 'kass-1'), why, 'the shared read fails closed too')
  }
})

void test('an aborted signal ends list and record with its reason, and writes nothing', async (t) => {
  const { store, prefix } = storeFor(t)
  const ac = new AbortController()
  ac.abort(new Error('gave up'))
  await assert.rejects(store.list(ac.signal), /gave up/)
  await assert.rejects(store.record(rec('20261130T080102.123Z-aaaaaa'), ac.signal), /gave up/)
  assert.equal((await shared.range(prefix)).size, 0)
})

void test('a dead endpoint and a stuck one move the call to the next; the one that answered is asked first after', async (t) => {
  const dead = `http://127.0.0.1:${await freePort()}`
  const stuck = await blackhole(t)
  const { store } = storeFor(t, [dead, stuck.url, shared.url], { requestTimeoutMs: 300 })
  const r = rec('20261130T080102.123Z-aaaaaa')
  const t0 = performance.now()
  await store.record(r, live())
  const firstMs = performance.now() - t0
  assert.ok(firstMs >= 250, `the stuck endpoint was given its request bound (${firstMs} ms)`)
  assert.equal(stuck.requests(), 1)
  const t1 = performance.now()
  assert.deepEqual(await store.list(live()), [r])
  assert.ok(performance.now() - t1 < 250, 'the second call went straight to the endpoint that answered')
  assert.equal(stuck.requests(), 1, 'the stuck endpoint was not asked again')
})

void test('when no endpoint answers, the error names every endpoint and why', async (t) => {
  const dead = `http://127.0.0.1:${await freePort()}`
  const stuck = await blackhole(t)
  const { store } = storeFor(t, [dead, stuck.url], { requestTimeoutMs: 200 })
  await assert.rejects(store.list(live()), (err: Error) => {
    assert.match(err.message, /^deploy store etcd: no endpoint answered: /)
    assert.match(err.message, new RegExp(`${dead}: .*ECONNREFUSED`))
    assert.match(err.message, new RegExp(`${stuck.url}: no answer within 200 ms`))
    return true
  })
})

void test('an endpoint that is not etcd is named, and the call moves on', async (t) => {
  const { store } = storeFor(t, [`${shared.url}/not-here`, shared.url])
  await store.record(rec('20261130T080102.123Z-aaaaaa'), live())
  const { store: only } = storeFor(t, [`${shared.url}/not-here`])
  await assert.rejects(only.list(live()), /not-here: answered HTTP 404 to \/v3\/kv\/range/)
})

void test('a stopped etcd: the request bound fails the read; the caller signal bounds it too; it reads again once resumed', async (t) => {
  const etcd = await EtcdServer.forTest(t)
  const prefix = '/test/paused/'
  const store = new EtcdDeployStore([etcd.url], { prefix, requestTimeoutMs: 300 })
  t.after(() => store.close())
  const patient = new EtcdDeployStore([etcd.url], { prefix, requestTimeoutMs: 60_000 })
  t.after(() => patient.close())
  const r = rec('20261130T080102.123Z-aaaaaa')
  await store.record(r, live())
  etcd.pause()
  try {
    await assert.rejects(store.list(live()), /no endpoint answered: .*no answer within 300 ms/)
    const t0 = performance.now()
    await assert.rejects(loadLayoutIntent(patient, 'kass-1', undefined, 300), { name: 'TimeoutError' })
    assert.ok(performance.now() - t0 < 5000)
  } finally {
    etcd.resume()
  }
  assert.deepEqual(await store.list(live()), [r])
})

void test('a member cut off from its quorum answers no old intent: reads and the watch move on, and come back with the quorum', async (t) => {
  const [a, b] = await EtcdServer.clusterForTest(t, 2)
  assert.ok(a !== undefined && b !== undefined)
  const { logger, lines } = memLogger()
  const prefix = '/test/quorum/'
  const store = new EtcdDeployStore([a.url, b.url], { prefix, logger, requestTimeoutMs: 2000, watchRetryFirstMs: 50, watchRetryMaxMs: 200 })
  t.after(() => store.close())
  const r = rec('20261130T080102.123Z-aaaaaa')
  await store.record(r, live())
  const ac = new AbortController()
  t.after(() => ac.abort())
  const c = changes()
  const established = c.next('established')
  store.watch(c.onChange, ac.signal)
  await established

  // With b gone, a is up and answering, but has no leader: the partitioned side.
  const broke = c.next('the watch ended by a member without a leader')
  await b.kill()
  await broke
  assert.ok(lines.some((l) => l.level === 'warn' && l.msg.includes(`watch broke on ${a.url}: etcd: etcdserver: no leader`)), JSON.stringify(lines))
  const t0 = performance.now()
  await assert.rejects(store.list(live()), (err: Error) => {
    assert.match(err.message, new RegExp(`${a.url}: answered HTTP 503 to /v3/kv/range: etcdserver: no leader`))
    assert.match(err.message, new RegExp(`${b.url}: .*ECONNREFUSED`))
    return true
  })
  assert.ok(performance.now() - t0 < 1500, 'a member without a leader says so at once rather than time out')

  const back = c.next('re-established with the quorum', 10_000)
  await b.restart()
  await back
  assert.deepEqual(await store.list(live()), [r])
  const landed = c.next('a record after the quorum came back', 1000)
  await store.record(rec('20261130T080102.124Z-bbbbbb'), live())
  await landed
})

void test('the watch calls back when it is established and within a second of a record; it ends with its signal', async (t) => {
  const { store } = storeFor(t)
  const c = changes()
  const ac = new AbortController()
  const established = c.next('established')
  store.watch(c.onChange, ac.signal)
  await established
  const landed = c.next('a record', 1000)
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
  const store = new EtcdDeployStore([etcd.url], { prefix: '/test/restart/', logger, watchRetryFirstMs: 50, watchRetryMaxMs: 200 })
  t.after(() => store.close())
  const ac = new AbortController()
  t.after(() => ac.abort())
  const c = changes()
  const established = c.next('established')
  store.watch(c.onChange, ac.signal)
  await established
  const broke = c.next('the break')
  await etcd.kill()
  await broke
  await assert.rejects(store.list(live()), /ECONNREFUSED/)
  const back = c.next('re-established', 10_000)
  await etcd.restart()
  await back
  const landed = c.next('a record after the restart', 1000)
  await store.record(rec('20261130T080102.123Z-aaaaaa'), live())
  await landed
  assert.ok(lines.some((l) => l.level === 'warn' && /watch broke on .*; polling until it is re-established/.test(l.msg)), JSON.stringify(lines))
  assert.ok(lines.filter((l) => /watching \/test\/restart\//.test(l.msg)).length >= 2, 'established twice')
})

void test('the watch fails over past a dead endpoint', async (t) => {
  const dead = `http://127.0.0.1:${await freePort()}`
  const { logger, lines } = memLogger()
  const { store } = storeFor(t, [dead, shared.url], { logger, watchRetryFirstMs: 20, watchRetryMaxMs: 50 })
  const ac = new AbortController()
  t.after(() => ac.abort())
  const c = changes()
  const established = c.next('established')
  store.watch(c.onChange, ac.signal)
  await established
  assert.ok(lines.some((l) => l.msg.includes(`watch not established on ${dead}`)))
  assert.ok(lines.some((l) => l.msg.includes(`on ${shared.url}`) && l.level === 'info'))
})

void test('close ends the watch and later calls', async (t) => {
  const { store, prefix } = storeFor(t)
  const c = changes()
  const established = c.next('established')
  store.watch(c.onChange, live())
  await established
  await store.close()
  await assert.rejects(store.list(live()), /the etcd deploy store is closed/)
  const other = new EtcdDeployStore([shared.url], { prefix })
  t.after(() => other.close())
  const before = c.count
  await other.record(rec('20261130T080102.123Z-aaaaaa'), live())
  await other.list(live())
  assert.equal(c.count, before, 'no call after close')
})

void test('openDeployStore: etcd when CARLOS_DEPLOYMENT_ETCD names endpoints, and then the directory is not read', async (t) => {
  const root = await tmpDir(t)
  const config = loadConfig({ CARLOS_DEPLOYMENT_DIR: root, CARLOS_DEPLOYMENT_ETCD: `${shared.url}, http://127.0.0.1:1` })
  const store = openDeployStore(config)
  t.after(() => store.close())
  assert.ok(store instanceof EtcdDeployStore)
  assert.equal(store.prefix, INTENT_PREFIX)
  assert.equal(store.describe(), `etcd ${shared.url},http://127.0.0.1:1`)
  await fs.mkdir(path.join(root, 'layout', 'intents'), { recursive: true })
  await fs.writeFile(path.join(root, 'layout', 'intents', 'garbage.json'), '{')
  const r = rec(`20261130T080102.123Z-${process.pid}`)
  await store.record(r, live())
  assert.ok((await store.list(live())).some((x) => x.id === r.id))
  assert.ok((await shared.range(INTENT_PREFIX)).has(`${INTENT_PREFIX}${r.id}`))
  await shared.del(`${INTENT_PREFIX}${r.id}`)
})

void test('layoutd intent migrate|revert|status record into etcd and read from it; status says unreadable when etcd is gone', async (t) => {
  const etcd = await EtcdServer.forTest(t)
  const root = await tmpDir(t)
  const config = loadConfig({ CARLOS_DEPLOYMENT_DIR: root, CARLOS_DEPLOYMENT_ETCD: etcd.url, CARLOS_BOX: 'kass-1' })
  const store = openDeployStore(config)
  t.after(() => store.close())
  let clock = new Date('2026-11-30T08:00:00.000Z')
  const run = async (...argv: string[]) => {
    const out = sink()
    const err = sink()
    const code = await intentCommand(argv, { config, store, stdout: out.stream, stderr: err.stream, now: () => clock, by: 'ops@test' })
    return { code, out: out.text(), err: err.text() }
  }
  assert.equal((await run('migrate')).code, 0)
  clock = new Date('2026-11-30T08:00:01.000Z')
  const revert = await run('revert', '--box', 'kass-1')
  assert.equal(revert.code, 0, revert.err)
  assert.match(revert.out, /^recorded intent 20261130T080001\.000Z-[0-9a-f]{6}: flat for box kass-1\n$/)
  const keys = [...(await etcd.range(INTENT_PREFIX)).keys()]
  assert.equal(keys.length, 2)
  assert.ok(keys.every((k) => k.startsWith(INTENT_PREFIX)))
  const status = await run('status', '--json')
  assert.equal(status.code, 0)
  const s = JSON.parse(status.out) as { mode: string; intent: IntentRecord }
  assert.equal(s.mode, 'flat')
  assert.equal(s.intent.box, 'kass-1')
  assert.equal(await fs.readdir(root).then((d) => d.length), 0, 'the directory store was not written')

  await etcd.kill()
  const down = await run('status', '--json')
  assert.equal(down.code, 1)
  const d = JSON.parse(down.out) as { mode: string; error: string }
  assert.equal(d.mode, 'unreadable')
  assert.match(d.error, new RegExp(`^etcd ${etcd.url}: deploy store etcd: no endpoint answered: .*ECONNREFUSED`))
  const refused = await run('migrate')
  assert.equal(refused.code, 1)
  assert.match(refused.err, /no endpoint answered/)
})

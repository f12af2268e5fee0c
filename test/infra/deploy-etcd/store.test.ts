// The etcd deploy store against a real etcd (test/helpers/etcd.ts): records,
// the refusal to overwrite, every kind of garbage a key can hold, the
// caller's signal, openDeployStore choosing etcd, and the CLI's intent
// commands on it.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test } from 'node:test'
import { intentCommand } from '../../../src/cli/commands/intent.js'
import { loadConfig } from '../../../src/config.js'
import { loadLayoutIntent } from '../../../src/domain/intent.js'
import type { IntentRecord } from '../../../src/domain/schemas.js'
import { MAX_RECORD_BYTES } from '../../../src/infra/deploy-dir.js'
import { EtcdDeployStore, INTENT_PREFIX } from '../../../src/infra/deploy-etcd/store.js'
import { openDeployStore } from '../../../src/infra/deploy-store.js'
import { EtcdServer } from '../../helpers/etcd.js'
import { sink } from '../../helpers/sink.js'
import { tmpDir } from '../../helpers/tmp.js'
import { live, rec, useSharedEtcd } from './fixtures.js'

const shared = useSharedEtcd()

void test('record then list round-trips every field, sorted by id; the shared selection picks the newest for the box', async (t) => {
  const { store } = shared.storeFor(t)
  assert.deepEqual(await store.list(live()), [], 'nothing recorded yet')
  const b = rec('20261130T080102.124Z-bbbbbb', { mode: 'flat', box: 'kass-1' })
  const a = rec('20261130T080102.123Z-aaaaaa', { force: true })
  const c = rec('20261130T080102.125Z-cccccc', { mode: 'flat', box: 'kass-2' })
  for (const r of [b, a, c]) await store.record(r, live())
  assert.deepEqual(await store.list(live()), [a, b, c])
  assert.deepEqual(await loadLayoutIntent(store, 'kass-1'), { found: true, intent: b })
  assert.deepEqual(await loadLayoutIntent(store, 'kass-3'), { found: true, intent: a })
  assert.equal(store.describe(), `etcd ${shared.server.url}`)
})

void test('record refuses to overwrite an id, and a repeat of the very same record (a retried txn) is no error', async (t) => {
  const { store, prefix } = shared.storeFor(t)
  const first = rec('20261130T080102.123Z-aaaaaa')
  await store.record(first, live())
  await assert.rejects(
    store.record({ ...first, mode: 'flat' }, live()),
    /intent 20261130T080102\.123Z-aaaaaa is already recorded \(etcd .* key \/test\/.*\/20261130T080102\.123Z-aaaaaa\); refusing to overwrite it/,
  )
  await store.record(first, live())
  assert.deepEqual(await store.list(live()), [first])
  const raw = await shared.server.range(prefix)
  assert.equal(raw.size, 1)
  assert.deepEqual(JSON.parse(raw.get(`${prefix}${first.id}`) ?? ''), first)
})

void test('record refuses an invalid intent and writes nothing', async (t) => {
  const { store, prefix } = shared.storeFor(t)
  await assert.rejects(store.record({ ...rec('x'), id: 'a/b' }, live()), /refusing to record an invalid intent: id /)
  await assert.rejects(store.record({ ...rec('x'), extra: 1 } as IntentRecord, live()), /unknown field\(s\) extra/)
  assert.equal((await shared.server.range(prefix)).size, 0)
})

void test('every kind of garbage under the prefix makes list throw, naming the key and what is wrong', async (t) => {
  const good = JSON.stringify(rec('20261130T080102.123Z-aaaaaa'))
  const cases: Array<[string, string | Buffer, RegExp]> = [
    ['20261130T090000.000Z-zzzzzz', 'not json {', /not JSON/],
    ['20261130T090000.000Z-zzzzzz', '', /not JSON/],
    ['20261130T090000.000Z-zzzzzz', Buffer.from([0x22, 0xff, 0xfe, 0x22]), /not JSON: .*(encoded|utf-8|UTF-8)/i],
    [
      '20261130T090000.000Z-zzzzzz',
      JSON.stringify({ ...rec('20261130T090000.000Z-zzzzzz'), extra: true }),
      /not an intent record: unknown field\(s\) extra/,
    ],
    [
      '20261130T090000.000Z-zzzzzz',
      JSON.stringify({ id: '20261130T090000.000Z-zzzzzz', mode: 'nested' }),
      /not an intent record: .*force/,
    ],
    [
      '20261130T090000.000Z-zzzzzz',
      good,
      /holds id "20261130T080102\.123Z-aaaaaa", so its key must be .*20261130T080102\.123Z-aaaaaa/,
    ],
    ['nested/key', good, /the key is not .*<id>/],
    [
      '20261130T090000.000Z-zzzzzz',
      Buffer.alloc(MAX_RECORD_BYTES + 1, 0x20),
      new RegExp(`${MAX_RECORD_BYTES + 1} bytes, over the ${MAX_RECORD_BYTES}-byte limit`),
    ],
  ]
  for (const [suffix, value, why] of cases) {
    const { store, prefix } = shared.storeFor(t)
    await store.record(rec('20261130T080102.123Z-aaaaaa'), live())
    await shared.server.put(`${prefix}${suffix}`, value)
    await assert.rejects(store.list(live()), (err: Error) => {
      assert.match(err.message, new RegExp(`^intent record etcd ${prefix}${suffix.replace(/\./g, '\\.')}: `))
      assert.match(err.message, why)
      return true
    })
    await assert.rejects(loadLayoutIntent(store, 'kass-1'), why, 'the shared read fails closed too')
  }
})

void test('an aborted signal ends list and record with its reason, and writes nothing', async (t) => {
  const { store, prefix } = shared.storeFor(t)
  const ac = new AbortController()
  ac.abort(new Error('gave up'))
  await assert.rejects(store.list(ac.signal), /gave up/)
  await assert.rejects(store.record(rec('20261130T080102.123Z-aaaaaa'), ac.signal), /gave up/)
  assert.equal((await shared.server.range(prefix)).size, 0)
})

void test('openDeployStore: etcd when CARLOS_DEPLOYMENT_ETCD names endpoints, and then the directory is not read', async (t) => {
  const root = await tmpDir(t)
  const config = loadConfig({
    CARLOS_DEPLOYMENT_DIR: root,
    CARLOS_DEPLOYMENT_ETCD: `${shared.server.url}, http://127.0.0.1:1`,
  })
  const store = await openDeployStore(config)
  t.after(() => store.close())
  assert.ok(store instanceof EtcdDeployStore)
  assert.equal(store.prefix, INTENT_PREFIX)
  assert.equal(store.describe(), `etcd ${shared.server.url},http://127.0.0.1:1`)
  await fs.mkdir(path.join(root, 'layout', 'intents'), { recursive: true })
  await fs.writeFile(path.join(root, 'layout', 'intents', 'garbage.json'), '{')
  const r = rec(`20261130T080102.123Z-${process.pid}`)
  await store.record(r, live())
  assert.ok((await store.list(live())).some((x) => x.id === r.id))
  assert.ok((await shared.server.range(INTENT_PREFIX)).has(`${INTENT_PREFIX}${r.id}`))
  await shared.server.del(`${INTENT_PREFIX}${r.id}`)
})

void test('layoutd intent migrate|revert|status record into etcd and read from it; status says unreadable when etcd is gone', async (t) => {
  const etcd = await EtcdServer.forTest(t)
  const root = await tmpDir(t)
  const config = loadConfig({ CARLOS_DEPLOYMENT_DIR: root, CARLOS_DEPLOYMENT_ETCD: etcd.url, CARLOS_BOX: 'kass-1' })
  const store = await openDeployStore(config)
  t.after(() => store.close())
  let clock = new Date('2026-11-30T08:00:00.000Z')
  const run = async (...argv: string[]) => {
    const out = sink()
    const err = sink()
    const code = await intentCommand(argv, {
      config,
      store,
      stdout: out.stream,
      stderr: err.stream,
      now: () => clock,
      by: 'ops@test',
    })
    return { code, out: out.text(), err: err.text() }
  }
  assert.equal((await run('migrate', '--fleet')).code, 0)
  clock = new Date('2026-11-30T08:00:01.000Z')
  // etcd knows the boxes: one no agent has reported is refused, unless the operator says it is new.
  const unknown = await run('revert', '--box', 'kass-1')
  assert.equal(unknown.code, 1)
  assert.match(unknown.err, /no agent has reported box kass-1 \(0 boxes report;.*--new-box/)
  assert.equal((await etcd.range(INTENT_PREFIX)).size, 1, 'nothing recorded on the refusal')
  const revert = await run('revert', '--box', 'kass-1', '--new-box')
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
  const refused = await run('migrate', '--fleet')
  assert.equal(refused.code, 1)
  assert.match(refused.err, /no endpoint answered/)
})

void test('a prefix this process read records under is held to it: emptied, it throws deploy_store_emptied; a compaction drops no key and reads as before', async (t) => {
  const { store, prefix } = shared.storeFor(t)
  const a = rec('20261130T080102.123Z-aaaaaa', { mode: 'flat', box: 'kass-1' })
  await store.record(a, live())
  assert.deepEqual(await store.list(live()), [a])
  const res = await fetch(`${shared.server.url}/v3/kv/range`, {
    method: 'POST',
    signal: AbortSignal.timeout(30_000),
    body: JSON.stringify({ key: Buffer.from(prefix).toString('base64') }),
  })
  const revision = ((await res.json()) as { header: { revision: string } }).header.revision
  const compacted = await fetch(`${shared.server.url}/v3/kv/compaction`, {
    method: 'POST',
    signal: AbortSignal.timeout(30_000),
    body: JSON.stringify({ revision }),
  })
  assert.equal(compacted.status, 200)
  assert.deepEqual(await store.list(live()), [a], 'compacted, the key is still there')

  await shared.server.del(`${prefix}${a.id}`)
  await assert.rejects(store.list(live()), (err: Error) => {
    assert.equal((err as { code?: string }).code, 'deploy_store_emptied')
    assert.match(err.message, /restart the agent/)
    return true
  })
  // A new process reads the prefix as it finds it: nothing recorded.
  const fresh = new EtcdDeployStore([shared.server.url], { prefix })
  t.after(() => fresh.close())
  assert.deepEqual(await fresh.list(live()), [])
})

void test('an etcd wiped and started again in its place reads deploy_store_replaced until the agent restarts', async (t) => {
  const server = await EtcdServer.forTest(t)
  const store = new EtcdDeployStore([server.url], { prefix: '/test/wiped/' })
  t.after(() => store.close())
  // A store in use has moved its revision on; a wiped one starts again from 1.
  const a = rec('20261130T080102.123Z-aaaaaa', { mode: 'flat', box: 'kass-1' })
  for (let i = 0; i < 5; i++) await server.put(`/other/${i}`, 'x')
  await store.record(a, live())
  assert.deepEqual(await store.list(live()), [a])
  await server.kill()
  await fs.rm(server.dataDir, { recursive: true, force: true })
  await server.restart()
  await store.record(rec('20261130T080102.124Z-bbbbbb', { mode: 'nested' }), live())
  await assert.rejects(store.list(live()), { code: 'deploy_store_replaced' })
  await assert.rejects(store.list(live()), { code: 'deploy_store_replaced' }, 'it stays so')
})

import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test, type TestContext } from 'node:test'
import { loadConfig } from '../../src/config.js'
import type { IntentRecord } from '../../src/domain/schemas.js'
import { DirDeployStore, MAX_RECORD_BYTES } from '../../src/infra/deploy-dir.js'
import { openAgentDeployStore, openDeployStore } from '../../src/infra/deploy-store.js'
import { FakeLogger } from '../domain/fakes.js'
import { tmpDir } from '../helpers/tmp.js'

const live = () => new AbortController().signal

function rec(id: string, extra: Partial<IntentRecord> = {}): IntentRecord {
  return { id, mode: 'nested', force: false, recordedAt: '2026-11-30T08:01:02.123Z', by: 'ops@test', ...extra }
}

async function setup(t: TestContext) {
  const root = await tmpDir(t)
  const store = new DirDeployStore(root)
  const dir = path.join(root, 'layout', 'intents')
  const put = async (name: string, body: string) => {
    await fs.mkdir(dir, { recursive: true })
    await fs.writeFile(path.join(dir, name), body)
  }
  return { root, store, dir, put }
}

void test('record then list round-trips every field, fleet-wide and for one box', async (t) => {
  const { store } = await setup(t)
  const a = rec('20261130T080102.123Z-aaaaaa', { force: true })
  const b = rec('20261130T080102.124Z-bbbbbb', { mode: 'flat', box: 'kass-1' })
  await store.record(a, live())
  await store.record(b, live())
  assert.deepEqual(await store.list(live()), [a, b])
})

void test('a store where nothing was ever recorded lists no intents', async (t) => {
  const { store } = await setup(t)
  assert.deepEqual(await store.list(live()), [])
})

void test('list sorts by id whatever order the files were written in', async (t) => {
  const { store } = await setup(t)
  const ids = ['20261130T090000.000Z-000001', '20261130T080000.000Z-ffffff', '20261130T080000.000Z-000000']
  for (const id of ids) await store.record(rec(id), live())
  assert.deepEqual(
    (await store.list(live())).map((r) => r.id),
    ['20261130T080000.000Z-000000', '20261130T080000.000Z-ffffff', '20261130T090000.000Z-000001'],
  )
})

void test('record is durable: only <id>.json is left, no temp file, and the directory is created', async (t) => {
  const { store, dir } = await setup(t)
  const r = rec('20261130T080102.123Z-abcdef')
  await store.record(r, live())
  assert.deepEqual(await fs.readdir(dir), [`${r.id}.json`])
  assert.deepEqual(JSON.parse(await fs.readFile(path.join(dir, `${r.id}.json`), 'utf8')), r)
})

void test('record refuses to overwrite an existing id and leaves the first record as it was', async (t) => {
  const { store, dir } = await setup(t)
  const first = rec('20261130T080102.123Z-abcdef')
  await store.record(first, live())
  await assert.rejects(store.record(rec(first.id, { mode: 'flat' }), live()), /already recorded.*refusing to overwrite/)
  assert.deepEqual(await fs.readdir(dir), [`${first.id}.json`])
  assert.deepEqual(await store.list(live()), [first])
})

void test('record refuses a record the schema refuses, and writes nothing', async (t) => {
  const { store, dir } = await setup(t)
  await assert.rejects(
    store.record(rec('bad/id'), live()),
    /refusing to record an invalid intent: id must be letters, digits, dots, underscores and hyphens only/,
  )
  const extra = { ...rec('20261130T080102.123Z-abcdef'), color: 'red' } as IntentRecord
  await assert.rejects(store.record(extra, live()), /unknown field\(s\) color/)
  await assert.rejects(store.record(rec('x.json.tmp-1-ab'), live()), /may not contain ".tmp-"/)
  await assert.rejects(fs.readdir(dir), { code: 'ENOENT' })
})

void test('temp files and names that are not .json are ignored', async (t) => {
  const { store, put } = await setup(t)
  const r = rec('20261130T080102.123Z-abcdef')
  await store.record(r, live())
  await put(`${r.id}.json.tmp-123-deadbeef`, '{half a rec')
  await put('20261130T090000.000Z-000000.tmp-9.json', 'not json either')
  await put('README', 'notes')
  assert.deepEqual(await store.list(live()), [r])
})

void test('a malformed record makes list throw, naming the file and what is wrong', async (t) => {
  const cases: Array<[string, string, RegExp]> = [
    ['bad JSON', '{"id": ', /not JSON/],
    [
      'schema failure',
      JSON.stringify({ id: 'x', mode: 'nested', recordedAt: 'now', by: 'me' }),
      /not an intent record: .*force/,
    ],
    ['wrong field type', JSON.stringify({ ...rec('x'), force: 'yes' }), /force must be boolean/],
    ['not an object', '[1]', /not an intent record: record must be object/],
    [
      'name/id mismatch',
      JSON.stringify(rec('20261130T000000.000Z-000000')),
      /holds id "20261130T000000.000Z-000000", so it must be named/,
    ],
  ]
  for (const [what, body, why] of cases) {
    await t.test(what, async (t) => {
      const { store, put, dir } = await setup(t)
      await store.record(rec('20261130T080102.123Z-abcdef'), live())
      await put('x.json', body)
      await assert.rejects(store.list(live()), (err: Error) => {
        assert.match(err.message, why)
        assert.ok(err.message.includes(path.join(dir, 'x.json')), err.message)
        return true
      })
    })
  }
})

void test('an oversized record makes list throw without reading it whole', async (t) => {
  const { store, put, dir } = await setup(t)
  await put('big.json', JSON.stringify({ ...rec('big'), by: 'x'.repeat(MAX_RECORD_BYTES) }))
  await assert.rejects(store.list(live()), (err: Error) => {
    assert.ok(err.message.includes(path.join(dir, 'big.json')), err.message)
    assert.match(err.message, /over the 65536-byte limit/)
    return true
  })
})

void test('a directory entry named .json that is not a file makes list throw, naming it', async (t) => {
  const { store, dir } = await setup(t)
  await fs.mkdir(path.join(dir, 'sub.json'), { recursive: true })
  await assert.rejects(
    store.list(live()),
    (err: Error) => err.message.includes(path.join(dir, 'sub.json')) && /cannot read/.test(err.message),
  )
})

void test('an intents path that cannot be listed (a file: ENOTDIR) throws with the path, not "no intents"', async (t) => {
  const { root, store, dir } = await setup(t)
  await fs.mkdir(path.join(root, 'layout'))
  await fs.writeFile(dir, 'not a directory')
  await assert.rejects(store.list(live()), (err: Error) => {
    assert.ok(err.message.includes(dir), err.message)
    assert.match(err.message, /ENOTDIR/)
    return true
  })
})

void test('an already aborted signal rejects list and record, and record writes nothing', async (t) => {
  const { store, dir } = await setup(t)
  await store.record(rec('20261130T080102.123Z-abcdef'), live())
  const ac = new AbortController()
  ac.abort(new Error('gave up'))
  await assert.rejects(store.list(ac.signal), /gave up/)
  await assert.rejects(store.record(rec('20261130T090000.000Z-abcdef'), ac.signal), /gave up/)
  assert.deepEqual(await fs.readdir(dir), ['20261130T080102.123Z-abcdef.json'])
})

void test('describe names the directory; close is harmless', async (t) => {
  const { root, store } = await setup(t)
  assert.equal(store.describe(), `dir ${root}`)
  await store.close()
})

void test('openDeployStore: the directory store when etcd is not named', async (t) => {
  const root = await tmpDir(t)
  const store = await openDeployStore(loadConfig({ CARLOS_DEPLOYMENT_DIR: root }))
  assert.ok(store instanceof DirDeployStore)
  assert.equal(store.describe(), `dir ${root}`)
})

void test('a FIFO planted under a record name is refused at once, not waited on', async (t) => {
  const { store, dir } = await setup(t)
  await fs.mkdir(dir, { recursive: true })
  execFileSync('mkfifo', [path.join(dir, '20261130T080000.000Z-ffffff.json')])
  await assert.rejects(
    store.list(AbortSignal.timeout(5_000)),
    /20261130T080000\.000Z-ffffff\.json: cannot read: is not a regular file/,
  )
})

void test('a store this process read is held to it: its root or intents directory gone, or every record gone, throws by code', async (t) => {
  const { root, store } = await setup(t)
  const a = rec('20261130T080102.123Z-aaaaaa', { mode: 'flat' })
  await store.record(a, live())
  assert.deepEqual(await store.list(live()), [a])
  const intents = path.join(root, 'layout', 'intents')

  await fs.rm(path.join(intents, `${a.id}.json`))
  await assert.rejects(store.list(live()), { code: 'deploy_store_emptied' })
  // A record again is a store that reads again.
  const b = rec('20261130T080102.124Z-bbbbbb', { mode: 'nested' })
  await store.record(b, live())
  assert.deepEqual(await store.list(live()), [b])

  await fs.rm(intents, { recursive: true })
  await assert.rejects(store.list(live()), { code: 'deploy_store_vanished' })
  await fs.rm(root, { recursive: true })
  await assert.rejects(store.list(live()), (err: Error) => {
    assert.equal((err as { code?: string }).code, 'deploy_store_vanished')
    assert.match(err.message, new RegExp(`${root} is gone`))
    return true
  })
  // Another process (the CLI, a restarted agent) reads it as it finds it: never recorded.
  assert.deepEqual(await new DirDeployStore(root).list(live()), [])
})

void test('the agent opens a store that cannot be opened yet at each read: unreadable by code until it opens, then that store, its watch started', async (t) => {
  const root = await tmpDir(t)
  const config = loadConfig({ CARLOS_DEPLOYMENT_DIR: root })
  let fail = true
  let opens = 0
  const open = (c: typeof config) => {
    opens++
    if (fail) return Promise.reject(new Error('CARLOS_ETCD_PASSWORD_FILE /x cannot be read: ENOENT'))
    return openDeployStore(c)
  }
  const logger = new FakeLogger()
  const store = await openAgentDeployStore(config, logger, open)
  t.after(() => store.close())
  assert.match(logger.msgs()[0] ?? '', /the deploy store cannot be opened: CARLOS_ETCD_PASSWORD_FILE/)
  let changes = 0
  store.watch?.(() => changes++, new AbortController().signal)
  await assert.rejects(store.list(live()), (err: Error) => {
    assert.equal((err as { code?: string }).code, 'deploy_store_unopened')
    assert.match(err.message, /^deploy_store_unopened: the deploy store cannot be opened: CARLOS_ETCD_PASSWORD_FILE/)
    return true
  })
  assert.equal(opens, 2, 'opened again at the read')
  fail = false
  const a = rec('20261130T080102.123Z-aaaaaa')
  await new DirDeployStore(root).record(a, live())
  assert.deepEqual(await store.list(live()), [a])
  assert.equal(store.describe(), `dir ${root}`)
  assert.equal(changes, 1, 'the watch asked for meanwhile hears the store open')
  await store.list(live())
  assert.equal(opens, 3, 'once open, not opened again')
})

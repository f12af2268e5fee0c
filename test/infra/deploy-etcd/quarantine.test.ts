// Record repair on the real etcd (design §7.4): quarantine moves a corrupt
// record aside and creates its replacement in one transaction (one
// revision: no read between them), refuses when the record changed or the
// place aside is taken, and the CLI's quarantine, --supersede, --dry-run and
// history work against it.
import assert from 'node:assert/strict'
import path from 'node:path'
import { test } from 'node:test'
import { intentCommand } from '../../../src/cli/commands/intent.js'
import { loadConfig } from '../../../src/config.js'
import { sink } from '../../helpers/sink.js'
import { live, rec, useSharedEtcd } from './fixtures.js'

const etcd = useSharedEtcd()

void test('quarantine: the record aside, its key gone and the replacement created in one revision', async (t) => {
  const { store, prefix } = etcd.storeFor(t)
  await store.record(rec('20261201T000000.000Z-aaaaaa', { mode: 'flat' }), live())
  const bad = '20261201T000001.000Z-bbbbbb'
  await etcd.server.put(`${prefix}${bad}`, '{"id": "half')
  const contents = await store.inspect(live())
  assert.deepEqual(
    contents.unreadable.map((u) => [u.id, u.where]),
    [[bad, `etcd ${prefix}${bad}`]],
  )
  await assert.rejects(store.list(live()), /not JSON/)
  const repl = rec('20261201T000002.000Z-cccccc', { message: 'the half-written one' })
  const where = await store.quarantine(bad, repl, live())
  const aside = `${store.quarantinePrefix}${bad}`
  assert.equal(where, `etcd ${aside}`)
  assert.deepEqual(
    (await store.list(live())).map((r) => r.id),
    ['20261201T000000.000Z-aaaaaa', repl.id],
  )
  assert.deepEqual(await store.listQuarantined(live()), [{ id: bad, where, text: '{"id": "half' }])
  // One transaction: the key aside and the replacement were made at one revision.
  const revs = await revisions(etcd.server.url, [aside, `${prefix}${repl.id}`])
  assert.equal(revs[0], revs[1])
  // Again: the record is gone, and a second one of that id could not go to the same place.
  await assert.rejects(store.quarantine(bad, undefined, live()), /no record .* to quarantine/)
  await etcd.server.put(`${prefix}${bad}`, 'again')
  await assert.rejects(store.quarantine(bad, undefined, live()), /already quarantined at etcd/)
})

/** Each key's create_revision. */
async function revisions(url: string, keys: string[]): Promise<string[]> {
  const out: string[] = []
  for (const key of keys) {
    const res = await fetch(`${url}/v3/kv/range`, {
      method: 'POST',
      signal: AbortSignal.timeout(30_000),
      body: JSON.stringify({ key: Buffer.from(key).toString('base64') }),
    })
    const body = (await res.json()) as { kvs?: Array<{ create_revision?: string }> }
    out.push(body.kvs?.[0]?.create_revision ?? 'none')
  }
  return out
}

void test('layoutd intent on etcd: --dry-run refuses as migrate does; --supersede repairs; history marks it', async (t) => {
  const { store, prefix } = etcd.storeFor(t)
  const config = loadConfig({
    CARLOS_DEPLOYMENT_ETCD: etcd.server.url,
    CARLOS_BOX: 'web-01',
    CARLOS_DATA_DIR: path.join('/tmp', 'unused'),
  })
  const run = async (...argv: string[]) => {
    const out = sink()
    const err = sink()
    const code = await intentCommand(argv, { config, store, stdout: out.stream, stderr: err.stream, by: 'ops@test' })
    return { code, out: out.text(), err: err.text() }
  }
  assert.equal((await run('revert', '--fleet', '-m', 'start flat')).code, 0)
  const bad = '29991231T000000.000Z-bad'
  await etcd.server.put(`${prefix}${bad}`, 'garbage')
  const real = await run('migrate', '--fleet')
  const dry = await run('migrate', '--fleet', '--dry-run')
  assert.equal(real.code, 1)
  assert.equal(dry.code, 1)
  assert.equal(dry.err, real.err)
  assert.match(real.err, new RegExp(`etcd ${prefix}${bad}: not JSON`))
  const fixed = await run('migrate', '--fleet', '--supersede', bad, '-m', 'over the garbage')
  assert.equal(fixed.code, 0, fixed.err)
  assert.match(
    fixed.out,
    new RegExp(`^quarantined intent record ${bad}: moved to etcd ${store.quarantinePrefix}${bad}`),
  )
  const records = await store.list(live())
  assert.equal(records.at(-1)?.mode, 'nested')
  assert.equal(records.at(-1)?.message, 'over the garbage')
  const h = await run('history')
  assert.equal(h.code, 0, h.err)
  const lines = h.out.trim().split('\n')
  assert.match(lines[1] ?? '', /nested +\(fleet\) +ops@test .* over the garbage$/)
  assert.match(lines[2] ?? '', new RegExp(`^${bad} .*\\[quarantined: etcd `))
  assert.match(lines[3] ?? '', /flat +\(fleet\) +ops@test .* start flat$/)
})

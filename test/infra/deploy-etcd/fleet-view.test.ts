// `layoutd fleet status` against the real etcd (design §7.3): --wait fails,
// naming the box, when a box it waits on is gone (its agent stopped, or its
// lease expired), the box kept in the table as gone; and the table is shown
// with an unreadable record named above it.
import assert from 'node:assert/strict'
import path from 'node:path'
import { test } from 'node:test'
import { fleetCommand } from '../../../src/cli/commands/fleet.js'
import { loadConfig } from '../../../src/config.js'
import type { BoxSummary } from '../../../src/domain/box-summary.js'
import { sink } from '../../helpers/sink.js'
import { until } from '../../helpers/until.js'
import { live, rec, useSharedEtcd } from './fixtures.js'

const etcd = useSharedEtcd()

function summary(box: string, intent: string, converged: boolean, counts: Record<string, number>): BoxSummary {
  return {
    box,
    version: '0.1.0',
    intent,
    mode: 'flat',
    converged,
    counts,
    held: 0,
    leg: { running: !converged, pending: false, lastRunAt: null },
    at: new Date().toISOString(),
  }
}

void test('fleet status --wait on etcd: a box whose agent goes before it converged fails the wait, named', async (t) => {
  const reader = etcd.storeFor(t)
  const config = loadConfig({
    CARLOS_DEPLOYMENT_ETCD: etcd.server.url,
    CARLOS_BOX: 'ops-1',
    CARLOS_DATA_DIR: path.join('/tmp', 'unused'),
  })
  const id = '20261201T000000.000Z-aaaaaa'
  await reader.store.record(rec(id, { mode: 'flat' }), live())
  const web1 = etcd.storeFor(t, undefined, { prefix: reader.prefix })
  const web2 = etcd.storeFor(t, undefined, { prefix: reader.prefix })
  await web1.store.publishBox(summary('web-01', id, true, { flat: 3 }), live())
  await web2.store.publishBox(summary('web-02', id, false, { nested: 300 }), live())
  const out = sink()
  const err = sink()
  const waiting = fleetCommand(['status', '--wait', '--timeout', '60'], {
    config,
    store: reader.store,
    stdout: out.stream,
    stderr: err.stream,
    everyMs: 50,
  })
  // The wait has read the fleet, web-02 in it, before web-02 goes: its first progress line says so.
  await until('the wait to read the fleet once', () => err.text().startsWith('waiting: '))
  // web-02's agent is gone: its lease with it (revoked here; a killed one's expires).
  await web2.store.close()
  const code = await waiting
  assert.equal(code, 1, out.text())
  assert.match(err.text(), /box web-02 is gone since \S+ \(its agent stopped\)/)
  assert.match(out.text(), /^web-02 +\S+ +flat +gone /m)

  // A record that cannot be read: the table still, the record named above it.
  await etcd.server.put(`${reader.prefix}29990101T000000.000Z-bad`, 'garbage')
  const o2 = sink()
  const code2 = await fleetCommand(['status'], {
    config,
    store: reader.store,
    stdout: o2.stream,
    stderr: sink().stream,
  })
  assert.equal(code2, 1)
  assert.match(o2.text(), /^intent record 29990101T000000\.000Z-bad cannot be read \(etcd \S+: not JSON/)
  assert.match(o2.text(), /\nweb-01 +\S+ +flat +unreadable /)
})

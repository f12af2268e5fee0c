// The status body (report-json.ts): serialized once per version, and let go
// once nobody has read it for a while.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { FastifyReply } from 'fastify'
import type { LayoutReport } from '../../src/domain/schemas.js'
import { BODY_KEPT_UNREAD_MS, StatusJson } from '../../src/report/report-json.js'

const report: LayoutReport = {
  box: 'b1',
  mode: 'nested',
  default: false,
  defaultBlocked: '',
  rows: { 'a.example.com': { layout: 'nested', code: '', reason: '', note: '' } },
  leg: { running: false, pending: false, lastRun: null, retryAt: null },
  warnings: [],
}

const reply = { serializeInput: (o: unknown) => JSON.stringify(o) } as unknown as FastifyReply

void test('a body is serialized once per version, kept while read, and serialized again after it went unread', async (t) => {
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'] })
  let builds = 0
  const json = new StatusJson(() => {
    builds++
    return Promise.resolve({ report, tag: 'e.1' })
  })
  const first = await json.bytes(reply, 'e.1')
  assert.deepEqual((JSON.parse(first.toString()) as LayoutReport).rows, report.rows)
  assert.equal(await json.bytes(reply, 'e.1'), first)
  assert.equal(builds, 1)
  // Each read puts the letting go off.
  t.mock.timers.tick(BODY_KEPT_UNREAD_MS - 1)
  assert.equal(await json.bytes(reply, 'e.1'), first)
  t.mock.timers.tick(BODY_KEPT_UNREAD_MS - 1)
  assert.equal(await json.bytes(reply, 'e.1'), first)
  assert.equal(builds, 1)
  t.mock.timers.tick(BODY_KEPT_UNREAD_MS)
  const again = await json.bytes(reply, 'e.1')
  assert.notEqual(again, first, 'serialized again')
  assert.deepEqual(again, first)
  assert.equal(builds, 2)
})

// The agent's leg through a real agent: what a run leaves in the report
// and in the row gauges.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { Writable } from 'node:stream'
import { test } from 'node:test'
import pino from 'pino'
import { flatPaths } from '../../src/domain/paths.js'
import { addFlat, agentBox, recordIntent } from '../helpers/agent.js'
import { until } from '../helpers/until.js'

void test('a host held for a second name on one of its files is counted in held_hosts and reported fenced', async (t) => {
  const b = await agentBox(t, { env: { CARLOS_LAYOUT_DEFAULT: 'flat' } })
  await addFlat(b, 'a.example.com')
  await addFlat(b, 'b.example.com')
  const dir = flatPaths(b.config, 'a.example.com').dir
  await fs.link(path.join(dir, 'host.txt'), path.join(dir, 'second-name'))
  await b.agent.start()
  await until('the isolation gate to open', () => b.agent.readiness().nested.allowed)
  await recordIntent(b, 'nested', { id: '20261130T090000.000Z-eeeeee' })
  const run = await b.agent.converge(10_000)
  assert.ok(run)
  assert.equal(run.results.find((r) => r.host === 'a.example.com')?.outcome, 'held')
  assert.equal(b.agent.report().rows['a.example.com']?.layout, 'fenced')
  assert.equal(b.agent.report().rows['b.example.com']?.layout, 'nested')
  assert.match(await b.metrics.text(), /^carlos_layout_held_hosts 1$/m)
})

void test('a forced intent on a box with no CARLOS_ACTIVATOR_URL leaves an awake tenant its grace, and warns why', async (t) => {
  const lines: string[] = []
  const logger = pino({ level: 'info' }, new Writable({ write: (chunk: Buffer, _enc, done) => (lines.push(chunk.toString()), done()) }))
  const b = await agentBox(t, { logger, stopTimeoutMs: 60_000 })
  await addFlat(b, 'a.example.com')
  await b.agent.start()
  await until('the isolation gate to open', () => b.agent.readiness().nested.allowed)
  assert.equal((await b.agent.claimWake('a.example.com')).granted, true)
  await recordIntent(b, 'nested', { id: '20261130T090000.000Z-ffffff', force: true })
  const run = await b.agent.converge(30_000)
  assert.ok(run)
  const a = run.results.find((r) => r.host === 'a.example.com')
  assert.equal(a?.outcome, 'deferred', JSON.stringify(run.results))
  assert.match(a?.reason ?? '', /^awake: \d+m of grace left/)
  assert.equal(b.agent.report().rows['a.example.com']?.layout, 'flat', 'never fenced for a stop nobody can make')
  const warned = lines.map((l) => JSON.parse(l) as { level: number; msg: string }).filter((l) => l.msg.includes('CARLOS_ACTIVATOR_URL is not set'))
  assert.ok(warned.length > 0 && warned.every((l) => l.level === 40), lines.join(''))
})

// `GET /layout/mint?host=` on a real agent: the advice for one host's row is
// where its files already sit (design §5.5), never a shape beside them.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test } from 'node:test'
import { flatPaths, nestedPaths, nestedRoot } from '../../src/domain/paths.js'
import { agentBox } from '../helpers/agent.js'
import { until } from '../helpers/until.js'

void test('GET /layout/mint?host= answers the shape its files sit in, and refuses both shapes with a code', async (t) => {
  const b = await agentBox(t, { start: true })
  const ask = (query = '') => b.app.inject({ method: 'GET', url: `/layout/mint${query}` })
  // No intent recorded: the nested default stands in once the gate answers.
  await until('the nested default to stand in', async () => (await ask()).json<{ mode: string }>().mode === 'nested')

  const flat = flatPaths(b.config, 'a.example.com').dir
  await fs.mkdir(flat, { recursive: true })
  await fs.writeFile(path.join(flat, 'host.txt'), 'a')
  const a = await ask('?host=a.example.com')
  assert.equal(a.statusCode, 200, a.body)
  assert.deepEqual(a.json(), { mode: 'flat', found: 'flat' })
  assert.deepEqual(await fs.readdir(flat), ['host.txt'])
  assert.equal(await fs.lstat(nestedRoot(b.config, 'a.example.com')).catch(() => null), null, 'asking makes nothing')

  assert.deepEqual((await ask('?host=b.example.com')).json(), { mode: 'nested', found: 'none' })

  await fs.mkdir(flatPaths(b.config, 'c.example.com').dir, { recursive: true })
  await fs.mkdir(nestedPaths(b.config, 'c.example.com').dir, { recursive: true })
  const both = await ask('?host=c.example.com')
  assert.equal(both.statusCode, 409)
  const error = both.json<{ error: { code: string; message: string } }>().error
  assert.equal(error.code, 'mint_both_shapes')
  assert.ok(error.message.includes(flatPaths(b.config, 'c.example.com').dir), error.message)
  assert.ok(error.message.includes(nestedPaths(b.config, 'c.example.com').dir), error.message)

  const bad = await ask('?host=Not_A_Host')
  assert.equal(bad.statusCode, 400)
  assert.equal(bad.json<{ error: { code: string } }>().error.code, 'invalid_host')
})

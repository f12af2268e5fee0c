// Readiness through a real agent: the registry check asks the database.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { agentBox } from '../helpers/agent.js'

void test('the registry readiness check asks the database: a closed connection fails it', async (t) => {
  const b = await agentBox(t)
  await b.agent.start()
  assert.deepEqual(b.agent.readiness().checks[0], { name: 'registry', ok: true, detail: b.registry.file })
  b.registry.close()
  const r = b.agent.readiness()
  assert.equal(r.checks[0]?.ok, false)
  assert.match(r.checks[0]?.detail ?? '', /not open/)
  assert.equal(r.ready, false)
})

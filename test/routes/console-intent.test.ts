// GET /: the console names who recorded the intent the box reads and why
// (design §6.3, §7.4), escaped as every other text is; a record of a build
// before `message` shows who alone.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { build } from '../helpers/fake-agent.js'

void test('the console shows the current intent record: its id, who recorded it, when, and the message', async (t) => {
  const { app, agent } = await build(t)
  agent.reportValue = { ...agent.reportValue, mode: 'nested', default: false }
  agent.intentValue = {
    id: '20261201T080000.000Z-abcdef',
    mode: 'nested',
    force: false,
    recordedAt: '2026-12-01T08:00:00.000Z',
    by: 'ana@ops-1',
    message: 'canary <b>first</b>',
  }
  const page = (await app.inject({ method: 'GET', url: '/' })).body
  assert.match(
    page,
    /<p class="who">record <code>20261201T080000\.000Z-abcdef<\/code>, by <b>ana@ops-1<\/b> at 2026-12-01T08:00:00\.000Z: <q class="message">canary &lt;b&gt;first&lt;\/b&gt;<\/q><\/p>/,
  )
  const older = { ...agent.intentValue }
  delete older.message
  agent.intentValue = older
  agent.reportValue = { ...agent.reportValue }
  const again = (await app.inject({ method: 'GET', url: '/' })).body
  assert.match(again, /by <b>ana@ops-1<\/b> at 2026-12-01T08:00:00\.000Z<\/p>/)
})

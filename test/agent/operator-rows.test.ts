// A box short of its intent says so (design §6.2): a row a person must act
// on (here held for a second name) is named in the report's warnings, on
// the console page and in rows_needing_operator by its code; a tenant
// awake inside its grace, which passes on its own, is in none of them.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test } from 'node:test'
import { flatPaths } from '../../src/domain/paths.js'
import { addFlat, agentBox, recordIntent } from '../helpers/agent.js'
import { until } from '../helpers/until.js'

const HELD = 'held.example.com'
const AWAKE = 'awake.example.com'
const MOVED = 'moved.example.com'

void test('a held row is warned of, shown on the console and counted by its code; an awake one in its grace is not', async (t) => {
  const b = await agentBox(t, { env: { CARLOS_LAYOUT_DEFAULT: 'flat' } })
  for (const host of [HELD, AWAKE, MOVED]) await addFlat(b, host)
  const dir = flatPaths(b.config, HELD).dir
  await fs.link(path.join(dir, 'host.txt'), path.join(dir, 'second-name'))
  await b.agent.start()
  await until('the isolation gate to open', () => b.agent.readiness().nested.allowed)
  const claim = await b.app.inject({ method: 'POST', url: `/wakes/${AWAKE}` })
  assert.equal(claim.statusCode, 200, claim.body)

  await recordIntent(b, 'nested')
  // The poller may run the leg before the converge asked for here: the report, not one run's outcomes, is judged.
  await b.agent.converge(10_000)
  const words = (host: string) => `${b.agent.report().rows[host]?.layout} ${b.agent.report().rows[host]?.code}`
  await until('each host to be where a run leaves it', () =>
    words(HELD) === 'fenced second_name' && words(AWAKE) === 'flat awake_grace' && words(MOVED) === 'nested '
      ? true
      : undefined,
  )
  const report = b.agent.report()
  assert.equal(report.rows[HELD]?.code, 'second_name')
  assert.equal(report.rows[AWAKE]?.code, 'awake_grace')
  const warned = report.warnings.filter((w) => w.includes('operator'))
  assert.equal(warned.length, 1, JSON.stringify(report.warnings))
  assert.match(warned[0] ?? '', /^1 row needs an operator \(1 second_name\)/)

  const page = await b.app.inject({ method: 'GET', url: '/' })
  assert.equal(page.statusCode, 200)
  assert.ok(page.body.includes('1 row needs an operator (1 second_name)'), 'the console shows the warning')

  await until('rows_needing_operator to count the held row, and only it', async () => {
    const text = await b.metrics.text()
    return /^carlos_layout_rows_needing_operator\{reason="second_name"\} 1$/m.test(text) &&
      !/^carlos_layout_rows_needing_operator\{reason="awake_grace"\}/m.test(text)
      ? true
      : undefined
  })
})

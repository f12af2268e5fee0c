// The fleet page in a real browser: Debian's Chromium, driven by
// playwright-core, reading a real etcd through the route the agent serves
// (GET /fleet). Three in-process boxes (test/helpers/sim-box.ts) run a
// staged rollout to its end; the page shows each box and its state, the
// rollout's waves and progress, and the intent history newest first, with a
// recorder's name that is markup drawn as text; it needs no script.
import assert from 'node:assert/strict'
import { PassThrough } from 'node:stream'
import { test } from 'node:test'
import Fastify from 'fastify'
import { chromium } from 'playwright-core'
import { fleetCommand } from '../../src/cli/commands/fleet.js'
import { loadConfig } from '../../src/config.js'
import { EtcdDeployStore } from '../../src/infra/deploy-etcd/store.js'
import { fleetPageRoutes } from '../../src/routes/fleet-page.js'
import { EtcdServer } from '../helpers/etcd.js'
import { SimFleet } from '../helpers/sim-fleet.js'
import { until } from '../helpers/until.js'

const CHROMIUM = process.env.CHROMIUM_BIN ?? '/usr/bin/chromium'
const HOSTILE = '<script>window.owned = 1</script>ops@x'

void test('GET /fleet in Chromium: the boxes, the rollout and its waves, the history newest first, all escaped', async (t) => {
  const etcd = await EtcdServer.forTest(t)
  const prefix = `/test/fleet-page-${process.pid}/`
  const fleet = new SimFleet({ endpoints: [etcd.url], prefix, boxes: 3, passMs: 100 })
  t.after(() => fleet.stop())
  await fleet.start()
  const store = new EtcdDeployStore([etcd.url], { prefix })
  t.after(() => store.close())
  await store.record(
    { id: '20261201T000000.000Z-aaaaaa', mode: 'flat', force: false, recordedAt: '2026-12-01T00:00:00Z', by: HOSTILE },
    AbortSignal.timeout(5000),
  )
  const config = loadConfig({ CARLOS_BOX: 'ops', CARLOS_DEPLOYMENT_ETCD: etcd.url })
  const out = new PassThrough()
  const argv = ['rollout', 'migrate', '--waves', '1,100%', '-m', 'to <b>nested</b>']
  assert.equal(await fleetCommand(argv, { config, store, stdout: out, stderr: out }), 0)
  const port = store.rollouts()
  const done = await until('the rollout to be done', async () => {
    const { current } = await port.active(AbortSignal.timeout(5000))
    return current?.record.state === 'done' ? current.record : undefined
  })
  await until('every box to publish its end', async () => {
    const boxes = await store.listBoxes(AbortSignal.timeout(5000))
    return boxes.length === 3 && boxes.every((b) => b.intent === `${done.id}.done` && !b.leg.running)
  })

  const app = Fastify()
  await app.register(fleetPageRoutes, { store })
  const url = await app.listen({ host: '127.0.0.1', port: 0 })
  t.after(() => app.close())

  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage'] })
  t.after(() => browser.close())
  for (const javaScriptEnabled of [true, false]) {
    const context = await browser.newContext({ javaScriptEnabled })
    const page = await context.newPage()
    const problems: string[] = []
    page.on('console', (m) => {
      // The browser's own ask for /favicon.ico is no fault of the page.
      if (m.type() === 'error' && !m.location().url.endsWith('/favicon.ico')) problems.push(m.text())
    })
    const res = await page.goto(`${url}/fleet`)
    assert.equal(res?.status(), 200)
    const boxRows = await page.locator('#boxes tbody tr').allInnerTexts()
    assert.equal(boxRows.length, 3)
    for (const b of fleet.boxes)
      assert.ok(
        boxRows.some((r) => r.startsWith(b.box) && /converged/.test(r)),
        b.box,
      )
    const summary = await page.locator('#rollout .summary').innerText()
    assert.match(summary, new RegExp(`rollout ${done.id} \\(nested\\): wave 2/2, 3/3 boxes done, 0 moving; done`))
    assert.match(await page.locator('#rollout').innerText(), /by .*: “?to <b>nested<\/b>”?/)
    const waves = await page.locator('#rollout tbody tr').allInnerTexts()
    assert.equal(waves.length, 2)
    // wave, boxes, done, moving, failed rows, deferred rows, skipped, state.
    assert.match(waves[0] ?? '', /^1\s+1\s+1\s+0\s+0\s+0\s+0\s+passed/)
    // The rollout's events, newest first: its end, by the agent that judged its last wave.
    const events = await page.locator('#rollout ol.events li').allInnerTexts()
    assert.match(events[0] ?? '', /^\S+ done wave 2 by agent box-\d+/)
    assert.match(events.at(-1) ?? '', /^\S+ recorded wave 1 by /)
    const history = await page.locator('#history tbody tr').allInnerTexts()
    assert.match(history[0] ?? '', new RegExp(`^${done.id.replace(/\./g, '\\.')}\\.done\\s+nested\\s+the whole fleet`))
    assert.match(history.at(-1) ?? '', /20261201T000000\.000Z-aaaaaa\s+flat/)
    assert.ok((history.at(-1) ?? '').includes(HOSTILE), 'the markup is drawn as text')
    if (javaScriptEnabled)
      assert.equal(await page.evaluate(() => (globalThis as Record<string, unknown>).owned), undefined)
    assert.equal(await page.locator('script').count(), 0)
    assert.deepEqual(problems, [])
    await context.close()
  }
})

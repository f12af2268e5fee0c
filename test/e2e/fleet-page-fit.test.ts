// The fleet page on a 1,280-pixel screen, in Debian's Chromium driven by
// playwright-core (design §6.3): with forty boxes, long intent ids, a gone
// box and a paused rollout whose reason is long, the page scrolls down but
// never sideways, no table scrolls inside its own box either, and the
// rollout says its cause and the time left to its wave's deadline; its
// events, newest first, wrap too. The
// store is an in-memory one: the layout, not etcd, is the subject.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import Fastify from 'fastify'
import { chromium } from 'playwright-core'
import type { KeptBox } from '../../src/domain/box-summary.js'
import type { DeployStore } from '../../src/domain/ports.js'
import type { RolloutEvent, RolloutPort, RolloutRecord } from '../../src/domain/rollout.js'
import type { IntentRecord } from '../../src/domain/schemas.js'
import { fleetPageRoutes } from '../../src/routes/fleet-page.js'

const CHROMIUM = process.env.CHROMIUM_BIN ?? '/usr/bin/chromium'

function fleet(now: number): DeployStore {
  const id = (n: number) => `${new Date(now - n * 60_000).toISOString().replace(/[-:]/g, '')}-rollout-of-the-week-${n}`
  const records: IntentRecord[] = [1, 2, 3].map((n) => ({
    id: id(n + 10),
    mode: 'nested',
    force: false,
    recordedAt: new Date(now - n * 3_600_000).toISOString(),
    by: `someone-with-a-long-name-${n}@ops-workstation-${n}.example.internal`,
  }))
  const boxes: KeptBox[] = Array.from({ length: 40 }, (_, i): KeptBox => {
    const summary: KeptBox['summary'] = {
      box: `web-${String(i).padStart(3, '0')}.frankfurt-2.example.internal`,
      version: '0.1.0-rc.17+build.9f8e7d6c',
      intent: records[0]?.id ?? null,
      mode: 'nested',
      converged: i % 3 === 0,
      counts: { nested: 1200 + i, flat: i, fenced: i % 2, foreign: 3 },
      held: i % 2,
      leg: {
        running: i % 5 === 0,
        pending: false,
        lastRunAt: new Date(now - 90_000).toISOString(),
        retryAt: null,
        withheld: { deferred: i % 4, refused: 0, failed: i % 7, kept: 0, heldBy: i % 2 ? { second_name: 1 } : {} },
      },
      at: new Date(now - i * 1000).toISOString(),
    }
    return i === 7 ? { summary, gone: { since: new Date(now - 300_000).toISOString(), how: 'expired' } } : { summary }
  })
  const reason =
    `wave 2: 118 rows not nested (on ${boxes
      .slice(0, 25)
      .map((b) => b.summary.box)
      .join(', ')}), over the threshold of 0; ` + 'x'.repeat(180)
  const record: RolloutRecord = {
    id: id(1),
    mode: 'nested',
    force: false,
    waves: [boxes.slice(0, 1).map((b) => b.summary.box), boxes.slice(1, 10).map((b) => b.summary.box)],
    maxParallel: 4,
    progressDeadlineMs: 900_000,
    onFailure: 'pause',
    maxFailedRows: 0,
    state: 'paused',
    wave: 1,
    waveOpenedAt: new Date(now - 300_000).toISOString(),
    reason,
    recordedAt: new Date(now - 600_000).toISOString(),
    by: 'someone-with-a-long-name@ops-workstation.example.internal',
    message: 'the nested layout for the whole fleet, after the canary week '.repeat(3),
  }
  // Many events, with long reasons and messages, as a week of a real rollout leaves.
  const events: RolloutEvent[] = Array.from({ length: 60 }, (_, i) => ({
    at: new Date(now - (60 - i) * 60_000).toISOString(),
    by:
      i % 2 === 0
        ? `agent ${boxes[i % 40]?.summary.box ?? ''}`
        : 'someone-with-a-long-name@ops-workstation.example.internal',
    kind: i % 2 === 0 ? 'paused' : 'resumed',
    state: i % 2 === 0 ? 'paused' : 'running',
    wave: 2,
    ...(i % 2 === 0 ? { reason, cause: 'failed_rows' as const } : { message: 'the hold is cleared '.repeat(8) }),
  }))
  const port = {
    describe: () => 'memory',
    events: () => Promise.resolve(events),
    active: () => Promise.resolve({ pointerRev: '1', current: { record, rev: '1' } }),
    progress: () =>
      Promise.resolve(new Map(boxes.slice(0, 6).map((b, i) => [b.summary.box, { done: i < 3, failedRows: i }]))),
  } as unknown as RolloutPort
  return {
    list: () => Promise.resolve(records),
    record: () => Promise.reject(new Error('read-only')),
    describe: () => 'memory store',
    close: () => Promise.resolve(),
    listBoxes: () => Promise.resolve(boxes.filter((b) => b.gone === undefined).map((b) => b.summary)),
    listKnownBoxes: () => Promise.resolve(boxes),
    rollouts: () => port,
  }
}

void test('GET /fleet in Chromium at 1280 px: no sideways scroll, the paused rollout with its cause and deadline', async (t) => {
  const app = Fastify()
  await app.register(fleetPageRoutes, { store: fleet(Date.now()) })
  const url = await app.listen({ host: '127.0.0.1', port: 0 })
  t.after(() => app.close())
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage'] })
  t.after(() => browser.close())
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } })
  const page = await context.newPage()
  const res = await page.goto(`${url}/fleet`)
  assert.equal(res?.status(), 200)
  // Run in the page: each table's box is its wrapper, which scrolls when the table does not fit.
  type Widths = { scroll: number; client: number; inner: Array<{ scroll: number; client: number }> }
  const widths = await page.evaluate<Widths>(`(() => {
    const root = document.documentElement
    const inner = [...document.querySelectorAll('table')].map((el) => {
      const box = el.parentElement ?? el
      return { scroll: box.scrollWidth, client: box.clientWidth }
    })
    return { scroll: root.scrollWidth, client: root.clientWidth, inner }
  })()`)
  assert.ok(widths.scroll <= widths.client, `the page scrolls sideways: ${widths.scroll} > ${widths.client}`)
  for (const w of widths.inner) assert.ok(w.scroll <= w.client, `a table scrolls inside its box: ${JSON.stringify(w)}`)
  const rollout = await page.locator('#rollout').innerText()
  assert.match(rollout, /paused: wave 2: 118 rows not nested/)
  assert.match(rollout, /Wave 2's progress deadline: in \d+m \(time left/)
  // Said once above the events (each automatic pause's event says its own reason again).
  assert.equal(rollout.split('\nEvents\n')[0]?.split('118 rows not nested').length, 2, 'the cause is said once')
  assert.equal(await page.locator('#boxes tbody tr').count(), 40)
  // The newest events, newest first, each with who and why; the rest counted.
  assert.equal(await page.locator('#rollout ol.events li').count(), 50)
  assert.match(
    await page.locator('#rollout ol.events li').first().innerText(),
    /resumed wave 2 by someone-with-a-long-name@/,
  )
  assert.match(rollout, /10 older events not shown/)
  const gone = await page.locator('#boxes tbody tr', { hasText: 'web-007' }).innerText()
  assert.match(gone, /gone since 5m ago \(its lease expired\)/)
  await context.close()
})

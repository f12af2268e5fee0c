// The console in a real browser: Debian's Chromium, driven by
// playwright-core, reading the real agent process on a real socket. Rows
// are added and migrated with the CLI; the page, left open, follows the
// report by itself (conditional requests, 304 while nothing changed), the
// filter and the search are a plain form, and with JavaScript off a load
// of the same URL shows the same rows.
//
// The screenshot the README shows is this test's: run it with
// CONSOLE_SCREENSHOT=docs/console.png to write it there; otherwise it is
// taken into the test's temp dir and checked only for being an image.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { test } from 'node:test'
import { setTimeout as delay } from 'node:timers/promises'
import Database from 'better-sqlite3'
import { chromium, type Page } from 'playwright-core'
import { AgentProcess, makeSandbox, runCli, type Sandbox } from '../helpers/agent-process.js'
import { until } from '../helpers/until.js'

/** Debian's chromium (scripts/test.sh installs it when missing); CHROMIUM_BIN names another. */
const CHROMIUM = process.env.CHROMIUM_BIN ?? '/usr/bin/chromium'

const TENANTS = ['a.example.com', 'b.example.com', 'c.example.com', 'd.example.com', 'e.example.com']
const EXTERNAL = 'legacy.example.com'
/** Rows another program wrote straight into the registry: names no route add would take, and markup if the page let them be. */
const HOSTILE = ['<script>alert("owned")</script>', `it's "quoted".example.com`]

async function cli(sb: Sandbox, ...args: string[]): Promise<string> {
  const r = await runCli(sb, args)
  assert.equal(r.exit.code, 0, `layoutd ${args.join(' ')}: ${r.stderr}`)
  return r.stdout
}

/** "Not yet", a tenth of a second later: the browser is asked again no faster than that. */
async function later(): Promise<false> {
  await delay(100)
  return false
}

/** The rows the page shows, as host → word. */
async function rowsShown(page: Page): Promise<Record<string, string>> {
  const shown: Record<string, string> = {}
  for (const tr of await page.locator('tbody tr[data-host]').all())
    shown[(await tr.getAttribute('data-host')) ?? ''] = (await tr.getAttribute('data-word')) ?? ''
  return shown
}

void test('the console in Chromium: rows turn nested while the page is open, the filter and the search work, and so does a load with no JavaScript', async (t) => {
  const root = await fs.mkdtemp(path.join(os.tmpdir(), 'layoutd-console-'))
  const sb = await makeSandbox(root, 'kass-1')
  // The CLI asks this agent's mint (D/agent.json names it): with the default
  // flat the rows start flat, and only the recorded intent moves them.
  const agent = await AgentProcess.start(sb, { env: { CARLOS_LAYOUT_DEFAULT: 'flat' } })
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage'] })
  t.after(async () => {
    await browser.close()
    await agent.stop()
    await fs.rm(root, { recursive: true, force: true })
  })
  await agent.waitReady()

  for (const h of TENANTS) assert.match(await cli(sb, 'routes', 'add', h, '--hibernate'), /minted flat/)
  await cli(
    sb,
    'routes',
    'add',
    EXTERNAL,
    '--socket',
    path.join(root, 'legacy.sock'),
    '--dir',
    path.join(root, 'legacy'),
  )
  // As sqlite3(1) would write them: the agent sees another connection's commit.
  const db = new Database(path.join(sb.dataDir, 'registry.db'))
  const at = new Date().toISOString()
  HOSTILE.forEach((host, i) => {
    const [socket, dir] = [path.join(root, `odd-${i}.sock`), path.join(root, `odd-${i}`)]
    db.prepare(
      'INSERT INTO routes (host, kind, socket, dir, db, hibernate, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
    ).run(host, 'instance', socket, dir, '', 1, at, at)
  })
  db.close()
  await agent.waitFor(
    'the rows in the report',
    async () => (Object.keys((await agent.status()).rows).length === 8 ? true : undefined),
    20_000,
  )

  const context = await browser.newContext({ viewport: { width: 1280, height: 960 } })
  const page = await context.newPage()
  const statusAnswers: number[] = []
  const dialogs: string[] = []
  page.on('dialog', (d) => {
    dialogs.push(d.message())
    void d.dismiss()
  })
  page.on('response', (res) => {
    if (new URL(res.url()).pathname === '/layout/status') statusAnswers.push(res.status())
  })
  await page.goto(`${agent.url}/`)
  assert.equal(await page.title(), 'kass-1: layoutd')
  assert.deepEqual(await rowsShown(page), {
    ...Object.fromEntries(TENANTS.map((h) => [h, 'flat'])),
    [EXTERNAL]: 'external',
    ...Object.fromEntries(HOSTILE.map((h) => [h, 'foreign'])),
  })
  // The hostile names are text on the page, never markup: the page's own script is its only one.
  for (const host of HOSTILE) assert.equal(await page.locator('td.host', { hasText: host }).textContent(), host)
  assert.equal(await page.locator('script').count(), 1)
  // The page is never loaded again below: what changes, the script redraws in place.
  await page.evaluate(() => {
    ;(globalThis as Record<string, unknown>).stillHere = true
  })
  // Nothing changed yet: the script's conditional request is answered 304.
  await page.waitForResponse((res) => new URL(res.url()).pathname === '/layout/status' && res.status() === 304, {
    timeout: 15_000,
  })

  assert.match(await cli(sb, 'intent', 'migrate', '--box', 'kass-1'), /nested for box kass-1/)
  await until(
    'the open page to show every tenant nested',
    async () => {
      const rows = await rowsShown(page)
      return TENANTS.every((h) => rows[h] === 'nested') || (await later())
    },
    30_000,
  )
  assert.equal(
    await page.evaluate(() => (globalThis as Record<string, unknown>).stillHere),
    true,
    'redrawn in place, not reloaded',
  )
  assert.ok(
    statusAnswers.includes(304) && statusAnswers.includes(200),
    `answers to the page's conditional requests: ${statusAnswers.join(' ')}`,
  )
  await until(
    'the leg idle on the page',
    async () => ((await page.textContent('.leg')) ?? '').includes('idle') || (await later()),
    30_000,
  )
  assert.match((await page.textContent('.intent')) ?? '', /nested\s+recorded for this box or its fleet/)
  // The legend's markup is laid out by Prettier: each word and its count may sit on lines of their own.
  assert.match((await page.textContent('.legend')) ?? '', /all\s+8.*foreign\s+2.*nested\s+5.*external\s+1/s)
  assert.equal(await page.locator('script').count(), 1, 'a redraw brings no script in')
  assert.deepEqual(dialogs, [], 'no script of a hostname ever ran')

  // The screenshot, taken of the page as it stands.
  const shot = process.env.CONSOLE_SCREENSHOT ?? path.join(root, 'console.png')
  await page.screenshot({ path: shot, fullPage: true })
  const png = await fs.readFile(shot)
  assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'a PNG')

  // The filter and the search: a plain GET form.
  await page.selectOption('select[name=word]', 'nested')
  await page.fill('input[name=q]', 'B.EX')
  await Promise.all([page.waitForURL(/\/\?word=nested&q=B\.EX$/), page.click('button[type=submit]')])
  assert.deepEqual(await rowsShown(page), { 'b.example.com': 'nested' })
  assert.match((await page.textContent('#range')) ?? '', /rows 1–1 of 1 \(word nested, host containing “B\.EX”\)/)
  // A word from the legend is a link too.
  await Promise.all([page.waitForURL(/\/\?word=external&q=B\.EX$/), page.click('.legend a.w-external')])
  assert.deepEqual(await rowsShown(page), {})
  const filtered = page.url()

  // No JavaScript at all: the same URL shows the same page, search included.
  const plain = await browser.newContext({ javaScriptEnabled: false })
  const noJs = await plain.newPage()
  await noJs.goto(`${agent.url}/?word=nested`)
  assert.deepEqual(await rowsShown(noJs), Object.fromEntries(TENANTS.map((h) => [h, 'nested'])))
  await noJs.fill('input[name=q]', 'c.example')
  await Promise.all([noJs.waitForURL(/\/\?word=nested&q=c\.example$/), noJs.click('button[type=submit]')])
  assert.deepEqual(await rowsShown(noJs), { 'c.example.com': 'nested' })
  await noJs.goto(filtered)
  assert.deepEqual(await rowsShown(noJs), {})
  await noJs.reload()
  assert.equal(await noJs.inputValue('input[name=q]'), 'B.EX')
  await plain.close()
  await context.close()
})

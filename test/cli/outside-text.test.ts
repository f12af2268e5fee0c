// Text from outside layoutd reaches the terminal and the page with its
// control bytes escaped: a corrupt record's NUL, an ESC sequence in a row's
// dir or reason, a bidi override. Through `status`, `status HOST`,
// `intent status`, `routes list` and the console page, none of the raw
// bytes is written, and each is shown as \xNN or \u{…}.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test } from 'node:test'
import Database from 'better-sqlite3'
import { main as statusMain } from '../../src/cli/commands/status.js'
import { intentCommand } from '../../src/cli/commands/intent.js'
import { routesCommand } from '../../src/cli/commands/routes/index.js'
import { loadConfig } from '../../src/config.js'
import { printable } from '../../src/domain/printable.js'
import { DirDeployStore } from '../../src/infra/deploy-dir.js'
import { Registry, REGISTRY_FILE } from '../../src/infra/registry.js'
import { build, HOST, listen, sampleReport } from '../helpers/fake-agent.js'
import { Sink } from '../helpers/sink.js'
import { tmpDir } from '../helpers/tmp.js'

/** The bytes a hostile tenant or store plants: NUL, an ESC colour sequence, BEL, DEL, a C1 CSI, a bidi override. */
const EVIL = 'a\u0000b\u001b[31mred\u0007\u007f\u009b2J\u202eevil'
const SHOWN = 'a\\x00b\\x1b[31mred\\x07\\x7f\\x9b2J\\u{202e}evil'
const RAW = new RegExp(`[${String.fromCharCode(0)}-${String.fromCharCode(0x09)}\u001b\u007f-\u009f\u202a-\u202e]`)

void test('printable escapes C0, DEL, C1 and bidi overrides, and leaves the rest as it is', () => {
  assert.equal(printable(EVIL), SHOWN)
  assert.equal(printable('café /srv/a b\tc\n'), 'café /srv/a b\\x09c\\x0a')
})

void test('status and status HOST show a reason and a note with control bytes escaped', async (t) => {
  const { agent, url } = await listen(t)
  agent.reportValue = {
    ...sampleReport(),
    rows: { [HOST]: { layout: 'foreign', code: 'unknown_shape', reason: `dir /srv/${EVIL}`, note: EVIL } },
    warnings: [`warning ${EVIL}`],
  }
  for (const argv of [
    ['--url', url],
    [HOST, '--url', url],
  ]) {
    const stdout = new Sink()
    const stderr = new Sink()
    const code = await statusMain(argv, { environ: {}, stdout, stderr })
    assert.equal(code, 0, stderr.text)
    assert.doesNotMatch(stdout.text, RAW, argv.join(' '))
    assert.ok(stdout.text.includes(`dir /srv/${SHOWN}`), stdout.text)
  }
})

void test('intent status shows a record whose fields hold a NUL and an ESC escaped', async (t) => {
  const root = await tmpDir(t)
  const config = loadConfig({
    CARLOS_DEPLOYMENT_DIR: root,
    CARLOS_BOX: 'kass-1',
    CARLOS_DATA_DIR: path.join(root, 'd'),
  })
  const dir = path.join(root, 'layout', 'intents')
  await fs.mkdir(dir, { recursive: true })
  const record = { id: '20261130T080000Z-aaaa', mode: 'nested', force: false, recordedAt: EVIL, by: EVIL }
  await fs.writeFile(path.join(dir, `${record.id}.json`), JSON.stringify(record))
  const stdout = new Sink()
  const stderr = new Sink()
  const store = new DirDeployStore(root)
  const code = await intentCommand(['status'], { config, store, stdout, stderr })
  assert.equal(code, 0, stderr.text)
  assert.doesNotMatch(stdout.text, RAW)
  assert.ok(stdout.text.includes(`by ${SHOWN}`), stdout.text)
})

void test('routes list shows a dir holding control bytes escaped', async (t) => {
  const dataDir = await tmpDir(t)
  const registry = Registry.open(dataDir)
  registry.add({ host: HOST, kind: 'static', hibernate: false, dir: '', socket: '', db: '' })
  registry.close()
  // A row written past the CLI's checks, as a hand-edited registry holds it.
  const db = new Database(path.join(dataDir, REGISTRY_FILE))
  db.prepare('UPDATE routes SET dir = ?').run(`/srv/${EVIL}`)
  db.close()
  const reopened = Registry.open(dataDir)
  t.after(() => reopened.close())
  const stdout = new Sink()
  const stderr = new Sink()
  const config = loadConfig({ CARLOS_DATA_DIR: dataDir })
  const code = await routesCommand(['list'], {
    config,
    stdout,
    stderr,
    registry: reopened,
    mint: () => Promise.resolve('nested'),
  })
  assert.equal(code, 0, stderr.text)
  assert.doesNotMatch(stdout.text, RAW)
  assert.ok(stdout.text.includes(`/srv/${SHOWN}`), stdout.text)
})

void test('the console page shows a reason, a note and a warning with control bytes escaped', async (t) => {
  const { app, agent } = await build(t)
  agent.reportValue = {
    ...agent.reportValue,
    rows: { [HOST]: { layout: 'foreign', code: 'unknown_shape', reason: `dir /srv/${EVIL}`, note: EVIL } },
    warnings: [`warning ${EVIL}`],
  }
  const res = await app.inject({ method: 'GET', url: '/' })
  assert.equal(res.statusCode, 200)
  assert.doesNotMatch(res.body, RAW)
  assert.ok(res.body.includes('dir /srv/a\\x00b\\x1b[31mred'), 'the escaped reason is on the page')
  assert.ok(res.body.includes('warning a\\x00b'), 'the escaped warning is on the page')
})

void test('routes add says the row it added with its paths’ control bytes escaped', async (t) => {
  const dataDir = await tmpDir(t)
  const registry = Registry.open(dataDir)
  t.after(() => registry.close())
  const stdout = new Sink()
  const stderr = new Sink()
  const config = loadConfig({ CARLOS_DATA_DIR: dataDir })
  const code = await routesCommand(['add', HOST, '--dir', `/srv/${EVIL}`, '--socket', '/run/a.sock'], {
    config,
    stdout,
    stderr,
    registry,
    mint: () => Promise.resolve('nested'),
  })
  assert.equal(code, 0, stderr.text)
  assert.doesNotMatch(stdout.text, RAW)
  assert.ok(stdout.text.includes(`dir /srv/${SHOWN}`), stdout.text)
})

// Record repair and who/why on the directory store (design §7.4):
// `intent quarantine` moves a corrupt or wrong record aside with its
// replacement, so no box reads the record before it; `migrate --supersede`
// records over an unreadable record; `--dry-run` says what the real command
// does, refusals included; each record carries who and why, and `intent
// history` lists them, newest first, the unreadable and quarantined ones marked.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { test, type TestContext } from 'node:test'
import { intentCommand, whoami } from '../../../src/cli/commands/intent.js'
import { loadConfig } from '../../../src/config.js'
import { selectIntent } from '../../../src/domain/intent.js'
import type { IntentRecord, LayoutReport } from '../../../src/domain/schemas.js'
import { DirDeployStore } from '../../../src/infra/deploy-dir.js'
import { sink } from '../../helpers/sink.js'
import { tmpDir } from '../../helpers/tmp.js'

const live = () => new AbortController().signal

const report: LayoutReport = {
  box: 'kass-1',
  mode: 'flat',
  default: false,
  defaultBlocked: '',
  leg: { running: false, pending: false, lastRun: null, retryAt: null },
  warnings: [],
  rows: { 'a.example.com': { layout: 'flat', code: '', reason: '', note: '' } },
}

async function setup(t: TestContext) {
  const root = await tmpDir(t)
  const config = loadConfig({
    CARLOS_DEPLOYMENT_DIR: root,
    CARLOS_BOX: 'kass-1',
    CARLOS_DATA_DIR: path.join(root, 'd'),
  })
  const store = new DirDeployStore(root)
  const dir = path.join(root, 'layout', 'intents')
  const run = async (...argv: string[]) => {
    const out = sink()
    const err = sink()
    const code = await intentCommand(argv, {
      config,
      store,
      stdout: out.stream,
      stderr: err.stream,
      by: 'ops@test',
      report: () => Promise.resolve(report),
    })
    return { code, out: out.text(), err: err.text() }
  }
  const recorded = async (...argv: string[]) => {
    const r = await run(...argv)
    assert.equal(r.code, 0, r.err)
    return /recorded intent (\S+):/.exec(r.out)?.[1] ?? ''
  }
  /** A corrupt record that sorts after every other: the newest. */
  const corrupt = async (id = '29991231T000000.000Z-bad') => {
    await fs.writeFile(path.join(dir, `${id}.json`), '{"id": "')
    return id
  }
  return { root, dir, store, run, recorded, corrupt }
}

void test('with a corrupt newest record, migrate is refused and --dry-run says the same refusal', async (t) => {
  const { run, recorded, corrupt, dir } = await setup(t)
  await recorded('migrate', '--fleet')
  const bad = await corrupt()
  const real = await run('migrate', '--fleet')
  const dry = await run('migrate', '--fleet', '--dry-run')
  assert.equal(real.code, 1)
  assert.equal(dry.code, 1, dry.out)
  assert.equal(dry.out, '')
  assert.ok(real.err.includes(path.join(dir, `${bad}.json`)), real.err)
  assert.match(real.err, new RegExp(`--supersede ${bad}`))
  assert.equal(dry.err, real.err)
})

void test('quarantine ID --record moves a corrupt record aside and records its replacement; the old one stays readable', async (t) => {
  const { run, recorded, corrupt, store, root, dir } = await setup(t)
  const first = await recorded('revert', '--fleet')
  const bad = await corrupt()
  // A corrupt record says nothing of whom it addressed: --box or --fleet is required.
  const vague = await run('quarantine', bad, '--record', 'nested')
  assert.equal(vague.code, 2)
  assert.match(vague.err, /give --box LABEL or --fleet/)
  const dry = await run('quarantine', bad, '--record', 'nested', '--fleet', '--dry-run')
  assert.equal(dry.code, 0, dry.err)
  assert.match(
    dry.out,
    new RegExp(`^dry run: would quarantine ${bad}, the unreadable record, with nested for the whole fleet`),
  )
  assert.ok(await fs.stat(path.join(dir, `${bad}.json`)))
  const r = await run('quarantine', bad, '--record', 'nested', '--fleet', '-m', 'replace the half-written record')
  assert.equal(r.code, 0, r.err)
  const aside = path.join(root, 'layout', 'quarantine', `${bad}.json`)
  assert.match(r.out, new RegExp(`^quarantined intent record ${bad}: moved to ${aside} \\(still readable there\\)\\n`))
  assert.equal(await fs.readFile(aside, 'utf8'), '{"id": "')
  const records = await store.list(live())
  assert.equal(records.length, 2)
  const [, repl] = records
  assert.equal(records[0]?.id, first)
  assert.equal(repl?.mode, 'nested')
  assert.equal(repl?.message, 'replace the half-written record')
  assert.ok((repl?.id ?? '') > bad, 'the replacement sorts after the record it replaces')
  assert.match(r.out, new RegExp(`recorded intent ${repl?.id}: nested for the whole fleet, in its place\\n$`))
})

void test('a wrong (readable) record: a narrower replacement is refused; the repair never lets a box read the record before it', async (t) => {
  const { run, recorded, store } = await setup(t)
  const before = await recorded('revert', '--fleet')
  const wrong = await recorded('migrate', '--fleet')
  const narrow = await run('quarantine', wrong, '--record', 'flat', '--box', 'kass-1')
  assert.equal(narrow.code, 1)
  assert.match(narrow.err, /addresses the whole fleet; .* give --fleet/)
  // A reader polling all along: never the record before the wrong one. A listing that races the rename
  // (a name listed, gone by its open) throws: unreadable, which moves nothing.
  let stop = false
  const seen = new Set<string>()
  const reader = (async () => {
    while (!stop) {
      const records = await store.list(live()).catch(() => [])
      const read = selectIntent(records, 'kass-2')
      if (read.found) seen.add(read.intent.id)
    }
  })()
  const r = await run('quarantine', wrong, '--record', 'flat')
  stop = true
  await reader
  assert.equal(r.code, 0, r.err)
  assert.ok(!seen.has(before), `a reader read ${before}, the record before the repaired one`)
  const newest = (await store.list(live())).at(-1)
  assert.equal(newest?.mode, 'flat')
  assert.equal(newest?.box, undefined, 'the replacement takes the fleet-wide address of the record it replaces')
})

void test('migrate --supersede ID records over an unreadable newest record in one step; another unreadable one refuses it', async (t) => {
  const { run, recorded, corrupt, store } = await setup(t)
  await recorded('revert', '--fleet')
  const bad = await corrupt('29991231T000000.000Z-bad')
  const other = await corrupt('29991231T000000.000Z-bae')
  const refused = await run('migrate', '--fleet', '--supersede', bad)
  assert.equal(refused.code, 1)
  assert.match(refused.err, new RegExp(`record ${other} .* cannot be read either`))
  assert.equal((await run('quarantine', other)).code, 0)
  const dry = await run('migrate', '--fleet', '--supersede', bad, '--dry-run')
  assert.equal(dry.code, 0, dry.err)
  assert.match(
    dry.out,
    new RegExp(
      `^dry run: would record nested for the whole fleet, quarantining record ${bad} in the same step; nothing recorded\\n`,
    ),
  )
  const r = await run('migrate', '--fleet', '--supersede', bad)
  assert.equal(r.code, 0, r.err)
  assert.match(
    r.out,
    new RegExp(`^quarantined intent record ${bad}: moved to .*\\nrecorded intent \\S+: nested for the whole fleet\\n$`),
  )
  assert.equal((await store.list(live())).at(-1)?.mode, 'nested')
})

void test('history lists every record newest first with who, when and why; unreadable and quarantined ones marked; older records read', async (t) => {
  const { run, recorded, corrupt, dir } = await setup(t)
  // A record of a build before `message`.
  await fs.mkdir(dir, { recursive: true })
  const old: IntentRecord = {
    id: '20200101T000000.000Z-old',
    mode: 'flat',
    force: false,
    recordedAt: '2020-01-01T00:00:00.000Z',
    by: 'legacy@box',
  }
  await fs.writeFile(path.join(dir, `${old.id}.json`), JSON.stringify(old))
  const a = await recorded('migrate', '--box', 'kass-2', '-m', 'canary first')
  const wrong = await recorded('migrate', '--fleet')
  assert.equal((await run('quarantine', wrong)).code, 0)
  const bad = await corrupt()
  const h = await run('history', '--json')
  assert.equal(h.code, 0, h.err)
  const rows = (
    JSON.parse(h.out) as { records: Array<{ id: string; state: string; by: string; message: string; box: string }> }
  ).records
  assert.deepEqual(
    rows.map((r) => [r.id, r.state, r.box, r.by, r.message]),
    [
      [bad, 'unreadable', '-', '-', ''],
      [wrong, 'quarantined', '(fleet)', 'ops@test', ''],
      [a, 'recorded', 'kass-2', 'ops@test', 'canary first'],
      [old.id, 'recorded', '(fleet)', 'legacy@box', ''],
    ],
  )
  const text = await run('history', '--box', 'kass-3')
  assert.match(text.out, /^ID +MODE +BOX +WHO +WHEN +MESSAGE\n/)
  assert.ok(!text.out.includes(a), 'a record for another box is not listed under --box')
  assert.match(
    text.out,
    new RegExp(`${wrong} +nested +\\(fleet\\) +ops@test .*\\[quarantined: .*quarantine/${wrong}\\.json\\]`),
  )
  assert.match(text.out, new RegExp(`${bad} .*\\[unreadable: not JSON`))
  // status shows who and why of the intent this box reads.
  const s = await run('status')
  assert.match(s.out, /unreadable/)
})

void test('who recorded it: USER, else LOGNAME, at this host', () => {
  assert.equal(whoami({ USER: 'ana', LOGNAME: 'x' }), `ana@${os.hostname()}`)
  assert.equal(whoami({ LOGNAME: 'bo' }), `bo@${os.hostname()}`)
  assert.match(whoami({}), new RegExp(`^\\S+@${os.hostname()}$`))
})

void test('-m is one line of at most 1000 characters', async (t) => {
  const { run } = await setup(t)
  for (const m of ['x'.repeat(1001), 'two\nlines']) {
    const r = await run('migrate', '--fleet', '-m', m)
    assert.equal(r.code, 2, m)
  }
})

// `layoutd journal list|show` on a data root holding a host's journal and
// a batch's: every file named with the hosts it names, one journal's moves
// with where each host's files are now, and a host found in whichever
// journal names it. Nothing is changed.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test } from 'node:test'
import { main } from '../../../src/cli/commands/journal.js'
import { freePort } from '../../helpers/agent-process.js'
import { Sink } from '../../helpers/sink.js'
import { tmpDir } from '../../helpers/tmp.js'

async function box(t: Parameters<typeof tmpDir>[0]) {
  const dataDir = await tmpDir(t)
  const layout = path.join(dataDir, 'layout')
  await fs.mkdir(layout)
  const paths = (dir: string) => ({ dir, socket: `${dir}.sock`, db: '' })
  const move = (host: string) => ({
    host,
    to: 'nested',
    from: paths(path.join(dataDir, 'apps', host)),
    dest: paths(path.join(dataDir, 'nested', host, 'data')),
  })
  await fs.mkdir(path.join(dataDir, 'apps', 'a.example.com'), { recursive: true })
  await fs.mkdir(path.join(dataDir, 'nested', 'b.example.com', 'data'), { recursive: true })
  const batch = {
    v: 2,
    generation: 7,
    startedAt: '2026-12-03T10:00:00.000Z',
    moves: [move('a.example.com'), move('b.example.com')],
  }
  await fs.writeFile(path.join(layout, '_batch-7.journal'), JSON.stringify(batch))
  await fs.writeFile(
    path.join(layout, 'c.example.com.journal'),
    JSON.stringify({ v: 1, ...move('c.example.com'), generation: 3, startedAt: '2026-12-03T09:00:00.000Z' }),
  )
  const environ = { CARLOS_DATA_DIR: dataDir, CARLOS_AGENT_LISTEN: `127.0.0.1:${await freePort()}` }
  const before = await fs.readdir(layout)
  return { dataDir, layout, environ, before }
}

async function journal(environ: NodeJS.ProcessEnv, ...argv: string[]) {
  const stdout = new Sink()
  const stderr = new Sink()
  const code = await main(argv, { environ, stdout, stderr })
  return { code, out: stdout.text, err: stderr.text }
}

void test('journal list names every journal file, a batch’s with its hosts, and says when the agent’s reasons are unknown', async (t) => {
  const b = await box(t)
  const r = await journal(b.environ, 'list')
  assert.equal(r.code, 0, r.err)
  assert.match(
    r.out,
    /^layout\/_batch-7\.journal\s+2026-12-03T10:00:00\.000Z\s+a\.example\.com, b\.example\.com\s+unknown$/m,
  )
  assert.match(r.out, /^layout\/c\.example\.com\.journal\s+2026-12-03T09:00:00\.000Z\s+c\.example\.com\s+unknown$/m)
  assert.match(r.err, /the agent's reasons are not known: cannot reach layoutd/)
  assert.deepEqual(await fs.readdir(b.layout), b.before, 'nothing changed')
})

void test('journal show gives each move with where its files are now; an unknown name exits 1', async (t) => {
  const b = await box(t)
  const r = await journal(b.environ, 'show', '_batch-7.journal')
  assert.equal(r.code, 0, r.err)
  assert.match(r.out, /^layout\/_batch-7\.journal: a batch's journal, started 2026-12-03T10:00:00\.000Z$/m)
  assert.match(r.out, /^a\.example\.com\s+nested\s+\S+\s+a directory\s+\S+\s+absent$/m)
  assert.match(r.out, /^b\.example\.com\s+nested\s+\S+\s+absent\s+\S+\s+a directory$/m)
  const host = await journal(b.environ, 'show', 'c.example.com', '--json')
  assert.equal(host.code, 0, host.err)
  assert.equal((JSON.parse(host.out) as { moves: Array<{ atFrom: string }> }).moves[0]?.atFrom, 'absent')
  const none = await journal(b.environ, 'show', 'd.example.com')
  assert.equal(none.code, 1)
  assert.match(none.err, /no journal "d\.example\.com" in \S+, and no journal names it/)
})

void test('journal show HOST finds a host a batch journal names: the file, and that host’s entry only', async (t) => {
  const b = await box(t)
  const r = await journal(b.environ, 'show', 'b.example.com')
  assert.equal(r.code, 0, r.err)
  assert.match(
    r.out,
    /^b\.example\.com is named by layout\/_batch-7\.journal: a batch journal, started 2026-12-03T10:00:00\.000Z$/m,
  )
  assert.match(r.out, /^b\.example\.com\s+nested\s+\S+\/apps\/b\.example\.com\s+absent\s+\S+\s+a directory$/m)
  assert.doesNotMatch(r.out, /a\.example\.com/, 'only the host asked for')
  const json = await journal(b.environ, 'show', 'a.example.com', '--json')
  assert.equal(json.code, 0, json.err)
  const parsed = JSON.parse(json.out) as { file: string; host: string; moves: Array<{ host: string; atFrom: string }> }
  assert.equal(parsed.file, '_batch-7.journal')
  assert.deepEqual(
    parsed.moves.map((m) => [m.host, m.atFrom]),
    [['a.example.com', 'a directory']],
  )
  // Its own journal is found as before.
  const own = await journal(b.environ, 'show', 'c.example.com')
  assert.match(own.out, /^c\.example\.com is named by layout\/c\.example\.com\.journal: its own journal/m)
  assert.deepEqual(await fs.readdir(b.layout), b.before, 'nothing changed')
})

// `layoutd journal release FILE|HOST [--dry-run]` on a temp data root with
// a real SQLite registry and real journal files: a settled journal is
// removed (and its dry run changes nothing), every unsettled state is
// refused naming the host, what was found and what to do, a batch goes
// whole or not at all, hostile names are refused before anything is read
// through them, and beside an agent the command asks its report first and
// its leg for a run after.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test, type TestContext } from 'node:test'
import { parseCommandArgs } from '../../../src/cli/args.js'
import { main } from '../../../src/cli/commands/journal.js'
import { release, releaseOptions } from '../../../src/cli/commands/journal-release.js'
import { loadConfig } from '../../../src/config.js'
import { flatPaths, nestedPaths, type Dirs } from '../../../src/domain/paths.js'
import { AgentLock } from '../../../src/infra/agent-lock.js'
import { Registry } from '../../../src/infra/registry.js'
import { freePort } from '../../helpers/agent-process.js'
import { TEST_TOKEN } from '../../helpers/authorised.js'
import { listen, sampleReport } from '../../helpers/fake-agent.js'
import { Sink } from '../../helpers/sink.js'
import { tmpDir } from '../../helpers/tmp.js'

const A = 'a.example.com'
const B = 'b.example.com'
const C = 'c.example.com'

interface Box {
  dataDir: string
  layout: string
  dirs: Dirs
  environ: NodeJS.ProcessEnv
  /** Adds the host's row, flat or nested. */
  row(host: string, shape: 'flat' | 'nested'): void
  /** Makes the host's directory of that shape, with a file in it. */
  files(host: string, shape: 'flat' | 'nested'): Promise<string>
  /** The move to nested of host, as a journal names it. */
  move(host: string): { host: string; to: 'nested'; from: object; dest: object }
  /** Writes host's own journal of its move to nested; answers its path. */
  own(host: string): Promise<string>
  /** Writes a batch's journal of the hosts' moves to nested; answers its path. */
  batch(generation: number, hosts: readonly string[]): Promise<string>
  /** Every file of D/layout, with its bytes. */
  snapshot(): Promise<Record<string, string>>
}

async function box(t: TestContext): Promise<Box> {
  const dataDir = await tmpDir(t)
  const layout = path.join(dataDir, 'layout')
  await fs.mkdir(layout)
  const dirs: Dirs = { dataDir, runDir: path.join(dataDir, 'run') }
  const registry = Registry.open(dataDir)
  t.after(() => registry.close())
  const pathsOf = (host: string, shape: 'flat' | 'nested') =>
    shape === 'flat' ? flatPaths(dirs, host) : nestedPaths(dirs, host)
  const move = (host: string) => ({
    host,
    to: 'nested' as const,
    from: flatPaths(dirs, host),
    dest: nestedPaths(dirs, host),
  })
  const b: Box = {
    dataDir,
    layout,
    dirs,
    // The token the fake agent requires, as the operator's environment gives it.
    environ: {
      CARLOS_DATA_DIR: dataDir,
      CARLOS_AGENT_LISTEN: `127.0.0.1:${await freePort()}`,
      CARLOS_AGENT_TOKEN: TEST_TOKEN,
    },
    row: (host, shape) => registry.add({ host, kind: 'instance', hibernate: true, ...pathsOf(host, shape) }),
    files: async (host, shape) => {
      const dir = pathsOf(host, shape).dir
      await fs.mkdir(dir, { recursive: true })
      await fs.writeFile(path.join(dir, 'app.txt'), host)
      return dir
    },
    move,
    own: async (host) => {
      const file = path.join(layout, `${host}.journal`)
      const journal = { v: 1, ...move(host), generation: 3, startedAt: '2026-12-03T09:00:00.000Z' }
      await fs.writeFile(file, `${JSON.stringify(journal)}\n`)
      return file
    },
    batch: async (generation, hosts) => {
      const file = path.join(layout, `_batch-${generation}.journal`)
      const batch = { v: 2, generation, startedAt: '2026-12-03T10:00:00.000Z', moves: hosts.map(move) }
      await fs.writeFile(file, `${JSON.stringify(batch)}\n`)
      return file
    },
    snapshot: async () => {
      const out: Record<string, string> = {}
      for (const name of (await fs.readdir(layout)).sort()) {
        const st = await fs.lstat(path.join(layout, name))
        out[name] = st.isSymbolicLink()
          ? `-> ${await fs.readlink(path.join(layout, name))}`
          : await fs.readFile(path.join(layout, name), 'utf8')
      }
      return out
    },
  }
  return b
}

async function journal(environ: NodeJS.ProcessEnv, ...argv: string[]) {
  const stdout = new Sink()
  const stderr = new Sink()
  const code = await main(argv, { environ, stdout, stderr })
  return { code, out: stdout.text, err: stderr.text }
}

/** The command's own call, for the coded error it refuses with. */
function releaseDirect(environ: NodeJS.ProcessEnv, ...argv: string[]): Promise<number> {
  const args = parseCommandArgs(argv, releaseOptions, ['FILE'])
  return release(args, { config: loadConfig(environ), stdout: new Sink(), stderr: new Sink() })
}

void test('a kept journal whose files are whole at the end its row names is released: named first, then removed', async (t) => {
  const b = await box(t)
  b.row(A, 'flat')
  await b.files(A, 'flat')
  const file = await b.own(A)
  const r = await journal(b.environ, 'release', A)
  assert.equal(r.code, 0, r.err)
  assert.match(
    r.out,
    /^layout\/a\.example\.com\.journal: a\.example\.com's journal, started 2026-12-03T09:00:00\.000Z/m,
  )
  assert.match(
    r.out,
    /^ {2}a\.example\.com: its files are at \S+\/apps\/a\.example\.com, as its row says; nothing is at /m,
  )
  const removing = r.out.indexOf('removing layout/a.example.com.journal (unlink, then fsync ')
  assert.ok(removing > 0 && removing < r.out.indexOf('removed layout/a.example.com.journal: a.example.com released'))
  assert.match(r.err, /no agent runs on .*, so none holds a fence for a\.example\.com; an agent that starts wakes it/)
  await assert.rejects(fs.lstat(file), { code: 'ENOENT' })
  assert.equal(await fs.readFile(path.join(b.dataDir, 'apps', A, 'app.txt'), 'utf8'), A, 'the files stay')
})

void test('--dry-run says what it would do and changes nothing; the real run then does it', async (t) => {
  const b = await box(t)
  b.row(A, 'nested')
  await b.files(A, 'nested')
  await b.own(A)
  const before = await b.snapshot()
  const dry = await journal(b.environ, 'release', 'layout/a.example.com.journal', '--dry-run')
  assert.equal(dry.code, 0, dry.err)
  assert.match(dry.out, /its files are at \S+\/nested\/a\.example\.com\/data, as its row says/)
  assert.match(
    dry.out,
    /^--dry-run: would remove layout\/a\.example\.com\.journal and release a\.example\.com; nothing was changed$/m,
  )
  assert.doesNotMatch(dry.out, /removing/)
  assert.deepEqual(await b.snapshot(), before, 'D/layout is as it was')
  const real = await journal(b.environ, 'release', path.join(b.layout, 'a.example.com.journal'))
  assert.equal(real.code, 0, real.err)
  assert.deepEqual(await b.snapshot(), {})
})

void test('each unsettled state is refused, the dry run exactly as the real run, naming what was found and what to do', async (t) => {
  const cases: Array<[string, (b: Box) => Promise<void>, RegExp]> = [
    [
      'files at both ends',
      async (b) => {
        b.row(A, 'flat')
        await b.files(A, 'flat')
        await b.files(A, 'nested')
      },
      /a\.example\.com: files at both \S+ and \S+; keep the tenant's files at the end its row names/,
    ],
    [
      'files at neither end',
      (b) => Promise.resolve(b.row(A, 'flat')),
      /a\.example\.com: files at neither .*find the tenant's files/,
    ],
    [
      'a symlink at dest',
      async (b) => {
        b.row(A, 'nested')
        await fs.mkdir(path.join(b.dataDir, 'nested', A), { recursive: true })
        await fs.symlink('/etc', nestedPaths(b.dirs, A).dir)
      },
      /data is a symlink, not the tenant's directory; put the tenant's real directory/,
    ],
    [
      'the row names the other end',
      async (b) => {
        b.row(A, 'nested')
        await b.files(A, 'flat')
      },
      /its files are at \S+\/apps\/a\.example\.com, but its row names \S+\/nested\/a\.example\.com\/data; move the files/,
    ],
    [
      'the row names neither end',
      async (b) => {
        b.row(A, 'flat')
        await b.files(A, 'flat')
        // The row moved by hand to somewhere else.
        const reg = Registry.open(b.dataDir)
        reg.setPaths([{ host: A, dir: '/srv/a', socket: '/srv/a.sock', db: '' }])
        reg.close()
      },
      /its row names \/srv\/a, neither end/,
    ],
    [
      'the row gone, files at one end',
      async (b) => {
        await b.files(A, 'flat')
      },
      /the row is gone while its files are at \S+; add the row back \(`layoutd routes add a\.example\.com --hibernate/,
    ],
  ]
  for (const [name, arrange, why] of cases) {
    await t.test(name, async (t) => {
      const b = await box(t)
      await arrange(b)
      await b.own(A)
      const before = await b.snapshot()
      const dry = await journal(b.environ, 'release', A, '--dry-run')
      const real = await journal(b.environ, 'release', A)
      assert.equal(dry.code, 1)
      assert.equal(real.code, 1)
      assert.equal(dry.err, real.err, 'the dry run refuses exactly what the real run refuses')
      assert.match(
        real.err,
        /^layoutd journal: refused: layout\/a\.example\.com\.journal names a move not settled, so nothing was changed:\n/,
      )
      assert.match(real.err, why)
      assert.equal(real.out, '', 'nothing is said to be done')
      assert.deepEqual(await b.snapshot(), before, 'nothing changed')
      await assert.rejects(releaseDirect(b.environ, A), { code: 'journal_unsettled' })
    })
  }
})

void test('the row gone and no files at either end: nothing to move, released', async (t) => {
  const b = await box(t)
  await b.own(A)
  const r = await journal(b.environ, 'release', `${A}.journal`)
  assert.equal(r.code, 0, r.err)
  assert.match(r.out, /a\.example\.com: no row, and no files at either end: nothing to move/)
  assert.deepEqual(await b.snapshot(), {})
})

void test('a settled batch is released whole; each host says if another journal or a hold still fences it', async (t) => {
  const b = await box(t)
  b.row(A, 'flat')
  await b.files(A, 'flat')
  b.row(B, 'nested')
  await b.files(B, 'nested')
  await b.batch(7, [A, B, C])
  await b.own(B)
  await fs.writeFile(path.join(b.layout, `${A}.hold`), JSON.stringify({ v: 1, host: A, to: 'nested', reason: 'x' }))
  const r = await journal(b.environ, 'release', '_batch-7.journal')
  assert.equal(r.code, 0, r.err)
  assert.match(
    r.out,
    /^layout\/_batch-7\.journal: a batch's journal of 3 moves, started 2026-12-03T10:00:00\.000Z; every move is settled:$/m,
  )
  assert.match(r.out, /^ {2}a\.example\.com: its files are at .*; it stays fenced by its hold marker/m)
  assert.match(
    r.out,
    /^ {2}b\.example\.com: its files are at .*; it stays fenced: layout\/b\.example\.com\.journal names it too$/m,
  )
  assert.match(r.out, /^ {2}c\.example\.com: no row, and no files at either end: nothing to move$/m)
  assert.match(
    r.out,
    /^removed layout\/_batch-7\.journal: a\.example\.com, b\.example\.com, c\.example\.com released$/m,
  )
  assert.deepEqual(Object.keys(await b.snapshot()), [`${A}.hold`, `${B}.journal`])
})

void test('an unsettled batch is refused whole, naming each unsettled host; the file stays as it was', async (t) => {
  const b = await box(t)
  b.row(A, 'flat')
  await b.files(A, 'flat')
  b.row(B, 'flat')
  await b.files(B, 'flat')
  await b.files(B, 'nested')
  b.row(C, 'flat')
  await b.batch(9, [A, B, C])
  const before = await b.snapshot()
  const r = await journal(b.environ, 'release', 'layout/_batch-9.journal')
  assert.equal(r.code, 1)
  assert.match(r.err, /refused: layout\/_batch-9\.journal names 2 of 3 moves not settled, so nothing was changed:/)
  assert.match(r.err, /^ {2}b\.example\.com: files at both /m)
  assert.match(r.err, /^ {2}c\.example\.com: files at neither /m)
  assert.doesNotMatch(r.err, /a\.example\.com/)
  assert.deepEqual(await b.snapshot(), before)
  // A host of the batch with no journal of its own is pointed at the batch's file.
  const host = await journal(b.environ, 'release', A)
  assert.equal(host.code, 1)
  assert.match(
    host.err,
    /a\.example\.com has no journal of its own; layout\/_batch-9\.journal names it: release that file/,
  )
})

void test('a journal that cannot be read back is refused with journal_unreadable, and left as it is', async (t) => {
  const b = await box(t)
  b.row(A, 'flat')
  await b.files(A, 'flat')
  await fs.writeFile(path.join(b.layout, `${A}.journal`), '{"v":1,"host":"a.exa')
  const batch = await b.batch(4, [A, B])
  const text = JSON.parse(await fs.readFile(batch, 'utf8')) as { moves: Array<{ from: { dir: string } }> }
  const second = text.moves[1]
  if (second !== undefined) second.from.dir = '/etc'
  await fs.writeFile(batch, JSON.stringify(text))
  const before = await b.snapshot()
  const own = await journal(b.environ, 'release', A)
  assert.equal(own.code, 1)
  assert.match(
    own.err,
    /refused: layout\/a\.example\.com\.journal is not JSON .*; nothing was changed\. Decide from where/,
  )
  assert.match(own.err, /`layoutd journal show a\.example\.com\.journal`/)
  assert.match(own.err, /runbook\.md#a-kept-journal/)
  const bad = await journal(b.environ, 'release', '_batch-4.journal')
  assert.equal(bad.code, 1)
  assert.match(bad.err, /refused: layout\/_batch-4\.journal move 1 \(b\.example\.com\) /)
  assert.match(bad.err, /runbook\.md#a-batch-journal/, 'a batch journal points at the batch row of the runbook')
  await assert.rejects(releaseDirect(b.environ, A), { code: 'journal_unreadable' })
  await assert.rejects(releaseDirect(b.environ, '_batch-4.journal'), { code: 'journal_unreadable' })
  assert.deepEqual(await b.snapshot(), before)
})

void test('hostile names: nothing outside D/layout is read or removed through FILE', async (t) => {
  const b = await box(t)
  const outside = path.join(await tmpDir(t), 'elsewhere')
  await fs.mkdir(outside)
  // A journal that would release, outside D/layout, and a symlink to it inside.
  const victim = path.join(outside, `${B}.journal`)
  await fs.writeFile(victim, JSON.stringify({ v: 1, ...b.move(B), generation: 1, startedAt: 'x' }))
  await fs.symlink(victim, path.join(b.layout, `${B}.journal`))
  await b.own(A)
  const before = await b.snapshot()
  const refusals: Array<[string, RegExp]> = [
    ['../registry.db', /has a `\.\.` in it/],
    ['layout/../registry.db', /has a `\.\.` in it/],
    [`${b.layout}/../layout/${A}.journal`, /has a `\.\.` in it/],
    ['/etc/passwd', /is not a file of /],
    [victim, /is not a file of /],
    [`sub/${A}.journal`, /is not a file of /],
    ['_batch-x.journal', /is neither a journal’s name nor a host/],
    ['a b', /is neither a journal’s name nor a host/],
    [`${B}.journal`, /is a symlink \(layout\/b\.example\.com\.journal\), not a journal file/],
    [B, /is a symlink/],
  ]
  for (const [arg, why] of refusals) {
    const r = await journal(b.environ, 'release', arg)
    assert.equal(r.code, 1, arg)
    assert.match(r.err, why, arg)
    await assert.rejects(releaseDirect(b.environ, arg), { code: 'journal_outside_layout' }, arg)
  }
  assert.deepEqual(await b.snapshot(), before, 'D/layout as it was')
  assert.ok((await fs.lstat(victim)).isFile(), 'the file outside is still there')
  const none = await journal(b.environ, 'release', C)
  assert.equal(none.code, 1)
  assert.match(none.err, /no journal "c\.example\.com" in /)
  assert.equal((await journal(b.environ, 'release')).code, 2, 'FILE is required')
})

void test('a D/layout that is a symlink is refused before anything under it is read', async (t) => {
  const b = await box(t)
  await b.own(A)
  const elsewhere = path.join(await tmpDir(t), 'layout')
  await fs.rename(b.layout, elsewhere)
  await fs.symlink(elsewhere, b.layout)
  const r = await journal(b.environ, 'release', A)
  assert.equal(r.code, 1)
  assert.match(r.err, /layout is a symlink, not a directory/)
  await assert.rejects(releaseDirect(b.environ, A), { code: 'data_root_not_directory' })
  assert.deepEqual(await fs.readdir(elsewhere), [`${A}.journal`], 'the journal behind the link stays')
})

void test('beside an agent: a host it is moving is refused; a kept one is released and the agent asked for a run', async (t) => {
  const b = await box(t)
  b.row(A, 'flat')
  await b.files(A, 'flat')
  await b.own(A)
  const identity = {
    dataDir: await fs.realpath(b.dataDir),
    pid: process.pid,
    startId: 'fake',
    startedAt: new Date().toISOString(),
  }
  const { agent, url } = await listen(t, { identity })
  const lock = AgentLock.acquire(b.dataDir)
  t.after(() => lock.release())
  lock.listening(new URL(url).host)
  const report = sampleReport()
  report.rows = { [A]: { layout: 'fenced', code: 'in_flight', reason: 'layout move to nested in flight', note: '' } }
  agent.reportValue = report
  const moving = await journal(b.environ, 'release', A)
  assert.equal(moving.code, 1)
  assert.match(
    moving.err,
    /a\.example\.com: the agent reports in_flight: its move is under way or not judged yet; wait/,
  )
  assert.equal(agent.kicks, 0)

  agent.reportValue = {
    ...report,
    rows: { [A]: { layout: 'fenced', code: 'ambiguous', reason: 'ambiguous: files at both …', note: '' } },
  }
  const r = await journal(b.environ, 'release', A)
  assert.equal(r.code, 0, r.err)
  assert.match(r.out, /^asked the agent for a run: it releases a\.example\.com now \(outcome released\)$/m)
  assert.equal(agent.kicks, 1)
  assert.deepEqual(await b.snapshot(), {})
})

void test('an agent that holds the data root but does not answer: refused, nothing changed', async (t) => {
  const b = await box(t)
  b.row(A, 'flat')
  await b.files(A, 'flat')
  await b.own(A)
  const lock = AgentLock.acquire(b.dataDir)
  t.after(() => lock.release())
  const before = await b.snapshot()
  const r = await journal(b.environ, 'release', A)
  assert.equal(r.code, 1)
  assert.match(r.err, /an agent holds .* but could not be asked whether a move of this journal is under way/)
  await assert.rejects(releaseDirect(b.environ, A), { code: 'agent_unreachable' })
  assert.deepEqual(await b.snapshot(), before)
})

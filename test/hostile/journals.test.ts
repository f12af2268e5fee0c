// Journals and hold markers planted or corrupted in D/layout. A journal
// that cannot be acted on keeps its host fenced with a reason that names the
// file and what is wrong with it, and nothing else changes (the fence takes
// a generation: the registry's counter is the one row that moves). A hold
// marker that does not read back stands; one named for no valid host is
// reported and left alone; a temporary file a crash left is removed, and
// nothing more.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import fs from 'node:fs/promises'
import path from 'node:path'
import { after, before, test } from 'node:test'
import { flatPaths, nestedPaths } from '../../src/domain/paths.js'
import { diffFingerprints, type Fingerprint } from '../helpers/fingerprint.js'
import { addFlat, converge, fileScope, hostileBox, recordIntent, report, type HostileBox } from './box.js'
import { tmpDir } from '../helpers/tmp.js'
import { until } from '../helpers/until.js'

const file = fileScope(after)
let box: HostileBox
const HOST = 'a.example.com'

before(async () => {
  box = await hostileBox(file, {
    before: async (b) => {
      await addFlat(b, HOST)
      await addFlat(b, 'b.example.com')
      await recordIntent(b, 'flat')
      await fs.mkdir(path.join(b.config.dataDir, 'layout'), { mode: 0o700 })
    },
  })
})

/** Not the record of the intent the agent applied (design §7.7), written at its first read of the store. */
const notApplied = (l: string): boolean => !l.startsWith('layout/intent.applied ')

/** Asserts that from before to after only the registry's generation counter moved (a fence was raised). */
function onlyGeneration(before: Fingerprint, after: Fingerprint): void {
  const d = diffFingerprints(before, after)
  assert.deepEqual(
    [...d.added, ...d.removed].filter((l) => !l.startsWith('meta {"key":"generation"') && notApplied(l)),
    [],
    'nothing but the fence generation changed',
  )
}

const layout = () => path.join(box.config.dataDir, 'layout')

/** The codes of a journal recovery keeps, the host fenced until an operator decides. */
const KEPT: ReadonlySet<string> = new Set([
  'journal_invalid',
  'journals_differ',
  'ambiguous',
  'files_missing',
  'dest_symlink',
  'row_gone',
  'row_elsewhere',
  'row_ahead',
  'files_unknown',
])

/** A well-formed journal of a move of host to nested, with fields overridden. */
function journal(host: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    v: 1,
    host,
    to: 'nested',
    from: flatPaths(box.config, host),
    dest: nestedPaths(box.config, host),
    generation: 1,
    startedAt: new Date().toISOString(),
    ...extra,
  }
}

/**
 * Plants `<HOST>.journal` with make, runs the leg, and asserts the host is
 * kept fenced for why and nothing else changed; then removes the journal
 * (an operator deciding) and asserts the host is released, flat as it was.
 */
async function kept(
  make: (file: string) => Promise<void>,
  why: RegExp,
  host = HOST,
  decide: () => Promise<void> = () => Promise.resolve(),
): Promise<void> {
  const f = path.join(layout(), `${host}.journal`)
  await make(f)
  const before = box.fp()
  try {
    const run = await converge(box)
    const mine = run.results.find((r) => r.host === host)
    assert.equal(mine?.outcome, 'held', JSON.stringify(run.results))
    assert.match(mine.reason, why)
    assert.ok(KEPT.has(mine.code), `a kept journal's code: ${mine.code}`)
    const row = (await report(box)).rows[host]
    if (row !== undefined) {
      assert.equal(row.layout, 'fenced')
      assert.match(row.reason, why)
      assert.equal(row.code, mine.code, 'the row says the code the run did')
      const claim = await box.app.inject({ method: 'POST', url: `/wakes/${host}`, remoteAddress: '127.0.0.1' })
      assert.equal(claim.statusCode, 409, 'a host whose journal is kept does not wake')
    }
    onlyGeneration(before, box.fp())
  } finally {
    await fs.rm(f, { recursive: true, force: true })
    await decide()
  }
  const run = await converge(box)
  assert.equal(run.results.find((r) => r.host === host)?.outcome, 'released')
  if (host === HOST) assert.equal((await report(box)).rows[host]?.layout, 'flat')
}

const write = (data: unknown) => (f: string) => fs.writeFile(f, typeof data === 'string' ? data : JSON.stringify(data))

void test('a journal that is not JSON keeps its host fenced, naming the file', async () => {
  await kept(write('{"v": 1, "host": '), /journal .*a\.example\.com\.journal is not JSON/)
})

void test('a journal naming another host', async () => {
  await kept(write(journal('b.example.com')), /names host "b\.example\.com", not a\.example\.com/)
})

void test('a journal whose dest is outside the data root (/etc)', async () => {
  await kept(
    write(journal(HOST, { dest: { dir: '/etc', socket: '/run/x.sock', db: '' } })),
    /dest is not the nested paths of a\.example\.com/,
  )
})

void test('a journal whose from is a traversal path', async () => {
  const from = { ...flatPaths(box.config, HOST), dir: path.join(box.config.dataDir, 'apps', '..', '..', 'outside') }
  await kept(write(journal(HOST, { from })), /from is not the flat paths of a\.example\.com/)
})

void test('a journal whose db lies outside its dir', async () => {
  const from = { ...flatPaths(box.config, HOST), db: '/etc/shadow' }
  const dest = { ...nestedPaths(box.config, HOST), db: path.join(nestedPaths(box.config, HOST).dir, 'shadow') }
  await kept(write(journal(HOST, { from, dest })), /db "\/etc\/shadow" is not inside dir/)
})

void test('a journal of a format version this build does not know', async () => {
  await kept(write(journal(HOST, { v: 2 })), /not a journal: \/v/)
})

void test('a journal with a negative generation', async () => {
  await kept(write(journal(HOST, { generation: -1 })), /not a journal: \/generation/)
})

void test('a journal with a field the format does not name', async () => {
  await kept(write(journal(HOST, { exec: 'sh' })), /not a journal/)
})

void test('a journal that is a symlink to a good one is not followed', async () => {
  const real = path.join(box.dir, 'journal-elsewhere.json')
  await fs.writeFile(real, JSON.stringify(journal(HOST)))
  await kept((f) => fs.symlink(real, f), /cannot be read: .*ELOOP/)
})

void test("a directory in a journal's place", async () => {
  await kept((f) => fs.mkdir(f), /cannot be read: it is a directory, not a regular file/)
})

void test('a journal of 2 MB is refused unread, naming its size', async () => {
  await kept((f) => fs.writeFile(f, ' '.repeat(2 << 20)), /cannot be read: it is 2097152 bytes, over the 1048576/)
})

void test('a good journal of a host the registry does not have', async () => {
  const host = 'ghost.example.com'
  const dir = flatPaths(box.config, host).dir
  await fs.mkdir(dir, { recursive: true })
  try {
    await kept(write(journal(host)), /the row is gone from the registry while its files are at/, host)
  } finally {
    await fs.rm(dir, { recursive: true })
  }
})

void test('a good journal whose files are at both ends: ambiguous, an operator decides', async () => {
  const dest = nestedPaths(box.config, HOST).dir
  await fs.mkdir(dest, { recursive: true })
  // The operator decides for the flat end: the stray nested dir goes too, or the host is not where its row says.
  const decide = () => fs.rm(path.dirname(dest), { recursive: true, force: true })
  try {
    await kept(write(journal(HOST)), /ambiguous: files at both .* and .*; an operator decides/, HOST, decide)
  } finally {
    await decide()
  }
})

void test("a FIFO in a journal's place does not block the pass", async () => {
  const f = path.join(layout(), `${HOST}.journal`)
  execFileSync('mkfifo', [f])
  try {
    let finished = false
    const run = converge(box).finally(() => (finished = true))
    // The run must end on its own. A read that opens the FIFO without
    // O_NONBLOCK would wait for a writer for ever; if the run has not ended
    // within the bound, a writer opens it (ENXIO while no reader waits) and
    // closes it at once, handing the reader an end of file so the run ends
    // and the case fails instead of hanging. (A writer's open cannot tell a
    // stuck reader from one that has the FIFO open for an instant to fstat
    // it, so it is not the test.)
    const ended = await until('the run to end', () => finished, 10_000).catch(() => false)
    if (!ended) {
      await until('a writer to free the stuck reader', async () => {
        try {
          await (await fs.open(f, fs.constants.O_WRONLY | fs.constants.O_NONBLOCK)).close()
          return true
        } catch {
          return false
        }
      })
    }
    const results = (await run).results
    assert.equal(ended, true, 'the pass waited on the FIFO')
    assert.match(results.find((r) => r.host === HOST)?.reason ?? '', /not a regular file|cannot be read/)
  } finally {
    await fs.rm(f, { force: true })
    await converge(box)
  }
})

// ---- at start: a fresh box on planted files ------------------------------------

/** A box started on what plant leaves in D/layout; answers it with the fingerprint from just before its start. */
async function startedOn(
  t: { after(fn: () => unknown): void },
  plant: (layoutDir: string, b: HostileBox) => Promise<void>,
): Promise<{ b: HostileBox; before: Fingerprint }> {
  let before: Fingerprint | undefined
  const b = await hostileBox(t, {
    before: async (x) => {
      await addFlat(x, HOST)
      await recordIntent(x, 'flat')
      // The gate's own tree, made before the fingerprint: the cases are about D/layout.
      await fs.mkdir(path.join(x.config.dataDir, 'nested'), { recursive: true })
      const dir = path.join(x.config.dataDir, 'layout')
      await fs.mkdir(dir, { recursive: true, mode: 0o700 })
      await plant(dir, x)
      before = x.fp()
    },
  })
  if (before === undefined) throw new Error('not planted')
  return { b, before }
}

void test('at start, a journal named for no valid host is reported and left alone', async (t) => {
  const { b, before } = await startedOn(t, (dir) =>
    fs.writeFile(path.join(dir, 'Evil..example.com.journal'), JSON.stringify({ v: 1 })),
  )
  const line = b.lines().find((l) => l.msg.includes('Evil..example.com.journal'))
  assert.match(line?.msg ?? '', /not named for a valid host; left alone/)
  onlyGeneration(before, b.fp())
})

void test('at start, a hold marker that is not JSON stands: the host is fenced, naming the file', async (t) => {
  const { b, before } = await startedOn(t, (dir) => fs.writeFile(path.join(dir, `${HOST}.hold`), 'held?'))
  const row = (await report(b)).rows[HOST]
  assert.equal(row?.layout, 'fenced')
  assert.match(row.reason, /hold marker .*a\.example\.com\.hold is not JSON/)
  onlyGeneration(before, b.fp())
})

void test('at start, a hold marker for another host stands, and says so', async (t) => {
  const { b, before } = await startedOn(t, (dir) =>
    fs.writeFile(
      path.join(dir, `${HOST}.hold`),
      JSON.stringify({ v: 1, host: 'b.example.com', to: 'nested', reason: 'x', heldAt: '2026-01-01T00:00:00Z' }),
    ),
  )
  assert.match(
    (await report(b)).rows[HOST]?.reason ?? '',
    /is not a hold marker for a\.example\.com; an operator decides/,
  )
  onlyGeneration(before, b.fp())
})

void test('at start, a hold marker that is a symlink is not followed, and stands', async (t) => {
  const { b, before } = await startedOn(t, async (dir, x) => {
    const real = path.join(x.dir, 'hold-elsewhere')
    await fs.writeFile(
      real,
      JSON.stringify({ v: 1, host: HOST, to: 'flat', reason: 'x', heldAt: '2026-01-01T00:00:00Z' }),
    )
    await fs.symlink(real, path.join(dir, `${HOST}.hold`))
  })
  assert.match((await report(b)).rows[HOST]?.reason ?? '', /cannot be read: .*ELOOP/)
  onlyGeneration(before, b.fp())
})

void test('at start, a good hold marker of a host the registry does not have is dropped: that file, and nothing else', async (t) => {
  const { b, before } = await startedOn(t, (dir) =>
    fs.writeFile(
      path.join(dir, 'ghost.example.com.hold'),
      JSON.stringify({ v: 1, host: 'ghost.example.com', to: 'nested', reason: 'x', heldAt: '2026-01-01T00:00:00Z' }),
    ),
  )
  const d = diffFingerprints(before, b.fp())
  assert.deepEqual(d.added.filter(notApplied), [])
  assert.deepEqual(
    d.removed.map((l) => l.split(' ')[0]),
    ['layout/ghost.example.com.hold'],
  )
  assert.ok(
    b
      .lines()
      .some(
        (l) =>
          /ghost\.example\.com.*hold dropped: the row is gone/.test(l.msg) ||
          /hold dropped: the row is gone/.test(JSON.stringify(l)),
      ),
  )
})

void test("at start, a journal's temporary file a crash left is removed: that file, and nothing else", async (t) => {
  const { b, before } = await startedOn(t, (dir) =>
    fs.writeFile(path.join(dir, `${HOST}.journal.tmp`), '{"v": 1, "host": "a.exa'),
  )
  const d = diffFingerprints(before, b.fp())
  assert.deepEqual(d.added.filter(notApplied), [])
  assert.deepEqual(
    d.removed.map((l) => l.split(' ')[0]),
    [`layout/${HOST}.journal.tmp`],
  )
  assert.equal((await report(b)).rows[HOST]?.layout, 'flat')
})

void test('D/layout as a symlink is refused at start, before anything behind it is read or moved', async (t) => {
  const outside = await tmpDir(t, 'layoutd-hostile-')
  let before: Fingerprint | undefined
  const b = await hostileBox(t, {
    start: false,
    before: async (x) => {
      await addFlat(x, HOST)
      await recordIntent(x, 'nested')
      await fs.writeFile(
        path.join(outside, `${HOST}.journal`),
        JSON.stringify({
          v: 1,
          host: HOST,
          to: 'nested',
          from: flatPaths(x.config, HOST),
          dest: nestedPaths(x.config, HOST),
          generation: 1,
          startedAt: new Date().toISOString(),
        }),
      )
      await fs.symlink(outside, path.join(x.config.dataDir, 'layout'))
      before = x.fp({ also: { outside } })
    },
  })
  await assert.rejects(b.agent.start(), /layout/)
  assert.ok(before !== undefined, 'the box was fingerprinted before its start')
  const d = diffFingerprints(before, b.fp({ also: { outside } }))
  assert.deepEqual(d, { added: [], removed: [] }, 'nothing behind the link was read and acted on')
})

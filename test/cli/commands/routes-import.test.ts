import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { Readable } from 'node:stream'
import { test, type TestContext } from 'node:test'
import { loadConfig } from '../../../src/config.js'
import { flatPaths, nestedPaths } from '../../../src/domain/paths.js'
import { Registry } from '../../../src/infra/registry.js'
import { routesCommand, type RoutesIo } from '../../../src/cli/commands/routes/index.js'
import { tmpDir } from '../../helpers/tmp.js'
import { Sink } from '../../helpers/sink.js'

async function setup(t: TestContext) {
  const dataDir = await tmpDir(t)
  const registry = Registry.open(dataDir)
  t.after(() => registry.close())
  const out = new Sink()
  const err = new Sink()
  const io: RoutesIo = {
    config: loadConfig({ CARLOS_DATA_DIR: dataDir, CARLOS_BOX: 'box-1' }),
    stdout: out,
    stderr: err,
    registry,
    mint: () => Promise.reject(new Error('import never mints')),
  }
  const file = async (name: string, lines: readonly unknown[]): Promise<string> => {
    const p = path.join(dataDir, name)
    await fs.writeFile(p, lines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l))).join('\n') + '\n')
    return p
  }
  return { dataDir, registry, out, err, io, file, run: (...argv: string[]) => routesCommand(argv, io) }
}

function row(i: number, extra: Record<string, unknown> = {}) {
  return {
    host: `t${i}.example.com`,
    kind: 'instance',
    hibernate: true,
    dir: `/srv/apps/t${i}`,
    socket: `/run/t${i}.sock`,
    ...extra,
  }
}

void test('import writes every row of a JSON Lines file, blank lines skipped', async (t) => {
  const s = await setup(t)
  const f = await s.file('rows.jsonl', [
    row(1),
    '',
    row(2, { db: '/srv/apps/t2/app.db' }),
    { host: 'static.example.com', kind: 'static', hibernate: false },
  ])
  assert.equal(await s.run('import', f), 0, s.err.text)
  assert.match(s.out.text, /imported 3 rows/)
  assert.deepEqual(
    s.registry.list().map((r) => [r.host, r.kind, r.hibernate, r.dir, r.socket, r.db]),
    [
      ['static.example.com', 'static', false, '', '', ''],
      ['t1.example.com', 'instance', true, '/srv/apps/t1', '/run/t1.sock', ''],
      ['t2.example.com', 'instance', true, '/srv/apps/t2', '/run/t2.sock', '/srv/apps/t2/app.db'],
    ],
  )
})

void test('one bad line refuses the whole file, every bad line named by number, and nothing is written', async (t) => {
  const s = await setup(t)
  assert.equal(await s.run('add', 'taken.example.com', '--dir', '/srv/taken', '--socket', '/run/taken.sock'), 0)
  const f = await s.file('bad.jsonl', [
    row(1),
    '{not json',
    row(3, { kind: 'daemon' }),
    row(4, { dir: 'relative/dir' }),
    row(1, { dir: '/srv/apps/other', socket: '/run/other.sock' }),
    row(6, { socket: '/run/taken.sock' }),
    row(7, { colour: 'blue' }),
    { host: 'bad_host!', kind: 'instance', hibernate: false },
    row(9, { dir: undefined }),
    row(10),
  ])
  assert.equal(await s.run('import', f), 1)
  const msg = s.err.text
  assert.match(msg, /8 bad lines, nothing was written/)
  for (const line of [2, 3, 4, 5, 6, 7, 8, 9]) assert.match(msg, new RegExp(`line ${line}: `), `line ${line} is named`)
  assert.doesNotMatch(msg, /line (1|10): /)
  assert.match(msg, /line 5: host t1\.example\.com is already on line 1/)
  assert.match(msg, /line 6: .*taken\.example\.com/)
  assert.match(msg, /line 7: unknown field\(s\) colour/)
  assert.deepEqual(
    s.registry.list().map((r) => r.host),
    ['taken.example.com'],
  )
})

void test('a host already in the registry refuses the file', async (t) => {
  const s = await setup(t)
  const f = await s.file('a.jsonl', [row(1)])
  assert.equal(await s.run('import', f), 0)
  assert.equal(await s.run('import', f), 1)
  assert.match(s.err.text, /line 1: host t1\.example\.com is already in the registry/)
  assert.equal(s.registry.list().length, 1)
})

void test('- reads standard input; an unreadable file is import_unreadable', async (t) => {
  const s = await setup(t)
  s.io.stdin = Readable.from([`${JSON.stringify(row(1))}\n${JSON.stringify(row(2))}`])
  assert.equal(await s.run('import', '-'), 0, s.err.text)
  assert.match(s.out.text, /imported 2 rows from standard input/)
  assert.equal(s.registry.list().length, 2)

  assert.equal(await s.run('import', path.join(s.dataDir, 'no-such.jsonl')), 1)
  assert.match(s.err.text, /cannot read .*no-such\.jsonl: .*ENOENT.*nothing was written/)
  assert.equal(await s.run('import'), 2, 'FILE is required')
})

void test('the registry refuses a batch whose paths another row claims, as a whole', (t) => {
  return setup(t).then((s) => {
    s.registry.add({
      host: 'a.example.com',
      kind: 'instance',
      hibernate: true,
      dir: '/srv/a',
      socket: '/run/a.sock',
      db: '',
    })
    const batch = [
      {
        host: 'b.example.com',
        kind: 'instance' as const,
        hibernate: true,
        dir: '/srv/b',
        socket: '/run/b.sock',
        db: '',
      },
      {
        host: 'c.example.com',
        kind: 'instance' as const,
        hibernate: true,
        dir: '/srv/a/inner',
        socket: '/run/c.sock',
        db: '',
      },
    ]
    assert.throws(() => s.registry.addMany(batch), { code: 'path_claimed' })
    assert.deepEqual(
      s.registry.list().map((r) => r.host),
      ['a.example.com'],
    )
  })
})

// The 2 s figure is bench/all.ts's, on a quiet machine; here the bound only
// catches work that grows faster than the rows (a claims check per pair).
void test('10,000 rows import in one go, in time linear in the rows', async (t) => {
  const s = await setup(t)
  const f = await s.file(
    'big.jsonl',
    Array.from({ length: 10_000 }, (_, i) => row(i)),
  )
  const start = performance.now()
  assert.equal(await s.run('import', f), 0, s.err.text)
  const ms = performance.now() - start
  t.diagnostic(`10,000 rows in ${ms.toFixed(0)} ms`)
  assert.equal(s.registry.list().length, 10_000)
  assert.ok(ms < 20_000, `took ${ms.toFixed(0)} ms`)
})

void test('a hibernating instance without paths is minted as routes add mints it, its directories made', async (t) => {
  const s = await setup(t)
  let asked = 0
  s.io.mint = () => {
    asked++
    return Promise.resolve('flat')
  }
  let kicks = 0
  s.io.kick = () => {
    kicks++
    return Promise.resolve()
  }
  const f = await s.file('bare.jsonl', [
    { host: 'a.example.com', kind: 'instance', hibernate: true },
    { host: 'b.example.com', kind: 'instance', hibernate: true },
  ])
  assert.equal(await s.run('import', f), 0, s.err.text)
  assert.equal(asked, 1, 'one mint question for the file')
  assert.match(s.out.text, /imported 2 rows \(2 minted flat\)/)
  const paths = flatPaths(s.io.config, 'a.example.com')
  assert.deepEqual(
    s.registry.list().map((r) => [r.host, r.dir, r.socket]),
    [
      ['a.example.com', paths.dir, paths.socket],
      ['b.example.com', flatPaths(s.io.config, 'b.example.com').dir, flatPaths(s.io.config, 'b.example.com').socket],
    ],
  )
  assert.ok((await fs.stat(paths.dir)).isDirectory(), 'the minted dir is made')
  assert.equal(kicks, 1, 'the agent is asked for a run, so the rows are acted on without a restart')
  assert.equal(s.err.text, '', 'minted rows read flat: no warning')
})

void test('a row that will read foreign is warned of; the file still goes in', async (t) => {
  const s = await setup(t)
  const f = await s.file('odd.jsonl', [row(1)])
  assert.equal(await s.run('import', f), 0, s.err.text)
  assert.match(
    s.err.text,
    /warning: t1\.example\.com will read foreign: paths are neither the flat nor the nested shape/,
  )
})

void test('--skip-existing leaves a host already stored as it is, and imports the rest', async (t) => {
  const s = await setup(t)
  assert.equal(await s.run('import', await s.file('a.jsonl', [row(1)])), 0)
  const f = await s.file('b.jsonl', [row(1, { dir: '/srv/apps/changed', socket: '/run/changed.sock' }), row(2)])
  assert.equal(await s.run('import', f, '--skip-existing'), 0, s.err.text)
  assert.match(s.out.text, /imported 1 row from .*; 1 already in the registry left as they are/)
  assert.deepEqual(
    s.registry.list().map((r) => [r.host, r.dir]),
    [
      ['t1.example.com', '/srv/apps/t1'],
      ['t2.example.com', '/srv/apps/t2'],
    ],
  )
})

void test('a nested import looks the sockets group up once for the file, not once per host', async (t) => {
  const s = await setup(t)
  s.io.mint = () => Promise.resolve('nested')
  // getent as the name service answers it, counting its calls: each is a process started.
  const calls = path.join(s.dataDir, 'getent-calls')
  const getent = path.join(s.dataDir, 'getent')
  await fs.writeFile(getent, `#!/bin/sh\necho x >> '${calls}'\nexit 2\n`, { mode: 0o755 })
  s.io.getent = getent
  const f = await s.file(
    'bare.jsonl',
    Array.from({ length: 20 }, (_, i) => ({ host: `t${i}.example.com`, kind: 'instance', hibernate: true })),
  )
  assert.equal(await s.run('import', f), 0, s.err.text)
  assert.match(s.out.text, /imported 20 rows \(20 minted nested\)/)
  assert.equal((await fs.readFile(calls, 'utf8')).split('\n').filter(Boolean).length, 1)
  for (let i = 0; i < 20; i++)
    assert.ok((await fs.stat(nestedPaths(s.io.config, `t${i}.example.com`).dir)).isDirectory(), `t${i}'s dir is made`)
})

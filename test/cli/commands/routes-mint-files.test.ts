// `routes add` and `routes import` mint a row where the host's files
// already sit (design §5.5): never an empty directory beside the real one.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test, type TestContext } from 'node:test'
import { loadConfig } from '../../../src/config.js'
import type { Mode } from '../../../src/domain/modes.js'
import { flatPaths, nestedPaths, nestedRoot } from '../../../src/domain/paths.js'
import { Registry } from '../../../src/infra/registry.js'
import { routesCommand, type RoutesIo } from '../../../src/cli/commands/routes/index.js'
import { assertUnchanged, fingerprint } from '../../helpers/fingerprint.js'
import { tmpDir } from '../../helpers/tmp.js'
import { Sink } from '../../helpers/sink.js'

/** A box whose mint answers mode (the nested default in force, or a recorded intent). */
async function setup(t: TestContext, mode: Mode = 'nested') {
  const dataDir = await tmpDir(t)
  const config = loadConfig({ CARLOS_DATA_DIR: dataDir, CARLOS_BOX: 'box-1' })
  const registry = Registry.open(dataDir)
  t.after(() => registry.close())
  const out = new Sink()
  const err = new Sink()
  const io: RoutesIo = {
    config,
    stdout: out,
    stderr: err,
    registry,
    mint: () => Promise.resolve(mode),
    getent: path.join(dataDir, 'no-such-getent'),
  }
  const file = async (hosts: readonly string[]): Promise<string> => {
    const p = path.join(dataDir, 'rows.jsonl')
    const line = (host: string) => JSON.stringify({ host, kind: 'instance', hibernate: true })
    await fs.writeFile(p, hosts.map(line).join('\n') + '\n')
    return p
  }
  return { dataDir, config, registry, out, err, io, file, run: (...argv: string[]) => routesCommand(argv, io) }
}

/** A tenant's files in the given shape: its dir holding `host.txt`. */
async function tenantFiles(config: RoutesIo['config'], host: string, shape: Mode): Promise<string> {
  const dir = shape === 'flat' ? flatPaths(config, host).dir : nestedPaths(config, host).dir
  await fs.mkdir(dir, { recursive: true })
  await fs.writeFile(path.join(dir, 'host.txt'), host)
  return dir
}

async function exists(p: string): Promise<boolean> {
  return fs.lstat(p).then(
    () => true,
    (err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return false
      throw err
    },
  )
}

void test('import over flat files under a nested mint mints them flat: no nested dir made, files untouched', async (t) => {
  const s = await setup(t, 'nested')
  const hosts = ['t1.example.com', 't2.example.com', 't3.example.com']
  for (const h of hosts) await tenantFiles(s.config, h, 'flat')
  const before = await fs.readdir(path.join(s.dataDir, 'apps'), { recursive: true })
  assert.equal(await s.run('import', await s.file(hosts)), 0, s.err.text)
  assert.equal(await exists(path.join(s.dataDir, 'nested')), false, 'no nested directory beside the real one')
  assert.deepEqual(
    s.registry.list().map((r) => [r.host, r.dir, r.socket]),
    hosts.map((h) => [h, flatPaths(s.config, h).dir, flatPaths(s.config, h).socket]),
  )
  assert.match(s.out.text, /imported 3 rows \(3 minted flat, 3 of them where their files already were\)/)
  assert.deepEqual(await fs.readdir(path.join(s.dataDir, 'apps'), { recursive: true }), before)
  for (const h of hosts) assert.equal(await fs.readFile(path.join(flatPaths(s.config, h).dir, 'host.txt'), 'utf8'), h)
})

void test('routes add --hibernate over flat files under a nested mint mints the row flat', async (t) => {
  const s = await setup(t, 'nested')
  const dir = await tenantFiles(s.config, 'a.example.com', 'flat')
  assert.equal(await s.run('add', 'a.example.com', '--hibernate'), 0, s.err.text)
  assert.equal(await exists(nestedRoot(s.config, 'a.example.com')), false, 'no nested directory beside the real one')
  assert.deepEqual(s.registry.get('a.example.com'), {
    host: 'a.example.com',
    kind: 'instance',
    hibernate: true,
    ...flatPaths(s.config, 'a.example.com'),
  })
  assert.match(s.out.text, /added a\.example\.com \(minted flat, where its files already are\)/)
  assert.deepEqual(await fs.readdir(dir), ['host.txt'])
  assert.equal(await fs.readFile(path.join(dir, 'host.txt'), 'utf8'), 'a.example.com')
})

void test('nested files under a flat mint: the row is minted nested, at them', async (t) => {
  const s = await setup(t, 'flat')
  const dir = await tenantFiles(s.config, 'a.example.com', 'nested')
  assert.equal(await s.run('add', 'a.example.com', '--hibernate'), 0, s.err.text)
  assert.deepEqual(s.registry.get('a.example.com'), {
    host: 'a.example.com',
    kind: 'instance',
    hibernate: true,
    ...nestedPaths(s.config, 'a.example.com'),
  })
  assert.equal(await exists(flatPaths(s.config, 'a.example.com').dir), false)
  assert.deepEqual(await fs.readdir(dir), ['host.txt'])
})

void test('files in both shapes: add and import refuse, naming both dirs and the code, and nothing changes', async (t) => {
  const s = await setup(t, 'nested')
  const flat = await tenantFiles(s.config, 'b.example.com', 'flat')
  const nested = await tenantFiles(s.config, 'b.example.com', 'nested')
  const before = fingerprint(s.dataDir)

  assert.equal(await s.run('add', 'b.example.com', '--hibernate'), 1)
  assert.match(s.err.text, /refused to mint paths for b\.example\.com: there is something at both/)
  assert.ok(s.err.text.includes(flat) && s.err.text.includes(nested), s.err.text)
  assertUnchanged(before, fingerprint(s.dataDir))

  // One such host refuses the whole file, as any bad line does: the others are not imported either.
  s.err.chunks.length = 0
  assert.equal(await s.run('import', await s.file(['a.example.com', 'b.example.com', 'c.example.com'])), 1)
  assert.match(s.err.text, /1 bad line, nothing was written:\n {2}line 2: refused to mint paths for b\.example\.com/)
  assert.match(s.err.text, /\(mint_both_shapes\)/)
  assert.ok(s.err.text.includes(flat) && s.err.text.includes(nested), s.err.text)
  assert.doesNotMatch(s.err.text, /line [13]:/)
  assert.deepEqual(s.registry.list(), [])
  assert.equal(await exists(nestedRoot(s.config, 'a.example.com')), false, 'no dir made for the other hosts')
  await fs.rm(path.join(s.dataDir, 'rows.jsonl'))
  assertUnchanged(before, fingerprint(s.dataDir))
})

void test('something that is no directory at a dir is refused, naming it', async (t) => {
  const s = await setup(t, 'nested')
  await fs.mkdir(path.join(s.dataDir, 'apps'))
  const link = flatPaths(s.config, 'a.example.com').dir
  await fs.symlink('/etc', link)
  assert.equal(await s.run('add', 'a.example.com', '--hibernate'), 1)
  assert.ok(s.err.text.includes(`${link} is a symlink, not a directory`), s.err.text)
  assert.deepEqual(s.registry.list(), [])
  assert.equal(await exists(nestedRoot(s.config, 'a.example.com')), false)
})

void test("a host with no files anywhere is minted in the mint's shape, beside one minted at its files", async (t) => {
  const s = await setup(t, 'nested')
  await tenantFiles(s.config, 'a.example.com', 'flat')
  assert.equal(await s.run('import', await s.file(['a.example.com', 'b.example.com'])), 0, s.err.text)
  assert.deepEqual(
    s.registry.list().map((r) => [r.host, r.dir]),
    [
      ['a.example.com', flatPaths(s.config, 'a.example.com').dir],
      ['b.example.com', nestedPaths(s.config, 'b.example.com').dir],
    ],
  )
  assert.equal(await exists(nestedRoot(s.config, 'a.example.com')), false)
  assert.ok((await fs.stat(nestedPaths(s.config, 'b.example.com').dir)).isDirectory(), "b's nested dir is made")
  assert.ok((await fs.stat(path.dirname(nestedPaths(s.config, 'b.example.com').socket))).isDirectory())
  assert.match(
    s.out.text,
    /imported 2 rows \(1 minted flat, 1 minted nested, 1 of them where their files already were\)/,
  )
})

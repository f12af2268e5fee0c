// The instance keys between runs (design §4.5): after the start's backfill,
// each look mints the keys of the rows added since the last one (a host
// removed and added again with a fresh directory too) and tries again the
// hosts that got none, saying their reason once; a row already keyed is
// not looked at again, nor is anything when nothing changed.
import assert from 'node:assert/strict'
import fs from 'node:fs/promises'
import path from 'node:path'
import { test } from 'node:test'
import { InstanceKeys } from '../../src/agent/instance-key-backfill.js'
import { classify } from '../../src/domain/classify.js'
import { flatPaths, nestedPaths, type Dirs } from '../../src/domain/paths.js'
import type { Logger } from '../../src/domain/ports.js'
import type { Route } from '../../src/domain/schemas.js'
import { HostSlots, INSTANCE_ENV } from '../../src/infra/instance-keys.js'
import { Registry } from '../../src/infra/registry.js'
import { tmpDir } from '../helpers/tmp.js'

const KEY_FILE = /^CARLOS_INSTANCE_KEY=[0-9a-f]{64}\n$/

void test('each look mints only the keys of rows added since, retries the hosts that got none, and reads nothing when nothing changed', async (t) => {
  const dataDir = await tmpDir(t)
  const dirs: Dirs = { dataDir, runDir: path.join(dataDir, 'run') }
  // A clock a second ahead per stamp: a row added again is newer than every row seen before it.
  let tick = Date.parse('2026-12-03T10:00:00.000Z')
  const registry = Registry.open(dataDir, { now: () => new Date((tick += 1000)) })
  t.after(() => registry.close())
  const add = async (host: string): Promise<string> => {
    const p = flatPaths(dirs, host)
    await fs.mkdir(p.dir, { recursive: true })
    registry.add({ host, kind: 'instance', hibernate: true, ...p })
    return p.dir
  }
  const key = (dir: string) => fs.readFile(path.join(dir, INSTANCE_ENV), 'utf8')
  const lines: string[] = []
  const log = (_f: Record<string, unknown>, msg: string): void => void lines.push(msg)
  const logger: Logger = { debug: log, info: log, warn: log, error: log }
  const fenced = new Set(['f.example.com'])
  const asked: string[] = []
  const keys = new InstanceKeys({
    config: dirs,
    registry,
    pass: {
      classify: (route: Route, routes: readonly Route[]) => {
        asked.push(route.host)
        return classify(route, routes, {
          dirs,
          fenced: (h) => (fenced.has(h) ? { code: 'ambiguous', reason: 'ambiguous: kept' } : undefined),
        })
      },
    },
    slots: new HostSlots(),
    logger,
    signal: new AbortController().signal,
  })

  const a = await add('a.example.com')
  const f = await add('f.example.com')
  await keys.atStart()
  assert.match(await key(a), KEY_FILE)
  await assert.rejects(key(f), { code: 'ENOENT' }, 'a fenced host gets no key')
  assert.deepEqual(asked.sort(), ['a.example.com', 'f.example.com'])
  assert.ok(lines.includes('agent: instance keys at start: 1 minted, 0 present, 1 skipped, 0 failed'), lines.join('\n'))

  // Nothing added: only the fenced host is asked again, and its reason is not said again.
  asked.length = 0
  lines.length = 0
  await keys.sinceLastLook()
  assert.deepEqual(asked, ['f.example.com'])
  assert.deepEqual(lines, [])

  // A row added while the agent runs: its key is minted; the keyed row is not looked at.
  asked.length = 0
  const b = await add('b.example.com')
  await keys.sinceLastLook()
  assert.match(await key(b), KEY_FILE)
  assert.deepEqual(asked.sort(), ['b.example.com', 'f.example.com'])
  assert.deepEqual(lines, ['agent: instance keys since the last look: 1 minted, 0 present, 1 skipped, 0 failed'])

  // The fence lifted (a kept journal released): the host gets its key at the next look, and leaves the retries.
  fenced.clear()
  asked.length = 0
  await keys.sinceLastLook()
  assert.match(await key(f), KEY_FILE)
  asked.length = 0
  await keys.sinceLastLook()
  assert.deepEqual(asked, [], 'nothing new, nothing to retry: no row is looked at')

  // A host removed and added again, its directory made afresh: a new row, a new key.
  const before = await key(a)
  registry.remove('a.example.com')
  await fs.rm(a, { recursive: true })
  await add('a.example.com')
  await keys.sinceLastLook()
  assert.match(await key(a), KEY_FILE)
  assert.notEqual(await key(a), before)
  assert.deepEqual(asked, ['a.example.com'])
})

void test("a look after the pass's own rewrites scans nothing: the carried list has the same rows", async (t) => {
  const dataDir = await tmpDir(t)
  const dirs: Dirs = { dataDir, runDir: path.join(dataDir, 'run') }
  const registry = Registry.open(dataDir)
  t.after(() => registry.close())
  for (const host of ['a.example.com', 'b.example.com']) {
    const p = flatPaths(dirs, host)
    await fs.mkdir(p.dir, { recursive: true })
    registry.add({ host, kind: 'instance', hibernate: true, ...p })
  }
  let scans = 0
  const asked: string[] = []
  const noop = (): void => undefined
  const keys = new InstanceKeys({
    config: dirs,
    registry: {
      get: (host) => registry.get(host),
      snapshot: () => registry.snapshot(),
      addedAfter: (after) => {
        scans++
        return registry.addedAfter(after)
      },
    },
    pass: {
      classify: (route: Route, routes: readonly Route[]) => {
        asked.push(route.host)
        return classify(route, routes, { dirs, fenced: () => undefined })
      },
    },
    slots: new HostSlots(),
    logger: { debug: noop, info: noop, warn: noop, error: noop },
    signal: new AbortController().signal,
  })
  await keys.atStart()
  assert.equal(scans, 1)

  // The pass moves a's files and rewrites its row, on the agent's own connection: the list is carried.
  const moved = nestedPaths(dirs, 'a.example.com')
  await fs.mkdir(path.dirname(moved.dir), { recursive: true })
  await fs.rename(flatPaths(dirs, 'a.example.com').dir, moved.dir)
  registry.setPaths([{ host: 'a.example.com', ...moved }])
  asked.length = 0
  await keys.sinceLastLook()
  assert.equal(scans, 1, 'the registry was scanned for rows added after a rewrite that added none')
  assert.deepEqual(asked, [])

  // A row added by another process (`routes add` beside the agent): listed again, scanned, keyed.
  const cli = Registry.open(dataDir)
  const c = flatPaths(dirs, 'c.example.com')
  await fs.mkdir(c.dir, { recursive: true })
  cli.add({ host: 'c.example.com', kind: 'instance', hibernate: true, ...c })
  cli.close()
  await keys.sinceLastLook()
  assert.equal(scans, 2)
  assert.deepEqual(asked, ['c.example.com'])
  assert.match(await fs.readFile(path.join(c.dir, INSTANCE_ENV), 'utf8'), KEY_FILE)
})

import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { AppError } from '../../src/errors.js'
import { mintLayoutIntentWith, mintWhereFilesAre, nestedRowsPresent, type MintDeps } from '../../src/domain/mint.js'
import type { Route } from '../../src/domain/schemas.js'
import { FakeGate, FakeStore, intent } from './fakes.js'

const dirs = { dataDir: '/data', runDir: '/data/run' }

const nestedRow = (over: Partial<Route> = {}): Route => ({
  host: 'a.example.com',
  kind: 'instance',
  socket: '/data/nested/a.example.com/run/app.sock',
  dir: '/data/nested/a.example.com/data',
  db: '',
  hibernate: true,
  ...over,
})
const flatRow: Route = {
  host: 'b.example.com',
  kind: 'instance',
  socket: '/data/run/b.example.com.sock',
  dir: '/data/apps/b.example.com',
  db: '',
  hibernate: true,
}

function deps(over: Partial<MintDeps> = {}): MintDeps {
  return {
    store: new FakeStore([]),
    box: 'kass-1',
    dirs,
    layoutDefault: '',
    build: 'v0.25.0',
    gate: new FakeGate(null),
    ...over,
  }
}

const notReady = new FakeGate('probe: not yet run')

void describe('mintLayoutIntentWith', () => {
  void it("mints in the recorded intent's mode", async () => {
    assert.equal(
      await mintLayoutIntentWith(deps({ store: new FakeStore([intent({ mode: 'nested' })]), layoutDefault: 'flat' })),
      'nested',
    )
    assert.equal(
      await mintLayoutIntentWith(
        deps({ store: new FakeStore([intent({ mode: 'flat' })]), routes: () => [nestedRow()] }),
      ),
      'flat',
      'a recorded flat wins over nested siblings',
    )
  })

  void it('refuses with intent_unreadable when the read fails', async () => {
    await assert.rejects(
      mintLayoutIntentWith(deps({ store: new FakeStore(new Error('etcd: deadline exceeded')) })),
      (err: unknown) => {
        assert.ok(err instanceof AppError)
        assert.equal(err.code, 'intent_unreadable')
        assert.match(err.message, /etcd: deadline exceeded/)
        return true
      },
    )
  })

  void it('refuses with intent_unreadable, naming the intent and its mode, for an unknown mode', async () => {
    await assert.rejects(
      mintLayoutIntentWith(deps({ store: new FakeStore([intent({ id: 'i-3', mode: 'sideways' })]) })),
      (err: unknown) => {
        assert.ok(err instanceof AppError)
        assert.equal(err.code, 'intent_unreadable')
        assert.match(err.message, /layout intent i-3 names mode "sideways"/)
        return true
      },
    )
  })

  void it('with no intent, mints nested when the default applies', async () => {
    assert.equal(await mintLayoutIntentWith(deps()), 'nested')
  })

  void it('with no intent and the default blocked, mints flat', async () => {
    assert.equal(await mintLayoutIntentWith(deps({ gate: notReady })), 'flat')
    assert.equal(await mintLayoutIntentWith(deps({ build: 'v0.24.9' })), 'flat')
    assert.equal(await mintLayoutIntentWith(deps({ gate: null })), 'flat')
  })

  void it('with no intent and the default nested but not yet ready, mints nested beside a managed nested row', async () => {
    assert.equal(await mintLayoutIntentWith(deps({ gate: notReady, routes: () => [flatRow, nestedRow()] })), 'nested')
    assert.equal(
      await mintLayoutIntentWith(deps({ gate: notReady, routes: () => Promise.resolve([nestedRow()]) })),
      'nested',
    )
  })

  void it('counts only activator-managed rows at nested paths', async () => {
    assert.equal(await mintLayoutIntentWith(deps({ gate: notReady, routes: () => [flatRow] })), 'flat')
    assert.equal(
      await mintLayoutIntentWith(deps({ gate: notReady, routes: () => [nestedRow({ hibernate: false })] })),
      'flat',
    )
    assert.equal(
      await mintLayoutIntentWith(deps({ gate: notReady, routes: () => [nestedRow({ kind: 'sidecar' })] })),
      'flat',
    )
    assert.equal(await mintLayoutIntentWith(deps({ gate: notReady })), 'flat', 'no registry to ask')
  })

  void it('asks the registry only when the default is nested and valid', async () => {
    let asked = 0
    const routes = () => {
      asked++
      return [nestedRow()]
    }
    assert.equal(await mintLayoutIntentWith(deps({ layoutDefault: 'flat', routes })), 'flat')
    assert.equal(await mintLayoutIntentWith(deps({ layoutDefault: 'nestd', routes })), 'flat')
    assert.equal(asked, 0)
  })

  void it('fails, naming the listing, when the registry cannot be read', async () => {
    await assert.rejects(
      mintLayoutIntentWith(deps({ gate: notReady, routes: () => Promise.reject(new Error('SQLITE_BUSY')) })),
      /^Error: layout default: list routes: SQLITE_BUSY$/,
    )
  })
})

void describe('nestedRowsPresent', () => {
  void it('is true only for an activator-managed row at the nested paths', () => {
    assert.equal(nestedRowsPresent(dirs, [flatRow, nestedRow()]), true)
    assert.equal(nestedRowsPresent(dirs, [flatRow, nestedRow({ socket: '' })]), false)
    assert.equal(nestedRowsPresent(dirs, []), false)
  })
})

void describe('mintWhereFilesAre', () => {
  const dir = (p: string) => ({ path: p, directory: true, what: 'a directory' })
  const flatDir = dir('/data/apps/a.example.com')
  const nestedDir = dir('/data/nested/a.example.com/data')

  void it("mints where the files are, whatever the rule's mode; nowhere: the rule's mode", () => {
    for (const mode of ['flat', 'nested'] as const) {
      assert.deepEqual(mintWhereFilesAre('a.example.com', mode, { flat: flatDir, nested: null }), {
        mode: 'flat',
        found: 'flat',
      })
      assert.deepEqual(mintWhereFilesAre('a.example.com', mode, { flat: null, nested: nestedDir }), {
        mode: 'nested',
        found: 'nested',
      })
      assert.deepEqual(mintWhereFilesAre('a.example.com', mode, { flat: null, nested: null }), { mode, found: 'none' })
    }
  })

  void it('refuses files in both shapes, and what is no directory, with a code naming the paths', () => {
    assert.throws(
      () => mintWhereFilesAre('a.example.com', 'nested', { flat: flatDir, nested: nestedDir }),
      (err: AppError) =>
        err.code === 'mint_both_shapes' &&
        err.statusCode === 409 &&
        err.message.includes(flatDir.path) &&
        err.message.includes(nestedDir.path),
    )
    const link = { path: '/data/apps/a.example.com', directory: false, what: 'a symlink' }
    assert.throws(
      () => mintWhereFilesAre('a.example.com', 'nested', { flat: link, nested: null }),
      (err: AppError) =>
        err.code === 'mint_not_a_directory' && err.message.includes('/data/apps/a.example.com is a symlink'),
    )
  })
})

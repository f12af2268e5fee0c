import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { IntentState } from '../../src/domain/intent-state.js'
import type { DeployStore, LayoutDirectory } from '../../src/domain/ports.js'
import { startupLayoutIntent, startupRecoveryIntent, type StartupDeps } from '../../src/domain/startup.js'
import { FakeGate, FakeLogger, FakeStore, hangUntilAborted, intent } from './fakes.js'

function dir(journals: string[] | Error, holds: string[] | Error): LayoutDirectory {
  const answer = (v: string[] | Error) => (v instanceof Error ? Promise.reject(v) : Promise.resolve(v))
  return { verifyRoots: () => Promise.resolve(), journalHosts: () => answer(journals), holdHosts: () => answer(holds) }
}

function setup(over: Partial<StartupDeps> & { store?: DeployStore | Error } = {}) {
  const logger = new FakeLogger()
  const state = new IntentState()
  const gate = new FakeGate(null)
  const store = over.store ?? new FakeStore([])
  let opens = 0
  const deps: StartupDeps = {
    layoutDir: dir(['a.example.com'], []),
    openStore: () => {
      opens++
      return store instanceof Error ? Promise.reject(store) : Promise.resolve(store)
    },
    box: 'kass-1',
    layoutDefault: '',
    build: 'v0.25.0',
    gate,
    state,
    logger,
    ...over,
  }
  return { deps, logger, state, gate, opens: () => opens }
}

void describe('startupRecoveryIntent', () => {
  void it('is none without opening the store when no journal or hold marker is present', async () => {
    const t = setup({ layoutDir: dir([], []) })
    assert.equal(await startupRecoveryIntent(t.deps), 'none')
    assert.equal(t.opens(), 0)
    assert.equal(t.state.version, 0, 'the published intent is left for the first serial move')
    assert.deepEqual(t.logger.lines, [])
  })

  void it('reads the intent when a journal is present', async () => {
    const t = setup({ layoutDir: dir(['a.example.com'], []), store: new FakeStore([intent({ mode: 'nested' })]) })
    assert.equal(await startupRecoveryIntent(t.deps), 'nested')
    assert.equal(t.opens(), 1)
    assert.equal(t.state.lastIntent(), 'nested')
  })

  void it('reads the intent when only a hold marker is present', async () => {
    const t = setup({ layoutDir: dir([], ['b.example.com']), store: new FakeStore([intent({ mode: 'flat' })]) })
    assert.equal(await startupRecoveryIntent(t.deps), 'flat')
    assert.equal(t.opens(), 1)
  })

  void it('reads anyway when the journals cannot be listed, and says so', async () => {
    const t = setup({
      layoutDir: dir(new Error('EACCES: permission denied'), []),
      store: new FakeStore([intent({ mode: 'flat' })]),
    })
    assert.equal(await startupRecoveryIntent(t.deps), 'flat')
    assert.equal(t.opens(), 1)
    assert.deepEqual(t.logger.msgs(), [
      'layout: list journals at start: EACCES: permission denied; reading the intent anyway',
    ])
  })

  void it('reads anyway when the hold markers cannot be listed, and says so', async () => {
    const t = setup({ layoutDir: dir([], new Error('EIO')), store: new FakeStore([intent({ mode: 'flat' })]) })
    assert.equal(await startupRecoveryIntent(t.deps), 'flat')
    assert.deepEqual(t.logger.msgs(), ['layout: list hold markers at start: EIO; reading the intent anyway'])
  })

  void it('is unreadable, noted, when the store cannot be opened', async () => {
    const t = setup({ store: new Error('etcd: connection refused') })
    assert.equal(await startupRecoveryIntent(t.deps), 'unreadable')
    assert.equal(t.state.lastIntent(), 'unreadable')
    assert.deepEqual(t.logger.msgs(), ['layout: intent -> unreadable: deploy store: etcd: connection refused'])
  })

  void it('bounds the open by the timeout', async () => {
    const t = setup({ timeoutMs: 5 })
    let seen: AbortSignal | undefined
    t.deps.openStore = (signal) => {
      seen = signal
      return hangUntilAborted(signal)
    }
    assert.equal(await startupRecoveryIntent(t.deps), 'unreadable')
    assert.equal(seen?.aborted, true)
    assert.match(t.logger.msgs()[0] ?? '', /^layout: intent -> unreadable: deploy store: .*(timeout|aborted)/i)
  })

  void it('bounds the read by the timeout', async () => {
    const store = new FakeStore([], true)
    const t = setup({ store, timeoutMs: 5 })
    assert.equal(await startupRecoveryIntent(t.deps), 'unreadable')
    assert.equal(store.reads, 1)
    assert.equal(t.state.lastIntent(), 'unreadable')
  })
})

void describe('startupLayoutIntent', () => {
  const opened = (store: DeployStore) => ({ ok: true as const, store })

  void it('is unreadable, noted and logged, when the store was not opened', async () => {
    const t = setup()
    assert.equal(await startupLayoutIntent(t.deps, { ok: false, error: new Error('no endpoints') }), 'unreadable')
    assert.equal(t.state.lastIntent(), 'unreadable')
    assert.equal(t.state.unreadableWhy(), 'deploy store: no endpoints')
  })

  void it('is unreadable when the read fails', async () => {
    const t = setup()
    assert.equal(
      await startupLayoutIntent(t.deps, opened(new FakeStore(new Error('malformed record 7')))),
      'unreadable',
    )
    assert.equal(t.state.lastIntent(), 'unreadable')
    assert.deepEqual(t.logger.msgs(), ['layout: intent -> unreadable: malformed record 7'])
  })

  void it('is unreadable when the intent names a mode this build does not know', async () => {
    const t = setup()
    const store = new FakeStore([intent({ id: 'i-9', mode: 'sideways' })])
    assert.equal(await startupLayoutIntent(t.deps, opened(store)), 'unreadable')
    assert.equal(t.state.lastIntent(), 'unreadable')
    assert.deepEqual(t.logger.msgs(), ['layout: intent i-9 -> unreadable: mode "sideways" is not flat or nested'])
  })

  void it('is the recorded mode, noted', async () => {
    const t = setup()
    assert.equal(
      await startupLayoutIntent(t.deps, opened(new FakeStore([intent({ mode: 'nested', box: 'kass-1' })]))),
      'nested',
    )
    assert.equal(t.state.lastIntent(), 'nested')
    assert.deepEqual(t.logger.lines, [])
  })

  void it('reads only intents addressing this box', async () => {
    const t = setup({ layoutDefault: 'flat' })
    const store = new FakeStore([
      intent({ id: 'a', mode: 'nested', box: 'kass-1' }),
      intent({ id: 'b', mode: 'flat', box: 'kass-2' }),
    ])
    assert.equal(await startupLayoutIntent(t.deps, opened(store)), 'nested')
  })

  void it('with no intent and the default nested, is unreadable (fail closed) without asking the gate', async () => {
    const t = setup()
    assert.equal(await startupLayoutIntent(t.deps, opened(new FakeStore([]))), 'unreadable')
    assert.equal(t.gate.asked, 0)
    assert.equal(t.state.lastIntent(), 'none')
    assert.deepEqual(t.state.lastDefault(), {
      applied: false,
      blocked: 'agent starting: holds and journals kept until the first serial move asks the isolation gate',
      blockedBy: 'starting',
    })
    assert.deepEqual(t.logger.msgs(), [
      'layout: no intent recorded at start -> holds and journals kept until the first serial move asks the isolation gate (nested by default)',
    ])
  })

  void it('with no intent and the flat opt-out, is none', async () => {
    const t = setup({ layoutDefault: 'flat' })
    assert.equal(await startupLayoutIntent(t.deps, opened(new FakeStore([]))), 'none')
    assert.equal(t.state.lastIntent(), 'none')
    assert.deepEqual(t.state.lastDefault(), { applied: false, blocked: '', blockedBy: '' })
  })

  void it('with no intent and an invalid default, is none with the reason noted', async () => {
    const t = setup({ layoutDefault: 'nestd' })
    assert.equal(await startupLayoutIntent(t.deps, opened(new FakeStore([]))), 'none')
    assert.equal(t.state.lastDefault().blocked, 'CARLOS_LAYOUT_DEFAULT=nestd is not nested or flat; staying flat')
  })
})

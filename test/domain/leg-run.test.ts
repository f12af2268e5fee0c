import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { IntentState } from '../../src/domain/intent-state.js'
import { layoutLegWith, logLayoutResults, type LegRunDeps } from '../../src/domain/leg-run.js'
import type { Mode, Result } from '../../src/domain/modes.js'
import { FakeGate, FakeLogger, FakeStore, intent } from './fakes.js'

function setup(over: Partial<LegRunDeps> = {}, answer: Result[] = []) {
  const logger = new FakeLogger()
  const state = new IntentState()
  const gate = new FakeGate(null)
  const converged: Array<[Mode, boolean]> = []
  const deps: LegRunDeps = {
    store: new FakeStore([]),
    box: 'kass-1',
    layoutDefault: '',
    build: 'v0.25.0',
    gate,
    state,
    logger,
    converge: (mode, force) => {
      converged.push([mode, force])
      return Promise.resolve(answer)
    },
    ...over,
  }
  return { deps, logger, state, gate, converged }
}

/** What the run said besides its summary line (tested on its own below). */
const told = (logger: FakeLogger): string[] => logger.msgs().filter((m) => !m.startsWith('layout: run toward '))

const NESTED_BY_DEFAULT =
  'layout: no intent recorded -> nested by default (CARLOS_LAYOUT_DEFAULT unset or nested; record `layoutd intent revert --box LABEL` to opt out)'

void describe('layoutLegWith', () => {
  void it('converges nothing when the intent is unreadable, and notes it', async () => {
    const t = setup({ store: new FakeStore(new Error('etcd: deadline exceeded')) })
    t.state.noteIntent('nested')
    assert.deepEqual(
      await layoutLegWith(t.deps),
      { results: [], retry: false, unfinished: true },
      'an unreadable read could not finish: the leg comes back for it',
    )
    assert.deepEqual(t.converged, [])
    assert.equal(t.state.lastIntent(), 'unreadable', 'a failed read overwrites the mode seen before')
    assert.deepEqual(t.logger.msgs(), [
      'layout: intent -> unreadable: etcd: deadline exceeded; not converging this move',
    ])
  })

  void it('converges nothing when the intent names an unknown mode', async () => {
    const t = setup({ store: new FakeStore([intent({ id: 'i-7', mode: 'inside-out' })]) })
    assert.deepEqual(await layoutLegWith(t.deps), { results: [], retry: false, unfinished: false })
    assert.deepEqual(t.converged, [])
    assert.equal(t.state.lastIntent(), 'unreadable')
    assert.deepEqual(t.logger.msgs(), [
      'layout: intent i-7 -> unreadable: mode "inside-out" is not flat or nested; not converging this move',
    ])
  })

  void it('converges to a recorded intent with its force, and notes it', async () => {
    const held: Result = {
      host: 'a.example.com',
      outcome: 'held',
      code: 'second_name',
      reason: 'a file of its has a second name',
    }
    const t = setup({ store: new FakeStore([intent({ mode: 'nested', force: true, box: 'kass-1' })]) }, [held])
    const out = await layoutLegWith(t.deps)
    assert.deepEqual(t.converged, [['nested', true]])
    assert.deepEqual(out, { results: [held], retry: true, unfinished: false })
    assert.equal(t.state.lastIntent(), 'nested')
    assert.equal(t.gate.asked, 0, 'a recorded intent does not consult the default')
  })

  void it('a run with a failed result could not finish: the leg comes back for it', async () => {
    const failed: Result = {
      host: 'a.example.com',
      outcome: 'failed',
      code: 'stop_timeout',
      reason: 'stop timed out: still awake after 60s',
      to: 'nested',
    }
    const t = setup({ store: new FakeStore([intent({ mode: 'nested' })]) }, [failed])
    assert.deepEqual(await layoutLegWith(t.deps), { results: [failed], retry: false, unfinished: true })
  })

  void it('converges to a recorded flat without force', async () => {
    const t = setup({ store: new FakeStore([intent({ mode: 'flat' })]) }, [
      { host: 'a.example.com', outcome: 'moved', code: '', reason: '' },
    ])
    assert.deepEqual((await layoutLegWith(t.deps)).retry, false)
    assert.deepEqual(t.converged, [['flat', false]])
    assert.equal(t.state.lastIntent(), 'flat')
  })

  void it('ignores an intent for another box', async () => {
    const t = setup({ store: new FakeStore([intent({ mode: 'flat', box: 'kass-2' })]) })
    await layoutLegWith(t.deps)
    assert.deepEqual(t.converged, [['nested', false]])
  })

  void it('with no intent on a ready box, converges nested by default without force, logging once per change', async () => {
    const t = setup()
    await layoutLegWith(t.deps)
    await layoutLegWith(t.deps)
    assert.deepEqual(t.converged, [
      ['nested', false],
      ['nested', false],
    ])
    assert.equal(t.state.lastIntent(), 'nested')
    assert.deepEqual(t.state.lastDefault(), { applied: true, blocked: '', blockedBy: '' })
    assert.deepEqual(told(t.logger), [NESTED_BY_DEFAULT])
  })

  void it('with no intent on a box that is not ready, converges nothing, notes why and retries', async () => {
    const t = setup()
    t.gate.verdict = 'probe: not yet run'
    assert.deepEqual(await layoutLegWith(t.deps), { results: [], retry: true, unfinished: false })
    assert.deepEqual(await layoutLegWith(t.deps), { results: [], retry: true, unfinished: false })
    assert.deepEqual(t.converged, [])
    assert.equal(t.state.lastIntent(), 'none')
    assert.deepEqual(t.state.lastDefault(), {
      applied: false,
      blocked: 'isolation not ready: probe: not yet run',
      blockedBy: 'gate',
    })
    t.gate.verdict = 'probe: ready: false'
    await layoutLegWith(t.deps)
    t.gate.verdict = null
    await layoutLegWith(t.deps)
    assert.deepEqual(told(t.logger), [
      'layout: no intent recorded; nested by default is not in force -> isolation not ready: probe: not yet run',
      'layout: no intent recorded; nested by default is not in force -> isolation not ready: probe: ready: false',
      NESTED_BY_DEFAULT,
    ])
    assert.deepEqual(t.converged, [['nested', false]])
  })

  void it('logs the default again after a recorded intent came and went', async () => {
    const store = new FakeStore([])
    const t = setup({ store })
    await layoutLegWith(t.deps)
    t.state.noteIntent('flat')
    await layoutLegWith(t.deps)
    assert.deepEqual(told(t.logger), [NESTED_BY_DEFAULT, NESTED_BY_DEFAULT])
  })

  void it('with the flat opt-out, converges nothing, logs nothing and does not retry', async () => {
    const t = setup({ layoutDefault: 'flat' })
    assert.deepEqual(await layoutLegWith(t.deps), { results: [], retry: false, unfinished: false })
    assert.deepEqual(t.converged, [])
    assert.deepEqual(t.logger.lines, [])
    assert.equal(t.state.lastIntent(), 'none')
  })

  void it('with an invalid default, converges nothing, says why once and does not retry', async () => {
    const t = setup({ layoutDefault: 'nestd' })
    assert.deepEqual(await layoutLegWith(t.deps), { results: [], retry: false, unfinished: false })
    assert.deepEqual(await layoutLegWith(t.deps), { results: [], retry: false, unfinished: false })
    assert.deepEqual(t.logger.msgs(), [
      'layout: no intent recorded; nested by default is not in force -> CARLOS_LAYOUT_DEFAULT=nestd is not nested or flat; staying flat',
    ])
  })

  void it('below the floor, converges nothing and retries (the default is still asked for)', async () => {
    const t = setup({ build: 'v0.24.9' })
    assert.deepEqual(await layoutLegWith(t.deps), { results: [], retry: true, unfinished: false })
    assert.equal(
      t.state.lastDefault().blocked,
      'this box runs v0.24.9, below v0.25.0, the first release on which nested instances wake',
    )
  })

  void it('a stopped leg does not publish unreadable', async () => {
    const t = setup({ store: new FakeStore([], true) })
    t.state.noteIntent('nested')
    const ac = new AbortController()
    const run = layoutLegWith(t.deps, ac.signal)
    ac.abort(new Error('layout leg stopped'))
    await assert.rejects(run, /layout leg stopped/)
    assert.equal(t.state.lastIntent(), 'nested')
    assert.deepEqual(t.converged, [])
  })
})

void describe('logLayoutResults', () => {
  const log = (rs: Result[]) => {
    const logger = new FakeLogger()
    const retry = logLayoutResults(rs, logger)
    return { retry, msgs: logger.msgs() }
  }

  void it('is silent on unchanged hosts and asks for no retry', () => {
    assert.deepEqual(log([{ host: 'a.example.com', outcome: 'unchanged', code: '', reason: '' }]), {
      retry: false,
      msgs: [],
    })
  })

  void it('logs a held host and asks for a retry', () => {
    assert.deepEqual(
      log([{ host: 'a.example.com', outcome: 'held', code: 'second_name', reason: 'a file of its has a second name' }]),
      {
        retry: true,
        msgs: ['layout: a.example.com: held -> a file of its has a second name'],
      },
    )
  })

  void it('gathers awake deferrals into one line and asks for a retry', () => {
    assert.deepEqual(
      log([
        { host: 'a.example.com', outcome: 'deferred', code: 'awake_grace', reason: 'awake: 42m of grace left' },
        { host: 'b.example.com', outcome: 'moved', code: '', reason: '' },
        { host: 'c.example.com', outcome: 'deferred', code: 'awake_grace', reason: 'awake: 3m of grace left' },
      ]),
      {
        retry: true,
        msgs: [
          'layout: b.example.com: moved',
          'layout: deferred until asleep -> a.example.com (awake: 42m of grace left), c.example.com (awake: 3m of grace left)',
        ],
      },
    )
  })

  void it('builds no routine line a logger would drop, and still warns of what needs a look', () => {
    class InfoLogger extends FakeLogger {
      asked: string[] = []
      isLevelEnabled(level: 'debug' | 'info'): boolean {
        this.asked.push(level)
        return level !== 'debug'
      }
    }
    const logger = new InfoLogger()
    const retry = logLayoutResults(
      [
        { host: 'a.example.com', outcome: 'moved', code: '', reason: '', to: 'nested' },
        { host: 'b.example.com', outcome: 'failed', code: 'rename_failed', reason: 'rename: EIO' },
        { host: 'c.example.com', outcome: 'released', code: '', reason: '' },
        { host: 'd.example.com', outcome: 'held', code: 'second_name', reason: 'a file of its has a second name' },
      ],
      logger,
    )
    assert.equal(retry, true)
    assert.deepEqual(logger.asked, ['debug'])
    assert.deepEqual(
      logger.lines.map((l) => [l.level, l.msg]),
      [
        ['warn', 'layout: b.example.com: failed -> rename: EIO'],
        ['warn', 'layout: d.example.com: held -> a file of its has a second name'],
      ],
    )
    // Start-up recovery logs its routine lines at info, which this logger keeps.
    const startup = new InfoLogger()
    logLayoutResults(
      [
        {
          host: 'a.example.com',
          outcome: 'recovered',
          code: 'move_finished',
          reason: 'finished the move to flat',
          to: 'flat',
        },
      ],
      startup,
      'info',
    )
    assert.deepEqual(startup.msgs(), ['layout: a.example.com: recovered -> finished the move to flat'])
  })

  void it('logs a deferral for any other reason on its own, without a retry', () => {
    assert.deepEqual(
      log([{ host: 'a.example.com', outcome: 'deferred', code: 'socket_too_long', reason: 'socket path too long' }]),
      {
        retry: false,
        msgs: ['layout: a.example.com: deferred -> socket path too long'],
      },
    )
  })

  void it('logs a result about the whole run without a host', () => {
    assert.deepEqual(log([{ host: '', outcome: 'failed', code: 'run_failed', reason: 'registry is locked' }]), {
      retry: false,
      msgs: ['layout: failed -> registry is locked'],
    })
  })

  void it('logs host and outcome alone when there is no reason, and the reason when there is', () => {
    assert.deepEqual(
      log([
        { host: 'a.example.com', outcome: 'moved', code: '', reason: '' },
        {
          host: 'b.example.com',
          outcome: 'refused',
          code: 'gate_shut',
          reason: 'isolation not ready: probe: not yet run',
        },
      ]).msgs,
      ['layout: a.example.com: moved', 'layout: b.example.com: refused -> isolation not ready: probe: not yet run'],
    )
  })

  void it('carries the result as structured fields', () => {
    const logger = new FakeLogger()
    logLayoutResults([{ host: 'a.example.com', outcome: 'moved', code: '', reason: '', to: 'nested' }], logger)
    assert.deepEqual(logger.lines[0]?.fields, {
      host: 'a.example.com',
      outcome: 'moved',
      code: '',
      reason: '',
      to: 'nested',
    })
  })
})

void describe('the levels an operator alerts on', () => {
  void it('one summary line a run at info; failed, refused and held at warn, a line a host; the rest at debug; unreadable at warn', async () => {
    const answer: Result[] = [
      { host: 'a.example.com', outcome: 'moved', code: '', reason: '', to: 'nested' },
      {
        host: 'b.example.com',
        outcome: 'refused',
        code: 'gate_shut',
        reason: 'isolation not ready: probe',
        to: 'nested',
      },
      { host: 'c.example.com', outcome: 'failed', code: 'stop_timeout', reason: 'stop timed out', to: 'nested' },
      { host: 'd.example.com', outcome: 'held', code: 'second_name', reason: 'db outside dir', to: 'nested' },
      {
        host: 'e.example.com',
        outcome: 'deferred',
        code: 'awake_grace',
        reason: 'awake: 59m of grace left',
        to: 'nested',
      },
      { host: 'f.example.com', outcome: 'unchanged', code: '', reason: '', to: 'nested' },
    ]
    const t = setup({ store: new FakeStore([intent()]) }, answer)
    await layoutLegWith(t.deps)
    const at = (level: string) => t.logger.lines.filter((l) => l.level === level).map((l) => l.msg)
    assert.deepEqual(at('info'), [
      'layout: run toward nested: 1 moved, 1 refused, 1 failed, 1 held, 1 deferred, 1 unchanged',
    ])
    assert.deepEqual(t.logger.lines.find((l) => l.level === 'info')?.fields, {
      mode: 'nested',
      moved: 1,
      refused: 1,
      failed: 1,
      held: 1,
      deferred: 1,
      unchanged: 1,
    })
    assert.deepEqual(at('warn'), [
      'layout: b.example.com: refused -> isolation not ready: probe',
      'layout: c.example.com: failed -> stop timed out',
      'layout: d.example.com: held -> db outside dir',
    ])
    assert.deepEqual(at('debug'), [
      'layout: a.example.com: moved',
      'layout: deferred until asleep -> e.example.com (awake: 59m of grace left)',
    ])
    const u = setup({ store: new FakeStore(new Error('etcd: down')) })
    await layoutLegWith(u.deps)
    assert.deepEqual(
      u.logger.lines.map((l) => l.level),
      ['warn'],
    )
  })
})

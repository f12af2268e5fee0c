import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { hostsReached, Leg, type LegOptions, type LegOutcome } from '../../src/domain/leg.js'
import type { Result } from '../../src/domain/modes.js'
import type { LegRun } from '../../src/domain/schemas.js'
import { deferred, FakeClock, FakeLogger } from './fakes.js'

interface Call {
  signal: AbortSignal
  finish: (o: LegOutcome) => void
}

/** Runs the leg makes, each blocked until the test finishes it. */
class Runs {
  readonly calls: Call[] = []
  inFlight = 0
  maxInFlight = 0
  #waiters: Array<{ n: number; resolve: () => void }> = []

  readonly run = (signal: AbortSignal): Promise<LegOutcome> => {
    const d = deferred<LegOutcome>()
    this.inFlight++
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight)
    this.calls.push({
      signal,
      finish: (o) => {
        this.inFlight--
        d.resolve(o)
      },
    })
    for (const w of this.#waiters.filter((w) => this.calls.length >= w.n)) w.resolve()
    return d.promise
  }

  /** Resolves once n runs have started. */
  started(n: number): Promise<void> {
    if (this.calls.length >= n) return Promise.resolve()
    const d = deferred()
    this.#waiters.push({ n, resolve: d.resolve })
    return d.promise
  }

  finish(i: number, results: Result[] = [], retry = false, unfinished = false): void {
    const c = this.calls[i]
    assert.ok(c, `run ${i} has started`)
    c.finish({ results, retry, unfinished })
  }
}

function setup(over: Partial<LegOptions> = {}) {
  const clock = new FakeClock()
  const logger = new FakeLogger()
  const runs = new Runs()
  const leg = new Leg({ run: runs.run, clock, logger, retryMs: 600_000, ...over })
  return { clock, logger, runs, leg }
}

const moved = (host: string): Result => ({ host, outcome: 'moved', code: '', reason: '', to: 'nested' })

void describe('layoutLeg.kick', () => {
  void it('runs one pass at a time, and once more for any number of kicks during a run', async () => {
    const { leg, runs } = setup()
    leg.kick()
    await runs.started(1)
    assert.deepEqual([leg.state().running, leg.state().pending], [true, false])
    leg.kick()
    leg.kick()
    leg.kick()
    assert.equal(leg.state().pending, true)
    assert.equal(runs.calls.length, 1)
    runs.finish(0)
    await runs.started(2)
    assert.equal(leg.state().pending, false)
    runs.finish(1)
    await leg.wait()
    assert.equal(runs.calls.length, 2)
    assert.equal(runs.maxInFlight, 1)
    assert.deepEqual([leg.state().running, leg.state().pending], [false, false])
  })

  void it("starts the run off the kicker's stack", async () => {
    const { leg, runs } = setup()
    leg.kick()
    assert.equal(runs.calls.length, 0)
    assert.equal(leg.state().running, true)
    await runs.started(1)
    runs.finish(0)
    await leg.wait()
  })

  void it('records the run under way, then the finished run', async () => {
    const { leg, runs, clock } = setup()
    leg.kick()
    await runs.started(1)
    const under = leg.state().lastRun
    assert.deepEqual(under, { startedAt: new Date(clock.now()).toISOString(), finishedAt: null, results: [] })
    clock.advance(1500)
    runs.finish(0, [moved('a.example.com')])
    await leg.wait()
    assert.deepEqual(leg.state().lastRun, {
      startedAt: under?.startedAt,
      finishedAt: new Date(clock.now()).toISOString(),
      results: [moved('a.example.com')],
    })
  })
})

void describe('layoutLeg.wait', () => {
  void it('resolves at once when the leg has never run', async () => {
    const { leg, runs } = setup()
    await leg.wait()
    assert.equal(runs.calls.length, 0)
  })

  void it('resolves only when no run is running or pending', async () => {
    const { leg, runs } = setup()
    leg.kick()
    await runs.started(1)
    leg.kick()
    let idle = false
    void leg.wait().then(() => {
      idle = true
    })
    runs.finish(0)
    await runs.started(2)
    assert.equal(idle, false, 'the pending run was still due')
    runs.finish(1)
    await leg.wait()
    assert.equal(idle, true)
  })
})

void describe('the retry timer', () => {
  void it('is armed by a run that asks for it, after retryMs', async () => {
    const { leg, runs, clock } = setup({ retryMs: 600_000 })
    leg.kick()
    await runs.started(1)
    runs.finish(0, [], true)
    await leg.wait()
    assert.equal(clock.pending(), 1)
    assert.equal(leg.state().retryAt, new Date(clock.now() + 600_000).toISOString())
    clock.advance(600_000)
    await runs.started(2)
    runs.finish(1, [], false)
    await leg.wait()
    assert.equal(clock.pending(), 0, 'a run that does not ask arms nothing')
  })
})

void describe('layoutLeg.stop', () => {
  void it('cancels the retry timer and makes later kicks no-ops', async () => {
    const { leg, runs, clock } = setup({ retryMs: 1_000 })
    leg.kick()
    await runs.started(1)
    runs.finish(0, [], true)
    await leg.wait()
    assert.equal(clock.pending(), 1, 'the run asked for a retry')
    leg.stop()
    assert.equal(clock.pending(), 0)
    assert.equal(leg.state().retryAt, null)
    clock.advance(1_000)
    leg.kick()
    assert.equal(clock.pending(), 0)
    await leg.wait()
    assert.equal(runs.calls.length, 1)
    assert.equal(await leg.kickAndWait(1_000), null)
  })

  void it('aborts the run under way and drops the pending one', async () => {
    const { leg, runs } = setup()
    leg.kick()
    await runs.started(1)
    leg.kick()
    const signal = runs.calls[0]?.signal
    assert.equal(signal?.aborted, false)
    leg.stop()
    assert.equal(signal?.aborted, true)
    runs.finish(0)
    await leg.wait()
    assert.equal(runs.calls.length, 1)
    assert.equal(leg.state().running, false)
  })
})

void describe('layoutLeg.kickAndWait', () => {
  void it('answers the first run that starts after the kick, not the one under way', async () => {
    const { leg, runs } = setup()
    leg.kick()
    await runs.started(1)
    const answer = leg.kickAndWait(60_000)
    runs.finish(0, [moved('under-way.example.com')])
    await runs.started(2)
    runs.finish(1, [moved('asked.example.com')])
    const run = await answer
    assert.deepEqual(run?.results, [moved('asked.example.com')])
    assert.notEqual(run?.finishedAt, null)
  })

  void it('answers the run it started on an idle leg, and cancels its timer', async () => {
    const { leg, runs, clock } = setup()
    const answer = leg.kickAndWait(60_000)
    await runs.started(1)
    runs.finish(0, [moved('a.example.com')])
    assert.deepEqual((await answer)?.results, [moved('a.example.com')])
    assert.equal(clock.pending(), 0)
  })

  void it('answers null when the run has not finished in time', async () => {
    const { leg, runs, clock } = setup()
    const answer = leg.kickAndWait(5_000)
    await runs.started(1)
    clock.advance(5_000)
    assert.equal(await answer, null)
    runs.finish(0)
    await leg.wait()
  })

  void it('answers null when the leg stops before the run it waits for starts', async () => {
    const { leg, runs } = setup()
    leg.kick()
    await runs.started(1)
    const answer = leg.kickAndWait(60_000)
    leg.stop()
    runs.finish(0)
    assert.equal(await answer, null)
    assert.equal(runs.calls.length, 1)
  })
})

void describe('layoutLeg (a run that throws)', () => {
  void it('is logged, recorded as one failed result, retried on the timer, and does not wedge the leg', async () => {
    const clock = new FakeClock()
    const logger = new FakeLogger()
    let calls = 0
    const leg = new Leg({
      clock,
      logger,
      retryMs: 1_000,
      run: () => {
        calls++
        if (calls === 1) return Promise.reject(new Error('registry is locked'))
        if (calls === 2) throw new Error('thrown before any await')
        return Promise.resolve({ results: [moved('a.example.com')], retry: false, unfinished: false })
      },
    })
    assert.deepEqual((await leg.kickAndWait(60_000))?.results, [
      { host: '', outcome: 'failed', code: 'run_failed', reason: 'registry is locked' },
    ])
    assert.deepEqual(
      logger.lines.map((l) => [l.level, l.msg]),
      [
        ['error', 'layout: leg run failed: registry is locked'],
        ['info', `layout: leg run could not finish; the leg comes back at ${leg.state().retryAt ?? ''} (attempt 1)`],
      ],
    )
    assert.equal(clock.pending(), 1)
    assert.deepEqual((await leg.kickAndWait(60_000))?.results, [
      { host: '', outcome: 'failed', code: 'run_failed', reason: 'thrown before any await' },
    ])
    assert.deepEqual((await leg.kickAndWait(60_000))?.results, [moved('a.example.com')])
    assert.equal(calls, 3)
  })
})

void describe('layoutLeg (metrics hooks)', () => {
  void it('calls onRunStart with the run under way and onRunEnd with the finished run and its seconds', async () => {
    const starts: LegRun[] = []
    const ends: Array<[LegRun, number]> = []
    const { leg, runs, clock } = setup({ onRunStart: (r) => starts.push(r), onRunEnd: (r, s) => ends.push([r, s]) })
    leg.kick()
    await runs.started(1)
    assert.equal(starts.length, 1)
    assert.equal(starts[0]?.finishedAt, null)
    clock.advance(2_500)
    runs.finish(0, [moved('a.example.com')])
    await leg.wait()
    assert.equal(ends.length, 1)
    assert.deepEqual(ends[0]?.[0].results, [moved('a.example.com')])
    assert.equal(ends[0]?.[1], 2.5)
  })

  void it('logs a hook that throws and carries on', async () => {
    const { leg, runs, logger } = setup({
      onRunStart: () => {
        throw new Error('gauge gone')
      },
    })
    const answer = leg.kickAndWait(60_000)
    await runs.started(1)
    runs.finish(0, [moved('a.example.com')])
    assert.deepEqual((await answer)?.results, [moved('a.example.com')])
    assert.deepEqual(logger.msgs(), ['layout: leg onRunStart hook failed: gauge gone'])
  })
})

void describe('layoutLeg.progress', () => {
  void it('grows the record of the run under way; the run answer replaces it; nothing lands outside a run', async () => {
    const { runs, leg } = setup()
    leg.progress(moved('early.example.com'))
    leg.kick()
    await runs.started(1)
    leg.progress(moved('a.example.com'))
    leg.progress(moved('b.example.com'))
    const during = leg.state()
    assert.equal(during.running, true)
    assert.deepEqual(
      during.lastRun?.results.map((r) => r.host),
      ['a.example.com', 'b.example.com'],
    )
    runs.finish(0, [moved('a.example.com'), moved('b.example.com'), moved('c.example.com')])
    await leg.wait()
    assert.deepEqual(
      leg.state().lastRun?.results.map((r) => r.host),
      ['a.example.com', 'b.example.com', 'c.example.com'],
    )
    leg.progress(moved('late.example.com'))
    assert.equal(leg.state().lastRun?.results.length, 3)
  })
})

void describe('layoutLeg.waiting', () => {
  void it('shows what the run under way waits on, only while it does, and never outside a run', async () => {
    const { runs, leg } = setup()
    leg.waiting('too early')
    assert.equal(leg.state().waiting, undefined)
    leg.kick()
    await runs.started(1)
    leg.waiting('the activator to stop t01.example.com (awake, force)')
    assert.equal(leg.state().waiting, 'the activator to stop t01.example.com (awake, force)')
    leg.waiting(null)
    assert.equal('waiting' in leg.state(), false)
    leg.waiting('the activator to stop t02.example.com (awake, grace over)')
    runs.finish(0, [moved('t01.example.com')])
    await leg.wait()
    assert.equal('waiting' in leg.state(), false, 'a finished run waits on nothing')
  })
})

void describe('layoutLeg (a run that could not finish)', () => {
  const failed = (host: string): Result => ({
    host,
    outcome: 'failed',
    code: 'move_interrupted',
    reason: 'move interrupted: EIO',
    to: 'nested',
  })

  void it('comes back on the retry timer with backoff: doubling from retryMs, jittered down by at most a fifth, capped at ten times', async () => {
    let jitter = 0
    const { leg, runs, clock } = setup({ retryMs: 1_000, random: () => jitter })
    const delays: number[] = []
    for (let i = 0; i < 7; i++) {
      if (i === 0) leg.kick()
      else clock.advance(delays[i - 1] ?? 0)
      await runs.started(i + 1)
      runs.finish(i, [failed('a.example.com')], false, true)
      await leg.wait()
      const at = leg.state().retryAt
      assert.ok(at !== null, `run ${i + 1} left a retry`)
      delays.push(Date.parse(at) - clock.now())
      assert.equal(clock.pending(), 1, 'one retry timer')
    }
    assert.deepEqual(delays, [1_000, 2_000, 4_000, 8_000, 10_000, 10_000, 10_000])
    // Jitter only ever brings a retry sooner, by at most a fifth: never a tight loop, never past the cap.
    jitter = 0.999
    clock.advance(10_000)
    await runs.started(8)
    runs.finish(7, [failed('a.example.com')], false, true)
    await leg.wait()
    const jittered = Date.parse(leg.state().retryAt ?? '') - clock.now()
    assert.ok(jittered >= 8_000 && jittered < 10_000, `${jittered} ms`)
  })

  void it("a failing host's backoff never stretches the retry interval's re-check of a held or awake host", async () => {
    const { leg, runs, clock } = setup({ retryMs: 1_000, random: () => 0 })
    const delays: number[] = []
    for (let i = 0; i < 5; i++) {
      if (i === 0) leg.kick()
      else clock.advance(delays[i - 1] ?? 0)
      await runs.started(i + 1)
      // One host failed (backoff), another is awake and deferred (wall time): the earlier of the two.
      runs.finish(i, [failed('a.example.com')], true, true)
      await leg.wait()
      delays.push(Date.parse(leg.state().retryAt ?? '') - clock.now())
      assert.equal(clock.pending(), 1, 'one retry timer')
    }
    assert.deepEqual(delays, [1_000, 1_000, 1_000, 1_000, 1_000])
    // Once no host waits on wall time, the backoff it has built up stands.
    clock.advance(1_000)
    await runs.started(6)
    runs.finish(5, [failed('a.example.com')], false, true)
    await leg.wait()
    assert.equal(Date.parse(leg.state().retryAt ?? '') - clock.now(), 10_000)
  })

  void it('resets when a run finishes clean: the timer goes, and the next fault starts from retryMs again', async () => {
    const { leg, runs, clock } = setup({ retryMs: 1_000, random: () => 0 })
    leg.kick()
    await runs.started(1)
    runs.finish(0, [failed('a.example.com')], false, true)
    await leg.wait()
    clock.advance(1_000)
    await runs.started(2)
    runs.finish(1, [failed('a.example.com')], false, true)
    await leg.wait()
    assert.equal(Date.parse(leg.state().retryAt ?? ''), clock.now() + 2_000)
    leg.kick()
    await runs.started(3)
    runs.finish(2, [moved('a.example.com')])
    await leg.wait()
    assert.equal(leg.state().retryAt, null, 'a clean run that asks for nothing cancels the retry')
    assert.equal(clock.pending(), 0)
    leg.kick()
    await runs.started(4)
    runs.finish(3, [failed('a.example.com')], false, true)
    await leg.wait()
    assert.equal(Date.parse(leg.state().retryAt ?? ''), clock.now() + 1_000, 'the backoff starts again')
  })

  void it('a run that throws backs off too, and says when it comes back', async () => {
    const clock = new FakeClock()
    const logger = new FakeLogger()
    const retries: Array<number | null> = []
    const leg = new Leg({
      clock,
      logger,
      retryMs: 1_000,
      random: () => 0,
      run: () => Promise.reject(new Error('SQLITE_BUSY')),
      onRetryChange: (at) => retries.push(at),
    })
    await leg.kickAndWait(60_000)
    await leg.kickAndWait(60_000)
    assert.equal(Date.parse(leg.state().retryAt ?? ''), clock.now() + 2_000)
    assert.deepEqual(retries, [clock.now() + 1_000, clock.now() + 2_000])
    assert.match(
      logger.msgs().at(-1) ?? '',
      /^layout: leg run could not finish; the leg comes back at .* \(attempt 2\)$/,
    )
    leg.stop()
    assert.deepEqual(retries.at(-1), null, 'stop clears the retry it reports')
  })
})

void describe('a finished run', () => {
  void it('is one frozen record, handed as it is to the hook, each waiter and state(), after the turn the run ended in', async () => {
    const ended: LegRun[] = []
    const { runs, leg } = setup({ onRunEnd: (run) => ended.push(run) })
    const a = leg.kickAndWait(60_000)
    const b = leg.kickAndWait(60_000)
    await runs.started(1)
    runs.finish(0, [moved('a.example'), moved('b.example')])
    // The run's end goes out a turn later: nothing has been handed on in the tick it ended.
    assert.equal(ended.length, 0)
    const [ranA, ranB] = await Promise.all([a, b])
    assert.ok(ranA !== null && ranB !== null)
    assert.equal(ranA, ranB, 'every waiter gets the same record, not a copy each')
    assert.equal(ended[0], ranA, 'the hook has that record too')
    assert.equal(leg.state().lastRun, ranA, 'and state() answers it, uncopied')
    assert.ok(Object.isFrozen(ranA) && Object.isFrozen(ranA.results) && ranA.results.every((r) => Object.isFrozen(r)))
    assert.throws(() => {
      ranA.results.push(moved('c.example'))
    }, TypeError)
    assert.throws(() => {
      ;(ranA.results[0] as Result).reason = 'changed'
    }, TypeError)
    assert.deepEqual(ranA.results, [moved('a.example'), moved('b.example')])
  })

  void it('a run under way is still copied: it grows while it goes on', async () => {
    const { runs, leg } = setup()
    leg.kick()
    await runs.started(1)
    leg.progress(moved('a.example'))
    const seen = leg.state().lastRun
    assert.ok(seen !== null && !Object.isFrozen(seen))
    leg.progress(moved('b.example'))
    assert.equal(seen.results.length, 1, 'an answer of state() is not changed by later progress')
    assert.equal(leg.state().lastRun?.results.length, 2)
    runs.finish(0, [])
    await leg.wait()
  })
})

void describe('Leg.runUnderWay', () => {
  void it('answers the run under way once it finishes, beside the follow-up a kick then waits for', async () => {
    const { runs, leg } = setup()
    assert.equal(leg.runUnderWay(), null, 'no run under way: none')
    leg.kick()
    await runs.started(1)
    const underWay = leg.runUnderWay()
    assert.ok(underWay !== null)
    const followUp = leg.kickAndWait(60_000)
    runs.finish(0, [moved('a.example.com')])
    const first = await underWay
    assert.deepEqual(
      first?.results.map((r) => r.outcome),
      ['moved'],
      'the run that moved the host',
    )
    await runs.started(2)
    runs.finish(1, [{ host: 'a.example.com', outcome: 'unchanged', code: '', reason: '', to: 'nested' }])
    assert.deepEqual(
      (await followUp)?.results.map((r) => r.outcome),
      ['unchanged'],
    )
  })
})

void describe('hostsReached', () => {
  void it('counts each host once, and the run’s own result not at all', () => {
    assert.equal(
      hostsReached([
        moved('a.example.com'),
        { host: 'a.example.com', outcome: 'released', code: 'journal_removed', reason: 'removed' },
        moved('b.example.com'),
        { host: '', outcome: 'failed', code: 'run_failed', reason: 'boom' },
      ]),
      2,
    )
  })
})

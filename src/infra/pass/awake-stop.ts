// The stop of an awake host (design §3 step 3): fenced, the activator asked
// to stop it, its claim's release awaited at most the stop timeout, and only
// then moved. Files never move under a claim.
import { performance } from 'node:perf_hooks'
import type { Result } from '../../domain/modes.js'
import type { MoveCandidate } from '../../domain/pass-plan.js'
import type { Why } from '../../domain/reason-codes.js'
import { errorMessage } from '../../errors.js'
import type { MoveSteps } from './move-steps.js'
import type { PassContext } from './pass-context.js'
import type { PassState } from './pass-state.js'

export class AwakeStop {
  readonly #ctx: PassContext
  readonly #state: PassState
  readonly #steps: MoveSteps

  constructor(ctx: PassContext, state: PassState, steps: MoveSteps) {
    this.#ctx = ctx
    this.#state = state
    this.#steps = steps
  }

  /** Steps 3 on for a host holding a wake claim; why it is stopped now is told to onWait. */
  async stopAndMove(candidate: MoveCandidate, signal: AbortSignal, why = 'grace over'): Promise<Result[]> {
    const ctx = this.#ctx
    const { registry, claims } = ctx.deps
    const host = candidate.record.host
    const generation = registry.nextGeneration()
    this.#state.fence([host], generation)
    ctx.failpoint('after-fence')
    const fencedAt = performance.now()
    // Released since the batch was sorted: asleep, and fenced asleep.
    if (claims.claimed(host)) {
      const asks =
        ctx.deps.claims.canAskStop?.() !== false
          ? `the activator to stop ${host}`
          : `${host} to be released (no CARLOS_ACTIVATOR_URL to ask for a stop)`
      ctx.deps.onWait?.(`${asks} (awake, ${why})`)
      let stopped: boolean
      try {
        stopped = await this.stop(host, signal)
      } finally {
        ctx.deps.onWait?.(null)
      }
      if (!stopped) {
        if (!candidate.wasHeld) this.#state.lift([host])
        const secs = Math.round(ctx.stopTimeoutMs / 1000)
        const failed: Why = signal.aborted
          ? { code: 'stop_abandoned', reason: 'stop abandoned: the run was cancelled; it keeps running where it is' }
          : {
              code: 'stop_timeout',
              reason:
                `stop timed out: still awake after ${secs}s; ` +
                `it keeps running where it is, and the next run tries again`,
            }
        return [ctx.resultWithMetrics(host, 'failed', failed, candidate.record.to, ctx.secondsSince(fencedAt))]
      }
      ctx.failpoint('after-stop')
    }
    const journal = { v: 1 as const, ...candidate.record, generation, startedAt: ctx.nowIso() }
    return this.#steps.move([{ journal, wasHeld: candidate.wasHeld, fencedAt }])
  }

  /** Asks the activator to stop host and waits at most the stop timeout; true only once the claim is proven gone. */
  async stop(host: string, signal: AbortSignal): Promise<boolean> {
    const { clock, claims, logger } = this.#ctx.deps
    const timeout = new AbortController()
    const cancel = clock.setTimer(this.#ctx.stopTimeoutMs, () => timeout.abort(new Error('stop timed out')))
    const onAbort = (): void => timeout.abort(signal.reason)
    signal.addEventListener('abort', onAbort, { once: true })
    try {
      const stopped = await claims.stop(host, timeout.signal)
      return stopped && !claims.claimed(host)
    } catch (err) {
      logger.error({ host, err }, `layout: ${host}: stop failed: ${errorMessage(err)}`)
      return false
    } finally {
      cancel()
      signal.removeEventListener('abort', onAbort)
    }
  }
}

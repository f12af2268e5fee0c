// The agent's leg: one run (wait for the instance keys, refresh the gate,
// read the intent, converge to it) and the metrics each run updates.
import type { Config } from '../config.js'
import type { IntentState } from '../domain/intent-state.js'
import { Leg, type LegOutcome } from '../domain/leg.js'
import { layoutLegWith } from '../domain/leg-run.js'
import type { DefaultInputs } from '../domain/layout-default.js'
import type { Mode } from '../domain/modes.js'
import type { Clock, DeployStore, LayoutPass, Logger } from '../domain/ports.js'
import type { ReportFigures } from '../report/figures.js'
import type { LegRun } from '../domain/schemas.js'
import { errorMessage } from '../errors.js'
import type { Isolation } from '../infra/isolation.js'
import type { Metrics } from '../metrics/metrics.js'

/** Whose intent it is, and what stands in when none is recorded. */
export function intentInputs(config: Config, gate: Isolation | null): { box: string } & DefaultInputs {
  const { box, layoutDefault, build } = config
  return { box, layoutDefault, build, gate }
}

export interface LegRunnerDeps {
  config: Config
  logger: Logger
  metrics: Metrics
  clock: Clock
  store: DeployStore
  state: IntentState
  gate: Isolation | null
  /** null until start-up publishes it; a run then does nothing. */
  pass: () => LayoutPass | null
  /** Awaited before a run moves anything (design §4.5). */
  keys: () => Promise<void>
  onRunEnd: (run: LegRun) => void
  /** Built in slices, so a run's end does not hold the activator. */
  figures: () => Promise<Pick<ReportFigures, 'counts' | 'held'>>
  intentTimeoutMs?: number
}

export function buildLeg(deps: LegRunnerDeps): Leg {
  const { metrics } = deps
  return new Leg({
    run: (signal) => runLeg(deps, signal),
    clock: deps.clock,
    logger: deps.logger,
    retryMs: deps.config.retryMs,
    onRunStart: () => metrics.setLegRunning(true),
    onRetryChange: (at) => metrics.setNextRetry(at),
    onRunEnd: (run, seconds) => recordLegRunMetrics(deps, run, seconds),
  })
}

async function runLeg(deps: LegRunnerDeps, signal: AbortSignal): Promise<LegOutcome> {
  const pass = deps.pass()
  if (pass === null) return { results: [], retry: false, unfinished: false }
  await deps.keys()
  const { config, gate, state, logger } = deps
  // The self-check and mounts are fresh for every run; the probe keeps its own schedule.
  await gate?.refresh({ probe: false })
  const outcome = await layoutLegWith(
    {
      store: deps.store,
      ...intentInputs(config, gate),
      state,
      logger,
      converge: (mode: Mode, force: boolean, s: AbortSignal) => pass.converge(mode, { deferAwake: !force, signal: s }),
      timeoutMs: deps.intentTimeoutMs,
    },
    signal,
  )
  recordIntentReadMetric(deps)
  const graceEnds = pass.graceEndsAt?.() ?? null
  if (graceEnds === null || !outcome.retry) return outcome
  // The grace runs on a monotonic clock and this timer on another: a little after, never before.
  return { ...outcome, retryInMs: Math.max(0, graceEnds - deps.clock.now()) + GRACE_SLACK_MS }
}

export const GRACE_SLACK_MS = 1_000

function recordIntentReadMetric({ metrics, state }: LegRunnerDeps): void {
  const s = state.snapshot()
  metrics.ops.setIntentReadable(s.intent !== 'unreadable')
  metrics.intentRead(
    s.intent === 'unreadable' ? 'unreadable' : s.intent === 'none' || s.default.applied ? 'none' : 'recorded',
  )
}

function recordLegRunMetrics(deps: LegRunnerDeps, run: LegRun, seconds: number): void {
  const { metrics } = deps
  metrics.setLegRunning(false)
  metrics.legRun(seconds)
  // Clean: the intent was read and no host failed; a refused or deferred host is no failure.
  if (
    deps.state.snapshot().intent !== 'unreadable' &&
    run.finishedAt !== null &&
    !run.results.some((r) => r.outcome === 'failed')
  ) {
    metrics.ops.setLastSuccess(Date.parse(run.finishedAt))
  }
  deps.onRunEnd(run)
  metrics.setDeferredHosts(run.results.filter((r) => r.outcome === 'deferred').length)
  void deps.figures().then(
    ({ counts, held }) => {
      metrics.setRows(counts)
      metrics.setHeldHosts(held)
    },
    (err: unknown) => deps.logger.error({ err }, `layout: the row gauges were not updated: ${errorMessage(err)}`),
  )
}

// What the HTTP routes ask of the agent. The routes know nothing else of
// it, so a test can build the app around a real Agent on a temp data dir.
import type { Mode } from './domain/modes.js'
import type { LayoutReport, LegRun, LegState } from './domain/schemas.js'

export type Phase = 'starting' | 'recovering' | 'ready' | 'stopping'

export interface ReadyCheck {
  name: string
  ok: boolean
  detail: string
}

export interface Readiness {
  ready: boolean
  phase: Phase
  checks: ReadyCheck[]
  nested: { allowed: boolean; reason: string }
}

export interface AgentApi {
  readiness(): Readiness
  report(): LayoutReport
  /** Kicks the leg and returns its state right after the kick. */
  kick(): LegState
  /** Kicks the leg and waits (at most timeoutMs) for the run that kick asked for to finish; null on timeout. */
  converge(timeoutMs: number): Promise<LegRun | null>
  legState(): LegState
  /** The mode a new row is minted in; throws an `intent_unreadable` AppError while the intent is unreadable. */
  mint(): Promise<Mode>
}

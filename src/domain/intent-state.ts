// What the box last learned about its intent and its default, for the
// status report, metrics and the mint (design §5): noted where the intent
// is read, with a version and listeners that say when it changed.
import type { DefaultBlock } from './layout-default.js'
import type { IntentMode } from './modes.js'

/** What status says about the default: applied, or blocked and why. */
export interface DefaultState {
  /** The box is nested by default rather than by a recorded intent. */
  applied: boolean
  /** Why the deployment's nested default does not apply here; '' when it does or was not asked. */
  blocked: string
  /** What blocks it, as a code; '' when nothing does. */
  blockedBy: DefaultBlock | ''
}

export interface IntentSnapshot {
  intent: IntentMode
  /** Why the intent is unreadable; '' otherwise. */
  why: string
  default: DefaultState
  version: number
}

/**
 * The last outcome of an intent read: `none` when none is recorded or none
 * addresses the box (and before any read), `unreadable` when the last read
 * failed or named a mode this build does not know. A later successful read
 * replaces whichever of the two it holds, since a read that just failed is
 * not proof the fleet still wants what was seen before.
 *
 * `version` moves on every change (never on a note that changes nothing), so
 * the status ETag and the metrics can tell when to look again.
 */
export class IntentState {
  #intent: IntentMode = 'none'
  #why = ''
  #default: DefaultState = { applied: false, blocked: '', blockedBy: '' }
  #version = 0
  readonly #listeners = new Set<(s: IntentSnapshot) => void>()

  /** Records a read that found an intent (or could not read one); the default is then not in play. */
  noteIntent(mode: IntentMode, why = ''): void {
    this.#set(mode, mode === 'unreadable' ? why : '', { applied: false, blocked: '', blockedBy: '' })
  }

  /**
   * Records the default's outcome when no intent is recorded: nested by
   * default, or none with the reason the default did not apply and its code.
   */
  noteDefault(mode: 'nested' | 'none', reason: string, by: DefaultBlock | ''): void {
    if (mode === 'nested') this.#set('nested', '', { applied: true, blocked: '', blockedBy: '' })
    else this.#set('none', '', { applied: false, blocked: reason, blockedBy: by })
  }

  lastIntent(): IntentMode {
    return this.#intent
  }

  /** Why the last read was unreadable; '' when it was not. */
  unreadableWhy(): string {
    return this.#why
  }

  lastDefault(): DefaultState {
    return { ...this.#default }
  }

  get version(): number {
    return this.#version
  }

  snapshot(): IntentSnapshot {
    return { intent: this.#intent, why: this.#why, default: this.lastDefault(), version: this.#version }
  }

  /** Calls fn after every change; returns the function that stops it. fn must not throw. */
  onChange(fn: (s: IntentSnapshot) => void): () => void {
    this.#listeners.add(fn)
    return () => this.#listeners.delete(fn)
  }

  #set(intent: IntentMode, why: string, def: DefaultState): void {
    const same =
      intent === this.#intent &&
      why === this.#why &&
      def.applied === this.#default.applied &&
      def.blocked === this.#default.blocked &&
      def.blockedBy === this.#default.blockedBy
    if (same) return
    this.#intent = intent
    this.#why = why
    this.#default = def
    this.#version++
    const s = this.snapshot()
    for (const fn of this.#listeners) fn(s)
  }
}

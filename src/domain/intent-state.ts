// What the box last learned about its intent and its default (design §5),
// for the status report, metrics and the mint.
import type { DefaultBlock } from './layout-default.js'
import type { IntentMode } from './modes.js'

export interface DefaultState {
  applied: boolean
  /** '' when the default applies or was not asked. */
  blocked: string
  blockedBy: DefaultBlock | ''
}

export interface IntentSnapshot {
  intent: IntentMode
  why: string
  default: DefaultState
  version: number
}

/** `version` moves on every change, never on a no-op: the ETag's and the metrics' cue. */
export class IntentState {
  #intent: IntentMode = 'none'
  #why = ''
  #default: DefaultState = { applied: false, blocked: '', blockedBy: '' }
  #version = 0
  readonly #listeners = new Set<(s: IntentSnapshot) => void>()

  noteIntent(mode: IntentMode, why = ''): void {
    this.#set(mode, mode === 'unreadable' ? why : '', { applied: false, blocked: '', blockedBy: '' })
  }

  noteDefault(mode: 'nested' | 'none', reason: string, by: DefaultBlock | ''): void {
    if (mode === 'nested') this.#set('nested', '', { applied: true, blocked: '', blockedBy: '' })
    else this.#set('none', '', { applied: false, blocked: reason, blockedBy: by })
  }

  lastIntent(): IntentMode {
    return this.#intent
  }

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

  /** Returns the unsubscribe; fn must not throw. */
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

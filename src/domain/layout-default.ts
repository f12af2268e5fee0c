// The deployment's default layout: what stands in for an intent when none
// is recorded (design §5.2).
import type { Mode } from './modes.js'
import type { IsolationGate } from './ports.js'
import { belowFloor, LAYOUT_FLOOR } from './release.js'

/** The variable the default is read from; named in the reason an invalid value gives. */
export const LAYOUT_DEFAULT_ENV = 'CARLOS_LAYOUT_DEFAULT'

/**
 * Reads CARLOS_LAYOUT_DEFAULT: '' and `nested` are nested, `flat` is flat.
 * Anything else is flat with the value (trimmed, lower-cased, as compared)
 * returned as invalid: an operator who typed the variable meant to choose,
 * and leaving the box as it was (flat) while saying so is the reading that
 * cannot surprise them.
 */
export function layoutDefault(raw: string): { mode: Mode; invalid: string } {
  const v = raw.trim().toLowerCase()
  if (v === '' || v === 'nested') return { mode: 'nested', invalid: '' }
  if (v === 'flat') return { mode: 'flat', invalid: '' }
  return { mode: 'flat', invalid: v }
}

/**
 * What holds the nested default back on a box, as a code: a bad value, the
 * release floor, no activator, the isolation gate, or an agent starting
 * that has not asked the gate yet. The `default_blocked{by}` gauge carries
 * it, so an alert on the gate fires only where the gate is what holds
 * nested back (design §9).
 */
export const DEFAULT_BLOCKS = ['default_invalid', 'floor', 'no_activator', 'gate', 'starting'] as const
export type DefaultBlock = (typeof DEFAULT_BLOCKS)[number]

/** The default's answer: nested, or none with the reason and its code ('' for the flat opt-out). */
export interface DefaultAnswer {
  mode: 'nested' | 'none'
  reason: string
  by: DefaultBlock | ''
}

/** The deployment asks for nested by default, with a value that is valid. */
export function nestedByDefault(raw: string): boolean {
  const d = layoutDefault(raw)
  return d.mode === 'nested' && d.invalid === ''
}

export interface DefaultInputs {
  /** The raw CARLOS_LAYOUT_DEFAULT. */
  layoutDefault: string
  /** The running build (CARLOS_BUILD). */
  build: string
  /** The isolation gate; null when no activator is armed. */
  gate: IsolationGate | null
}

/**
 * The effective intent when none is recorded: nested only when the default
 * is nested, the build is not below the layout floor and the gate answers;
 * else `none` with the reason status shows (none for the flat opt-out). The
 * default never forces: an awake host keeps its grace.
 */
export function defaultLayoutIntent(d: DefaultInputs): DefaultAnswer {
  const { mode, invalid } = layoutDefault(d.layoutDefault)
  if (invalid !== '') {
    return {
      mode: 'none',
      reason: `${LAYOUT_DEFAULT_ENV}=${invalid} is not nested or flat; staying flat`,
      by: 'default_invalid',
    }
  }
  if (mode !== 'nested') return { mode: 'none', reason: '', by: '' }
  if (belowFloor(d.build, LAYOUT_FLOOR)) {
    return {
      mode: 'none',
      reason: `this box runs ${d.build}, below ${LAYOUT_FLOOR}, the first release on which nested instances wake`,
      by: 'floor',
    }
  }
  if (d.gate === null) {
    return {
      mode: 'none',
      reason: 'no activator is armed on this box, so nothing could wake nested',
      by: 'no_activator',
    }
  }
  const why = d.gate.check()
  if (why !== null) return { mode: 'none', reason: `isolation not ready: ${why}`, by: 'gate' }
  return { mode: 'nested', reason: '', by: '' }
}

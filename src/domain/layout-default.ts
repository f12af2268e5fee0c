// The deployment's default layout: what stands in for an intent when none
// is recorded (design §5.2).
import type { Mode } from './modes.js'
import type { IsolationGate } from './ports.js'
import { belowFloor, LAYOUT_FLOOR } from './release.js'

export const LAYOUT_DEFAULT_ENV = 'CARLOS_LAYOUT_DEFAULT'

/** Any other value is flat and reported invalid: staying as the box was cannot surprise an operator. */
export function layoutDefault(raw: string): { mode: Mode; invalid: string } {
  const v = raw.trim().toLowerCase()
  if (v === '' || v === 'nested') return { mode: 'nested', invalid: '' }
  if (v === 'flat') return { mode: 'flat', invalid: '' }
  return { mode: 'flat', invalid: v }
}

/** The gauge's `by`, so an alert on the gate fires only where the gate holds nested back (design §9). */
export const DEFAULT_BLOCKS = ['default_invalid', 'floor', 'no_activator', 'gate', 'starting'] as const
export type DefaultBlock = (typeof DEFAULT_BLOCKS)[number]

export interface DefaultAnswer {
  mode: 'nested' | 'none'
  reason: string
  by: DefaultBlock | ''
}

export function nestedByDefault(raw: string): boolean {
  const d = layoutDefault(raw)
  return d.mode === 'nested' && d.invalid === ''
}

export interface DefaultInputs {
  layoutDefault: string
  build: string
  gate: IsolationGate | null
}

/** Never forced, so an awake host keeps its grace. */
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

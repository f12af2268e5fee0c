// The words of the layout (design §1): what an intent asks for, what a box
// reports, and what a row is classified as.

export type Mode = 'flat' | 'nested'

export const MODES: readonly Mode[] = ['flat', 'nested']

/** `none`: the default may stand in; `unreadable`: fail closed. */
export type IntentMode = Mode | 'none' | 'unreadable'

export type ReportMode = IntentMode | 'unmanaged'

export function validMode(m: unknown): m is Mode {
  return m === 'flat' || m === 'nested'
}

/** In order of precedence (design §1.1). */
export type RowLayout = 'fenced' | 'conflict' | 'foreign' | 'nested' | 'flat' | 'external'

// Keyed by the union, so the compiler refuses a list missing a member.
export const ROW_LAYOUTS = Object.keys({
  fenced: true,
  conflict: true,
  foreign: true,
  nested: true,
  flat: true,
  external: true,
} satisfies Record<RowLayout, true>) as RowLayout[]

export const REPORT_MODES = Object.keys({
  flat: true,
  nested: true,
  none: true,
  unreadable: true,
  unmanaged: true,
} satisfies Record<ReportMode, true>) as ReportMode[]

/** design §3.2 */
export type Outcome = 'unchanged' | 'moved' | 'deferred' | 'held' | 'refused' | 'failed' | 'recovered' | 'released'

export const OUTCOMES: readonly Outcome[] = [
  'unchanged',
  'moved',
  'deferred',
  'held',
  'refused',
  'failed',
  'recovered',
  'released',
]

export type { Result } from './schemas.js'

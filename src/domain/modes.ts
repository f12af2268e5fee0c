// The words of the layout (design §1): what an intent asks for, what a box
// reports, and what a row is classified as.

/** What a layout intent asks for. */
export type Mode = 'flat' | 'nested'

export const MODES: readonly Mode[] = ['flat', 'nested']

/**
 * The intent a run of the pass works under. `none`: no intent addresses this
 * box (the default may stand in). `unreadable`: the intent could not be read
 * or names a mode this build does not know; fail closed.
 */
export type IntentMode = Mode | 'none' | 'unreadable'

/** The `mode` of the status report: the intent mode, or `unmanaged` with no activator armed. */
export type ReportMode = IntentMode | 'unmanaged'

export function validMode(m: unknown): m is Mode {
  return m === 'flat' || m === 'nested'
}

/** What Classify answers for an instance-kind row, in order of precedence. */
export type RowLayout = 'fenced' | 'conflict' | 'foreign' | 'nested' | 'flat' | 'external'

// Records keyed by the union make the compiler refuse a missing member, so
// a new layout or mode cannot silently lack its place in these lists.
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

/** The outcomes of one host's run through the pass (design §3). */
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

/** One host's result of a pass run (`host` empty for a result about the whole run): its schema's type. */
export type { Result } from './schemas.js'

// The reason codes (design §1, §3, §4, §6): one beside every reason's
// sentence, for code to decide by. docs/runbook.md explains each.
import { Type } from './typebox.js'

export const REASON_CODES = [
  // A move under way (row `fenced`).
  'in_flight', // a journal names the host
  'fenced_for_move',
  'agent_starting', // D/layout not listed yet
  'recovery_pending',
  'unmanaged_journal',
  'unmanaged_hold',
  'no_activator', // a nested row judged by its paths alone

  // Held: stopped and fenced until the reason is cleared.
  'symlink_source', // design §3 step 5
  'source_not_directory',
  'second_name',
  'path_too_long',
  'source_swapped', // between preflight and rename; moved back
  'revert_unreadable', // kept down, not released flat (design §4)
  'legacy_hold', // no code, or one this build does not know
  'hold_corrupt',

  // Kept journals: fenced until an operator decides (design §4).
  'ambiguous',
  'files_missing',
  'dest_symlink',
  'row_gone',
  'row_elsewhere',
  'row_ahead', // the row says dest, the files are at from
  'journal_invalid',
  'journals_differ',
  'files_unknown',
  'awake_unreleased', // the claim held at start
  'journal_kept', // the move ended; removing its journal failed

  // The row's own word (conflict, foreign, external).
  'dir_claimed', // or one in or around it
  'socket_claimed',
  'invalid_host',
  'no_socket',
  'unknown_shape',
  'not_managed',

  // Refused, nothing stopped (design §3 step 1).
  'gate_shut',
  'socket_too_long',
  'dest_taken',

  // Deferred (design §3 step 2).
  'awake_grace',

  // Failed: the leg retries with backoff.
  'stop_timeout',
  'stop_abandoned',
  'journal_not_written',
  'preflight_error',
  'dest_not_cleared',
  'dest_not_prepared',
  'rename_failed',
  'registry_not_updated', // files moved back
  'move_interrupted', // journal kept for recovery
  'finish_interrupted', // committed; the next run checks it
  'swap_not_undone', // journal kept
  'stray_file',
  'run_failed',
  'run_stopped',

  // Recovered, released.
  'move_finished',
  'rolled_back',
  'hold_dropped',
  'journal_removed',

  // The registry underneath (design §2.2): claims refused 503.
  'registry_removed',
  'registry_replaced',
  'registry_corrupt',
  'registry_full',
  'registry_busy', // another process's write lock (Retry-After)

  // A wake refused (design §6).
  'not_ready',
  'unknown_host',
  'files_elsewhere', // the other shape's dir exists
  'files_not_directory',
  'gate_pending', // its first checks not run (Retry-After)
] as const

export type ReasonCode = (typeof REASON_CODES)[number]

const DESCRIPTION = 'The reason as a stable code (docs/runbook.md says what each means and what to do).'

// Titled, so the OpenAPI document lists the enum once, as a component.
export const ReasonCode = Type.Enum(REASON_CODES, { title: 'ReasonCode', type: 'string', description: DESCRIPTION })

/** A code, or '' for no reason. */
export const ReasonCodeOrNone = Type.Enum(['', ...REASON_CODES], {
  title: 'ReasonCodeOrNone',
  type: 'string',
  description: `${DESCRIPTION} Empty when there is no reason.`,
})

export interface Why {
  code: ReasonCode
  reason: string
}

export function why(code: ReasonCode, reason: string): Why {
  return { code, reason }
}

/** A move done, a row where it should be. */
export const NO_REASON: { readonly code: ''; readonly reason: '' } = { code: '', reason: '' }

const KNOWN: ReadonlySet<string> = new Set(REASON_CODES)

export function isReasonCode(s: unknown): s is ReasonCode {
  return typeof s === 'string' && KNOWN.has(s)
}

/** What the fleet summary counts as held. */
export const HOLD_CODES: ReadonlySet<ReasonCode> = new Set<ReasonCode>([
  'symlink_source',
  'source_not_directory',
  'second_name',
  'path_too_long',
  'source_swapped',
  'revert_unreadable',
  'legacy_hold',
  'unmanaged_hold',
])

/** Fences that lift on their own. */
export const PASSING_CODES: ReadonlySet<ReasonCode> = new Set<ReasonCode>([
  'in_flight',
  'fenced_for_move',
  'agent_starting',
])

// The codes of reasons (design §1, §3, §4, §6): every reason a row, a
// result of the pass or a refused wake carries has one of these beside its
// sentence. The sentence is for a person and may be reworded; the code is
// for whatever decides (the CLI, the console, the fleet summary, an alert),
// and stays. docs/runbook.md says what each means and what to do; a test
// holds the two lists equal.
import { Type } from './typebox.js'

export const REASON_CODES = [
  // ---- a move under way (row `fenced`) ---------------------------------
  /** A journal names the host: its move is under way. */
  'in_flight',
  /** The pass fenced the host for its move, before the journal was written. */
  'fenced_for_move',
  /** The agent has not listed `D/layout` yet (starting or recovering): every movable row reads fenced. */
  'agent_starting',
  /** An armed box's start-up recovery is under way: the row is judged by what `D/layout` holds until it is done. */
  'recovery_pending',
  /** No activator on this box (`CARLOS_ACTIVATOR=none`), and a journal names the host. */
  'unmanaged_journal',
  /** No activator on this box, and a hold marker names the host. */
  'unmanaged_hold',
  /** No activator on this box: a nested row judged by its paths alone. */
  'no_activator',

  // ---- holds: stopped, fenced, until the reason is cleared (outcome `held`) --
  /** The source directory is a symlink (design §3 step 5). */
  'symlink_source',
  /** The source is not a directory. */
  'source_not_directory',
  /** A file under the source has a second name (a hard link). */
  'second_name',
  /** The source's tree is deeper than a path can name (ENAMETOOLONG): a tenant made it. */
  'path_too_long',
  /** The directory was swapped between preflight and the rename; it was moved back. */
  'source_swapped',
  /** A revert completed while the intent was unreadable: kept down rather than released flat (design §4). */
  'revert_unreadable',
  /** A hold marker written without a code (an older layoutd) or with one this build does not know. */
  'legacy_hold',
  /** A hold marker that cannot be read, is not JSON, or is not a hold marker. */
  'hold_corrupt',

  // ---- journals recovery keeps: fenced until an operator decides (design §4) --
  /** Files at both ends of the journal. */
  'ambiguous',
  /** Files at neither end (recovery), the source is gone (a move), or neither shape's dir is there (a wake). */
  'files_missing',
  /** What is at the destination is a symlink, not the directory the move renamed there. */
  'dest_symlink',
  /** The row is gone from the registry while its files are at one end. */
  'row_gone',
  /** The row's paths are neither the journal's from nor its dest. */
  'row_elsewhere',
  /** The files are still at from, but the row already says dest. */
  'row_ahead',
  /** A journal that cannot be read, is not JSON, or is not a journal of its host. */
  'journal_invalid',
  /** Journals of different moves name the host. */
  'journals_differ',
  /** Recovery, or a wake, could not look at where the files are (an I/O error). */
  'files_unknown',
  /** The activator did not release the host's claim at start, so recovery did not move its files. */
  'awake_unreleased',
  /** The move ended or was given up, but its journal could not be removed: kept for recovery. */
  'journal_kept',

  // ---- the row's own word (conflict, foreign, external) ----------------
  /** Another row claims the same directory, or one inside or around it. */
  'dir_claimed',
  /** Another row claims the same socket. */
  'socket_claimed',
  /** The host is not a valid DNS name. */
  'invalid_host',
  /** The row has no socket: the activator does not manage it. */
  'no_socket',
  /** The row's paths are neither the flat nor the nested shape. */
  'unknown_shape',
  /** Not the activator's to wake or the pass's to move: another kind of row, no socket, or another supervisor's. */
  'not_managed',

  // ---- refused, nothing stopped (design §3 step 1) ----------------------
  /** The isolation gate is shut: nested instances may not wake, and nothing moves to nested. */
  'gate_shut',
  /** The nested socket path would be over the 107 bytes a unix socket can bind. */
  'socket_too_long',
  /** Another row claims the move's destination. */
  'dest_taken',

  // ---- deferred --------------------------------------------------------
  /** The tenant is awake and inside its grace (design §3 step 2). */
  'awake_grace',

  // ---- failed: the leg retries with backoff ------------------------------
  /** The activator did not stop the instance in time; it keeps running where it is. */
  'stop_timeout',
  /** The run was cancelled while it waited for a stop. */
  'stop_abandoned',
  /** The journal could not be written; nothing moved. */
  'journal_not_written',
  /** Preflight failed with an I/O error; nothing moved. */
  'preflight_error',
  /** What was at the destination could not be set aside; nothing moved. */
  'dest_not_cleared',
  /** The destination's parent could not be prepared; nothing moved. */
  'dest_not_prepared',
  /** The rename failed; nothing moved. */
  'rename_failed',
  /** The registry refused the row; the files were moved back. */
  'registry_not_updated',
  /** An I/O error interrupted the move; its journal stays for recovery. */
  'move_interrupted',
  /** The move was committed, then an error interrupted its last step; the next run checks it. */
  'finish_interrupted',
  /** The directory was swapped during the move and could not be moved back; its journal stays. */
  'swap_not_undone',
  /** A file in `D/layout` not named for a valid host, or a journal that names none: left alone. */
  'stray_file',
  /** A run of the leg threw; it is retried with backoff. */
  'run_failed',
  /** A run of the leg was ended by the agent stopping. */
  'run_stopped',

  // ---- recovered, released ---------------------------------------------
  /** Recovery finished a move from its journal. */
  'move_finished',
  /** Recovery rolled a move back: the intent now wants the host where it was. */
  'rolled_back',
  /** A hold was dropped: the host is where the intent wants it, or its move is done. */
  'hold_dropped',
  /** An operator removed a kept journal: the host wakes as its row says. */
  'journal_removed',

  // ---- the registry underneath (design §2.2): /ready 503, claims refused 503 --
  /** The registry file was removed while the agent runs. */
  'registry_removed',
  /** Another file (another inode or device) was put at the registry's path while the agent runs. */
  'registry_replaced',
  /** The registry is not a SQLite database, or is corrupt (its header, quick_check, or a read that failed). */
  'registry_corrupt',
  /** The registry's disk is full: a claim could not be written. */
  'registry_full',
  /** Another process holds the registry's write lock: the claim was not recorded (503 with Retry-After). */
  'registry_busy',

  // ---- a wake refused (design §6) --------------------------------------
  /** The agent is not ready to judge a wake (starting, recovering or stopping). */
  'not_ready',
  /** The host is not in the registry. */
  'unknown_host',
  /** The row's dir is not there and the other shape's is, or both are: the row does not name where the files are. */
  'files_elsewhere',
  /** The row's dir is a symlink or not a directory: a wake needs the directory itself. */
  'files_not_directory',
  /** The isolation gate has not run its first checks: a nested host is not judged yet (503, Retry-After). */
  'gate_pending',
] as const

/** A reason's code. */
export type ReasonCode = (typeof REASON_CODES)[number]

const DESCRIPTION = 'The reason as a stable code (docs/runbook.md says what each means and what to do).'

// Titled, so the OpenAPI document lists the enum once, as a component.
export const ReasonCode = Type.Enum(REASON_CODES, { title: 'ReasonCode', type: 'string', description: DESCRIPTION })

/** A reason's code, or empty where there is no reason. */
export const ReasonCodeOrNone = Type.Enum(['', ...REASON_CODES], {
  title: 'ReasonCodeOrNone',
  type: 'string',
  description: `${DESCRIPTION} Empty when there is no reason.`,
})

/** A reason: its code, and its sentence for a person. */
export interface Why {
  code: ReasonCode
  reason: string
}

export function why(code: ReasonCode, reason: string): Why {
  return { code, reason }
}

/** The code and reason of what has none (a move done, a row where it should be). */
export const NO_REASON: { readonly code: ''; readonly reason: '' } = { code: '', reason: '' }

const KNOWN: ReadonlySet<string> = new Set(REASON_CODES)

export function isReasonCode(s: unknown): s is ReasonCode {
  return typeof s === 'string' && KNOWN.has(s)
}

/** The codes of a host held down by a hold marker: what the fleet summary counts as held. */
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

/** The codes of a fenced row whose fence lifts on its own: a move under way, or start-up not done. */
export const PASSING_CODES: ReadonlySet<ReasonCode> = new Set<ReasonCode>([
  'in_flight',
  'fenced_for_move',
  'agent_starting',
])

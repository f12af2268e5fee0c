// What to do about a row, by its reason code (design §8): the runbook's
// "Reason codes" table (test/docs/runbook-advice.test.ts holds them equal),
// its placeholders filled with real paths by fillAdvice.
import type { ReasonCode } from '../domain/reason-codes.js'

/** The runbook's "what to do" for each code. */
export const ADVICE: Record<ReasonCode, string> = {
  in_flight: 'nothing; it ends in seconds (`layoutd converge --wait` follows it)',
  fenced_for_move: 'nothing; it ends in seconds (`layoutd converge --wait` follows it)',
  agent_starting: 'nothing; it clears once `/ready` is 200',
  recovery_pending:
    'nothing; `GET /ready` turns `200` when recovery is done, and the row then reads as the pass ' + 'judges it',
  unmanaged_journal: 'arm the activator (`CARLOS_ACTIVATOR=claims`) and restart the agent: recovery finishes it',
  unmanaged_hold: 'arm the activator and restart, then clear the hold (docs/runbook.md#clear-a-hold)',
  no_activator: 'see unmanaged (docs/runbook.md#unmanaged)',
  symlink_source: 'put the real directory back in place of the link; clear the hold (docs/runbook.md#clear-a-hold)',
  source_not_directory: "put the tenant's directory there; clear the hold (docs/runbook.md#clear-a-hold)",
  second_name:
    'find the other name and remove one (`find D -samefile DIR/PATH`: the directory its files are in now, ' +
    '`D/apps/HOST` or `D/nested/HOST/data`, and the file the reason names); clear the hold ' +
    '(docs/runbook.md#clear-a-hold)',
  path_too_long:
    'the reason names where; shorten it from inside (`cd` down in steps, then `mv` the deep part ' +
    'up), or ask the tenant; clear the hold (docs/runbook.md#clear-a-hold)',
  source_swapped: 'look at what is at the path now; clear the hold (docs/runbook.md#clear-a-hold)',
  revert_unreadable:
    'make the intent readable (unreadable (docs/runbook.md#unreadable)); the next run releases or ' + 'moves it',
  legacy_hold:
    'read its reason (`cat D/layout/HOST.hold`) and act on it as on the code it names; clear the ' +
    'hold (docs/runbook.md#clear-a-hold)',
  hold_corrupt: 'a corrupt hold marker (docs/runbook.md#a-corrupt-hold-marker)',
  ambiguous: 'a kept journal (docs/runbook.md#a-kept-journal)',
  files_missing:
    "find the tenant's files first (`ls -la D/apps/HOST D/nested/HOST/data`); then a kept journal " +
    '(docs/runbook.md#a-kept-journal), or with no journal files not where the row says ' +
    '(docs/runbook.md#files-not-where-the-row-says)',
  dest_symlink: 'a kept journal (docs/runbook.md#a-kept-journal)',
  row_gone:
    'add the row back, or move the files out of the data root; then release the journal ' +
    '(docs/runbook.md#a-kept-journal)',
  row_elsewhere: 'a kept journal (docs/runbook.md#a-kept-journal)',
  row_ahead: 'a kept journal (docs/runbook.md#a-kept-journal)',
  journal_invalid:
    "a kept journal (docs/runbook.md#a-kept-journal), for a batch's a batch journal " +
    '(docs/runbook.md#a-batch-journal): decide from where the files are (`layoutd journal show ' +
    'FILE`)',
  journals_differ: 'a kept journal (docs/runbook.md#a-kept-journal): keep the one the files agree with',
  files_unknown: 'fix the disk (the errno says what); restart the agent',
  awake_unreleased: 'check the activator; the next run tries again',
  journal_kept: 'fix the disk (`D/layout` full, read-only); a restart or the next run finishes it',
  dir_claimed: 'conflict (docs/runbook.md#conflict)',
  socket_claimed: 'conflict (docs/runbook.md#conflict)',
  invalid_host: 'foreign (docs/runbook.md#foreign)',
  no_socket: 'foreign (docs/runbook.md#foreign)',
  unknown_shape: 'foreign (docs/runbook.md#foreign)',
  not_managed: 'nothing, unless it should be moved: external (docs/runbook.md#external)',
  gate_shut: 'the isolation gate (docs/runbook.md#the-isolation-gate)',
  socket_too_long: 'a shorter data root, or leave the host flat',
  dest_taken: 'fix that row (`layoutd routes list`)',
  awake_grace: 'nothing; to move now, a forced intent (deferred (docs/runbook.md#deferred))',
  stop_timeout: 'check the activator (`CARLOS_ACTIVATOR_URL`) and its log; the next run tries again',
  stop_abandoned: 'nothing; the next run tries again',
  journal_not_written: 'free space or fix `D/layout`, then `layoutd converge --wait`',
  preflight_error: 'the errno says what; fix it, then `layoutd converge --wait`',
  dest_not_cleared: "check `D/layout/aside` and the destination's permissions",
  dest_not_prepared: 'check `D/nested` (space, permissions, read-only)',
  rename_failed: 'the errno says what; fix it, then `layoutd converge --wait`',
  registry_not_updated: 'a `routes rm` during the move, or a locked database: retry',
  move_interrupted: 'the next run (or a restart) finishes it; if it repeats, the errno says what to fix',
  finish_interrupted: 'nothing; the next run checks it',
  swap_not_undone: 'a kept journal (docs/runbook.md#a-kept-journal)',
  stray_file: 'look at it and remove it; layoutd leaves it alone',
  run_failed: "the agent's log has the error with its stack",
  run_stopped: 'nothing',
  move_finished: 'nothing',
  rolled_back: 'nothing',
  hold_dropped: 'nothing',
  journal_removed: 'nothing; the host wakes as its row says',
  registry_removed:
    'stop the agent, `layoutd registry restore FILE` from a backup (restoring the registry ' +
    '(docs/runbook.md#restoring-the-registry)), start the agent (or start it with no registry: it creates an ' +
    'empty one); `layoutd routes` refuses to create a new one while the agent runs (`registry_gone`)',
  registry_replaced: 'restart the agent, which reads the file now there',
  registry_corrupt:
    'stop the agent, `layoutd registry restore FILE` from a backup (restoring the registry ' +
    '(docs/runbook.md#restoring-the-registry)), start the agent',
  registry_full: 'free space on the disk; it clears on its own once there is room (1 MiB free)',
  registry_busy: "find and end that process's transaction (`fuser D/registry.db`); the activator asks again",
  not_ready: 'wait for `/ready` to answer 200',
  unknown_host: '`layoutd routes list`; add the row',
  files_elsewhere: 'files not where the row says (docs/runbook.md#files-not-where-the-row-says)',
  files_not_directory:
    'put the real directory back in place of what is there; files not where the row says ' +
    '(docs/runbook.md#files-not-where-the-row-says)',
  gate_pending: "nothing; it clears once the isolation gate's first checks have run, within a second of start",
}

/** A placeholder it does not know stays. */
export interface AdviceFacts {
  host: string
  /** D, the data root: known when it is this machine's (no `--url`). */
  dataDir?: string
  /** DIR, where the host's files are now (a held host's: where its refused move left them). */
  dir?: string
  /** PATH, the file a reason names, relative to DIR. */
  file?: string
  /** FILE, the journal file that names the host, as `layoutd journal show` takes it. */
  journal?: string
}

/** As it is when it needs no quoting, else in single quotes. */
function shellWord(p: string): string {
  return /^[\w@%+=:,./-]+$/.test(p) ? p : `'${p.replaceAll("'", `'\\''`)}'`
}

export function fillAdvice(text: string, facts: AdviceFacts): string {
  const { host, dataDir, dir, file, journal } = facts
  let out = text
  if (dir !== undefined && file !== undefined) out = out.replace(/\bDIR\/PATH\b/g, shellWord(`${dir}/${file}`))
  if (dir !== undefined) out = out.replace(/\bDIR\b(?=\/)/g, shellWord(dir))
  if (journal !== undefined) out = out.replace(/\bFILE\b/g, shellWord(journal))
  out = out.replace(/\bHOST\b/g, host)
  // D where a path or a command's operand begins: `D/layout`, `find D -samefile`.
  if (dataDir !== undefined) out = out.replace(/(?<![\w./'-])D(?=\/|\s)/g, shellWord(dataDir))
  return out
}

// The crash and fault points the crash suite stops the pass at (design
// §3.4, §3.5; tests only). CARLOS_FAILPOINT, comma-separated: a step
// (`after-rename`), one host's (`after-rename:a.example.com`), its nth arrival
// (`after-journal@2`). Reached, it SIGKILLs the process, the nearest to a
// power cut (nothing runs after); `=ENOSPC` throws that errno once instead.
// `skip-fsync:<name>` drops one fsync, so the power-loss audit proves it
// notices each one missing, which a kill -9 cannot (design §3.5).
import os from 'node:os'

/** The steps the pass reports, in the order a move reaches them. */
export const FAILPOINT_STEPS = [
  'after-fence',
  'after-stop',
  'after-aside',
  'after-journal',
  'after-preflight',
  'after-hold',
  'after-prepare',
  'after-rename',
  'after-row',
  'after-journal-remove',
  'after-lift',
] as const

/**
 * The move's fsyncs, each a barrier the power-loss audit checks (design
 * §3.5), by the name `skip-fsync:<name>` takes out. Tests only: removing
 * one is how the audit shows it would catch that fsync missing.
 */
export const FSYNC_NAMES = [
  /** `D`, once `D/layout` is made (step 4). */
  'layout-dir',
  /**
   * Each journal file's temporary file, before its rename (step 4): one a batch, and the own journals of a
   * batch's kept hosts.
   */
  'journal-data',
  /** `D/layout`, after the journals' renames (step 4). */
  'journal-dir',
  /** The destination's parents that gained an entry (step 6). */
  'prepare-parents',
  /** A nested destination's `run/`, once its mode and group are set (step 6). */
  'run-mode',
  /** The parent a tenant's directory was renamed out of (step 7). */
  'rename-source-parent',
  /** The parent it was renamed into (step 7). */
  'rename-dest-parent',
  /**
   * The row commit's WAL fsync (step 8): the rows connection runs
   * `synchronous = OFF`, and Registry.sync() does nothing.
   */
  'registry-commit',
  /** `D/layout`, after the journal files' removal (step 9): a batch's, once every host it names has ended. */
  'journal-remove-dir',
  /** `D`, once the isolation gate's self-check has made `D/nested` (§5.4). */
  'nested-entry',
] as const

export type FsyncName = (typeof FSYNC_NAMES)[number]

const SKIP_FSYNC = 'skip-fsync:'

/** The fsyncs a test has taken out; empty in production, where the check is one size test. */
const skipped = new Set<FsyncName>()

/**
 * Takes out the fsyncs spec names (`skip-fsync:<name>` items of
 * CARLOS_FAILPOINT); the composition root calls it once at start, before
 * the registry opens. Throws on a name that is not one of FSYNC_NAMES, so
 * a test that misspells one does not pass for the wrong reason.
 */
export function armSkippedFsyncs(spec: string): void {
  const names: FsyncName[] = []
  for (const item of spec.split(',').map((s) => s.trim())) {
    if (!item.startsWith(SKIP_FSYNC)) continue
    const name = FSYNC_NAMES.find((n) => n === item.slice(SKIP_FSYNC.length))
    if (name === undefined)
      throw new Error(
        `failpoint ${JSON.stringify(item)}: ${item.slice(SKIP_FSYNC.length)} ` +
          `is not one of the move's fsyncs (${FSYNC_NAMES.join(', ')})`,
      )
    names.push(name)
  }
  skipped.clear()
  for (const name of names) skipped.add(name)
}

/** Whether a test took out the fsync called name (never, unless CARLOS_FAILPOINT names it). */
export function fsyncSkipped(name: FsyncName | undefined): boolean {
  return skipped.size !== 0 && name !== undefined && skipped.has(name)
}

interface Point {
  name: string
  nth: number
  seen: number
  /** The errno thrown there (`ENOSPC`); '' kills the process. */
  errno: string
}

function parsePoint(spec: string): Point {
  const eq = /^(.*)=(E[A-Z0-9]+)$/.exec(spec)
  const rest = eq === null ? spec : (eq[1] ?? '')
  const errno = eq === null ? '' : (eq[2] ?? '')
  if (errno !== '' && !(errno in os.constants.errno))
    throw new Error(`failpoint ${JSON.stringify(spec)}: ${errno} is not an errno`)
  const m = /^(.*)@([1-9][0-9]*)$/.exec(rest)
  return m === null ? { name: rest, nth: 1, seen: 0, errno } : { name: m[1] ?? '', nth: Number(m[2]), seen: 0, errno }
}

function parse(spec: string): Point[] {
  return spec
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '' && !s.startsWith(SKIP_FSYNC))
    .map(parsePoint)
}

/** The error an injected errno throws: node's shape for a failed call (code, errno, syscall), naming the step. */
export function injectedFault(errno: string, step: string): NodeJS.ErrnoException {
  const number = (os.constants.errno as Record<string, number>)[errno]
  const err: NodeJS.ErrnoException = new Error(`${errno}: injected at failpoint ${step}`)
  err.code = errno
  if (number !== undefined) err.errno = -number
  err.syscall = 'failpoint'
  return err
}

/**
 * The pass's failpoint hook from config.failpoint, or undefined when none is
 * set. kill is what happens at a point without an errno (default: SIGKILL
 * this process); a point with one throws injectedFault at its arrival.
 */
export function failpointFrom(
  spec: string,
  kill: (step: string) => void = () => process.kill(process.pid, 'SIGKILL'),
): ((step: string) => void) | undefined {
  const points = parse(spec)
  if (points.length === 0) return undefined
  return (step) => {
    for (const p of points) {
      if (p.name !== step || ++p.seen !== p.nth) continue
      if (p.errno !== '') throw injectedFault(p.errno, step)
      kill(step)
    }
  }
}

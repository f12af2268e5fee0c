// The crash and fault points the crash suite stops the pass at (design §3.4, §3.5; tests only). CARLOS_FAILPOINT,
// comma-separated: `step[:host][@n]` SIGKILLs there, `=ENOSPC` throws that errno instead; `skip-fsync:<name>` drops
// one fsync, which the power-loss audit must notice.
import os from 'node:os'

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

/** For `skip-fsync:<name>` (design §3.5). */
export const FSYNC_NAMES = [
  /** `D` after mkdir `D/layout` (step 4). */
  'layout-dir',
  /** Journal temp files (step 4). */
  'journal-data',
  /** `D/layout` after the renames (step 4). */
  'journal-dir',
  /** New entries' parents (step 6). */
  'prepare-parents',
  /** Nested `run/` after chmod (step 6). */
  'run-mode',
  /** Rename source parent (step 7). */
  'rename-source-parent',
  /** Rename destination parent (step 7). */
  'rename-dest-parent',
  /** WAL at the row commit (step 8). */
  'registry-commit',
  /** `D/layout` after removal (step 9). */
  'journal-remove-dir',
  /** `D` after mkdir `D/nested` (§5.4). */
  'nested-entry',
] as const

export type FsyncName = (typeof FSYNC_NAMES)[number]

const SKIP_FSYNC = 'skip-fsync:'

const skipped = new Set<FsyncName>()

/** An unknown name throws, so a misspelt test cannot pass. */
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

export function fsyncSkipped(name: FsyncName | undefined): boolean {
  return skipped.size !== 0 && name !== undefined && skipped.has(name)
}

interface Point {
  name: string
  nth: number
  seen: number
  /** '' kills the process. */
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

/** Node's errno shape. */
export function injectedFault(errno: string, step: string): NodeJS.ErrnoException {
  const number = (os.constants.errno as Record<string, number>)[errno]
  const err: NodeJS.ErrnoException = new Error(`${errno}: injected at failpoint ${step}`)
  err.code = errno
  if (number !== undefined) err.errno = -number
  err.syscall = 'failpoint'
  return err
}

/** A point kills (SIGKILL) or throws its errno. */
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

// Child processes of the tests, each in a process group of its own: a test
// ends what it started by killing the whole group (a launcher such as
// systemd-socket-activate or a shell would otherwise leave its own children
// running, holding their ports), when the test ends or times out and at the
// latest when the test file's process exits. Every wait for a child's end
// is bounded, and a child that outlives its wait is killed with its group.
import { execFile, spawn, type ChildProcess, type ExecFileOptions, type SpawnOptions } from 'node:child_process'
import { setTimeout as delay } from 'node:timers/promises'
import { promisify } from 'node:util'
import type { Scope } from './tmp.js'

export interface Ended {
  code: number | null
  signal: NodeJS.Signals | null
}

/** The default bound of a wait for a child to end by itself: generous, as until.ts's is on a busy machine. */
export const END_WAIT_MS = 60_000
/** How long a child killed with SIGKILL may take to be gone, its output closed. */
const KILLED_MS = 10_000

const closes = new WeakMap<ChildProcess, Promise<Ended>>()
/** The children whose groups this process kills on its way out, while they run. */
const leaders = new Set<ChildProcess>()
let exitHooked = false

/** Whether child has not exited yet: while it has not, its pid, and so its group id, is still its own. */
function running(child: ChildProcess): boolean {
  return child.pid !== undefined && child.exitCode === null && child.signalCode === null
}

/**
 * SIGKILL to child's group, while child still runs: once it has exited and
 * been reaped, its pid may be another process's, and the group is not
 * addressed by it (a group outliving its leader is ended by the test that
 * knows its members).
 */
function killGroup(child: ChildProcess): void {
  if (!running(child) || child.pid === undefined) return
  try {
    process.kill(-child.pid, 'SIGKILL')
  } catch (err) {
    // Gone between the check and the kill: nothing left to end.
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err
  }
}

/** How child ends (its output closed too), watched from the moment this is first asked. */
function closeOf(child: ChildProcess): Promise<Ended> {
  let p = closes.get(child)
  if (p === undefined) {
    p = new Promise<Ended>((resolve, reject) => {
      child.once('close', (code: number | null, signal: NodeJS.Signals | null) => resolve({ code, signal }))
      child.once('error', reject)
    })
    // A spawn that failed is reported by the wait that asks, not as an unhandled rejection.
    p.catch(() => undefined)
    closes.set(child, p)
  }
  return p
}

/**
 * Puts child, which leads a group of its own (spawned with `detached`), on
 * the list whose groups are killed when this process exits: the last
 * resort for a test that timed out before it could end what it started.
 */
export function trackGroup(child: ChildProcess): void {
  if (child.pid === undefined) return
  if (!exitHooked) {
    exitHooked = true
    process.on('exit', () => {
      for (const c of leaders) killGroup(c)
    })
  }
  leaders.add(child)
  child.once('exit', () => leaders.delete(child))
  void closeOf(child)
}

/** Spawns command in a process group of its own, killed whole when the test (or scope) ends. */
export function spawnFor(t: Scope, command: string, args: readonly string[], options: SpawnOptions = {}): ChildProcess {
  const child = spawn(command, args, { ...options, detached: true })
  void closeOf(child)
  trackGroup(child)
  t.after(() => endGroup(child))
  return child
}

/** Spawns command in a process group of its own, ended by its caller (ended, endGroup) or when this process exits. */
export function spawnGroup(command: string, args: readonly string[], options: SpawnOptions = {}): ChildProcess {
  const child = spawn(command, args, { ...options, detached: true })
  void closeOf(child)
  trackGroup(child)
  return child
}

/** SIGKILL to child's whole group, and its end (bounded). */
export async function endGroup(child: ChildProcess): Promise<Ended | undefined> {
  if (child.pid === undefined) return undefined
  killGroup(child)
  return ended(child, `the killed child (pid ${child.pid})`, KILLED_MS)
}

/**
 * Waits for child to end by itself (its output closed); after ms it is
 * killed with its group and the wait fails, naming what.
 */
export async function ended(child: ChildProcess, what: string, ms = END_WAIT_MS): Promise<Ended> {
  const ac = new AbortController()
  try {
    return await Promise.race([
      closeOf(child),
      delay(ms, undefined, { signal: ac.signal }).then(() => {
        killGroup(child)
        throw new Error(`${what} (pid ${String(child.pid)}) did not end within ${ms} ms; killed`)
      }),
    ])
  } finally {
    ac.abort()
  }
}

const execFilePromised = promisify(execFile)

/**
 * execFile, promised, with a bound: a command still running after ms (by
 * default END_WAIT_MS) is killed with SIGKILL and the promise fails.
 */
export async function run(
  file: string,
  args: readonly string[],
  options: ExecFileOptions = {},
): Promise<{ stdout: string; stderr: string }> {
  return execFilePromised(file, args, { timeout: END_WAIT_MS, killSignal: 'SIGKILL', ...options, encoding: 'utf8' })
}

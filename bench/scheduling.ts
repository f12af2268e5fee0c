// The scheduling contrib/layoutd.service gives the agent (design §3.6), for
// the processes a bench starts: read from the unit itself and applied with
// `chrt`, as systemd applies it before node starts, so a bench measures the
// agent as it is deployed. Where chrt is refused (no CAP_SYS_NICE, no
// RLIMIT_RTPRIO), the processes run ordinary and the figures say so.
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'

const UNIT = new URL('../../contrib/layoutd.service', import.meta.url)

/** A command prefix that starts a program as the unit starts the agent, and what it is in words. */
export interface Scheduling {
  /** `chrt …` to put before the program; empty when the processes run ordinary. */
  launcher: string[]
  /** `SCHED_RR 10, reset on fork (contrib/layoutd.service)`, or why not. */
  what: string
}

/** The unit's CPUScheduling* settings. */
function unitSettings(): { policy: string; priority: string; resetOnFork: boolean } {
  const text = fs.readFileSync(UNIT, 'utf8')
  const value = (key: string): string => new RegExp(`^${key}=(.*)$`, 'm').exec(text)?.[1]?.trim() ?? ''
  return {
    policy: value('CPUSchedulingPolicy'),
    priority: value('CPUSchedulingPriority'),
    resetOnFork: value('CPUSchedulingResetOnFork') === 'yes',
  }
}

/**
 * Node's own flags for the agent, read from the unit's ExecStart (npm
 * start, the image and bin/layoutd give the same, which test/contrib
 * holds): a bench starts the agent with them, so its figures are those of
 * the agent as it runs (its young generation's size among them, design §9).
 */
export function unitNodeArgs(): string[] {
  const exec = /^ExecStart=(.*)$/m.exec(fs.readFileSync(UNIT, 'utf8'))?.[1]?.trim().split(/\s+/) ?? []
  const args: string[] = []
  for (const arg of exec.slice(1)) {
    if (!arg.startsWith('-')) break
    args.push(arg)
  }
  return args
}

/**
 * The unit's Environment= settings (its MALLOC_ARENA_MAX among them): a
 * bench gives the agent them, so it measures the allocator as deployed.
 */
export function unitEnvironment(): Record<string, string> {
  const env: Record<string, string> = {}
  for (const [, line] of fs.readFileSync(UNIT, 'utf8').matchAll(/^Environment=(.*)$/gm))
    for (const pair of (line ?? '').trim().split(/\s+/)) {
      const at = pair.indexOf('=')
      if (at > 0) env[pair.slice(0, at)] = pair.slice(at + 1)
    }
  return env
}

/** chrt's arguments for the unit's settings, or undefined when the unit sets none. */
function chrtArgs(): string[] | undefined {
  const { policy, priority, resetOnFork } = unitSettings()
  if (policy === '') return undefined
  return [...(resetOnFork ? ['--reset-on-fork'] : []), `--${policy}`, priority === '' ? '0' : priority]
}

/**
 * The unit's scheduling, if this machine lets a process take it (tried
 * on `true` first); otherwise no launcher and the reason.
 */
export function unitScheduling(): Scheduling {
  const args = chrtArgs()
  if (args === undefined) return { launcher: [], what: 'SCHED_OTHER (contrib/layoutd.service sets no policy)' }
  const tried = spawnSync('chrt', [...args, 'true'], { encoding: 'utf8' })
  const what = `chrt ${args.join(' ')} (contrib/layoutd.service)`
  if (tried.error !== undefined || tried.status !== 0)
    return { launcher: [], what: `SCHED_OTHER: ${what} refused: ${tried.error?.message ?? tried.stderr.trim()}` }
  return { launcher: ['chrt', ...args], what }
}

/**
 * Gives this process's own event-loop thread the unit's policy one
 * priority below the agent's (or takes it back, `ordinary`): the bench's
 * open loops then send each request at its tick and read each answer when
 * it comes, ahead of every ordinary thread, rather than waiting for a core
 * themselves, so a latency is the agent's and not the load generator's;
 * and never ahead of the agent's loop, which a load generator at its own
 * priority would take turns with. Answers what it did, for the figures.
 */
export function scheduleThisLoop(s: Scheduling, ordinary = false): string {
  // The launcher is `chrt` and the unit's arguments, the priority last.
  const args = s.launcher.slice(1)
  if (args.length === 0) return 'SCHED_OTHER'
  const priority = Math.max(1, Number(args.at(-1)) - 1)
  const set = ordinary ? ['--other', '0'] : [...args.slice(0, -1), String(priority)]
  const done = spawnSync('chrt', [...set.slice(0, -1), '-p', set.at(-1) ?? '0', String(process.pid)], {
    encoding: 'utf8',
  })
  if (done.error !== undefined || done.status !== 0)
    throw new Error(`chrt on the bench's own loop failed: ${done.error?.message ?? done.stderr.trim()}`)
  return ordinary ? 'SCHED_OTHER' : `chrt ${set.join(' ')} (one below the agent's)`
}

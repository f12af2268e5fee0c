// How the kernel schedules the thread that answers the activator, read at start from /proc (design §3.6): the unit
// runs it SCHED_RR so an answer never waits behind the box's other threads, which the reset-on-fork keeps ordinary.
// Only read: systemd sets it.
import fs from 'node:fs'
import type { AppLogger } from '../logger.js'

/** By the names `chrt` and systemd use. */
const POLICIES: Readonly<Record<number, string>> = {
  0: 'SCHED_OTHER',
  1: 'SCHED_FIFO',
  2: 'SCHED_RR',
  3: 'SCHED_BATCH',
  5: 'SCHED_IDLE',
  6: 'SCHED_DEADLINE',
}

export interface ThreadScheduling {
  name: string
  policy: string
  /** 1-99 real-time, else 0. */
  rtPriority: number
  nice: number
}

export function isRealTime(s: ThreadScheduling): boolean {
  return s.policy === 'SCHED_FIFO' || s.policy === 'SCHED_RR'
}

/** A name may hold `(` or `)`; proc(5) fields 19, 40, 41. */
export function parseTaskStat(line: string): ThreadScheduling | undefined {
  const open = line.indexOf('(')
  const close = line.lastIndexOf(')')
  if (open < 0 || close < open) return undefined
  // After ") " the fields start at the third (state).
  const fields = line
    .slice(close + 2)
    .trim()
    .split(' ')
  const nice = Number(fields[19 - 3])
  const rtPriority = Number(fields[40 - 3])
  const policy = Number(fields[41 - 3])
  if (![nice, rtPriority, policy].every(Number.isInteger)) return undefined
  return {
    name: line.slice(open + 1, close),
    policy: POLICIES[policy] ?? `policy ${String(policy)}`,
    rtPriority,
    nice,
  }
}

export interface LoopScheduling {
  loop: ThreadScheduling
  /** Inherited where the unit did not reset on fork. */
  inheritedBy: string[]
}

/** undefined where /proc cannot say. */
export function readLoopScheduling(proc = '/proc/self'): LoopScheduling | undefined {
  let tids: string[]
  let pid: string
  try {
    pid = fs.readFileSync(`${proc}/stat`, 'utf8').split(' ', 1)[0] ?? ''
    tids = fs.readdirSync(`${proc}/task`)
  } catch {
    return undefined
  }
  const read = (tid: string): ThreadScheduling | undefined => {
    try {
      return parseTaskStat(fs.readFileSync(`${proc}/task/${tid}/stat`, 'utf8'))
    } catch {
      // Ended since the listing.
      return undefined
    }
  }
  const loop = read(pid)
  if (loop === undefined) return undefined
  const inheritedBy = isRealTime(loop)
    ? tids
        .filter((tid) => tid !== pid)
        .map(read)
        .filter((t): t is ThreadScheduling => t !== undefined && isRealTime(t))
        .map((t) => t.name)
    : []
  return { loop, inheritedBy }
}

export interface Said {
  level: 'debug' | 'info' | 'warn'
  message: string
}

/** What to set when the unit's setting is missing or half-made. */
export function describeLoopScheduling(s: LoopScheduling): Said {
  const { loop } = s
  // Ordinary under `npm start`, containers and tests: debug only.
  if (!isRealTime(loop))
    return {
      level: 'debug',
      message:
        `layoutd: the loop's thread runs at ${loop.policy} nice ${String(loop.nice)}, so through a converge an ` +
        `answer to the activator can wait for a core; contrib/layoutd.service runs it at SCHED_RR ` +
        `(CPUSchedulingPolicy=rr, CPUSchedulingResetOnFork=yes)`,
    }
  const at = `${loop.policy} ${String(loop.rtPriority)}`
  if (s.inheritedBy.length === 0)
    return { level: 'info', message: `layoutd: the loop's thread runs at ${at}; the threads it starts are ordinary` }
  const names = [...new Set(s.inheritedBy)].join(', ')
  return {
    level: 'warn',
    message:
      `layoutd: the loop's thread runs at ${at}, and so do ${String(s.inheritedBy.length)} threads it started ` +
      `(${names}): the converge's threads then take turns with it rather than wait for it; ` +
      `set CPUSchedulingResetOnFork=yes beside CPUSchedulingPolicy= (contrib/layoutd.service)`,
  }
}

export function sayLoopScheduling(logger: AppLogger, proc = '/proc/self'): void {
  const s = readLoopScheduling(proc)
  if (s === undefined) return
  const { level, message } = describeLoopScheduling(s)
  logger[level]({ loopScheduling: { ...s.loop, inheritedBy: s.inheritedBy.length } }, message)
}

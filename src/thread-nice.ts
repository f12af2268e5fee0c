// The nice of the calling thread alone (Linux's setpriority takes a
// thread's id, and /proc/thread-self names it): a worker thread that does
// the pass's or the report's work niced below the loop's thread, which
// answers the activator, so that when the two want the same core the loop
// has it.
import fs from 'node:fs'
import os from 'node:os'

/** Sets this thread's nice; on anything but Linux with /proc it does nothing (the thread runs at the process's). */
export function niceThisThread(nice: number): void {
  try {
    const tid = Number(fs.readlinkSync('/proc/thread-self').split('/').pop())
    if (Number.isInteger(tid) && tid > 0) os.setPriority(tid, nice)
  } catch {
    // Not Linux, or no /proc.
  }
}

// The nice of the calling thread alone (Linux's setpriority takes a thread id):
// the WAL checkpoint thread runs below the loop's, which answers the activator (design §3.6).
import fs from 'node:fs'
import os from 'node:os'

/** Sets this thread's nice; a no-op but on Linux with /proc. */
export function niceThisThread(nice: number): void {
  try {
    const tid = Number(fs.readlinkSync('/proc/thread-self').split('/').pop())
    if (Number.isInteger(tid) && tid > 0) os.setPriority(tid, nice)
  } catch {
    // Not Linux, or no /proc.
  }
}

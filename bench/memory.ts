// The agent's memory as the bench reads it from outside: its RSS from
// /proc, and each thread's JavaScript heap from a diagnostic report (node's
// --report-on-signal, which the bench starts the agent with): the report
// holds the loop's thread's heap and a subreport of every worker thread,
// named as the agent named the thread. Nothing in the agent is changed to
// be measured.
import fs from 'node:fs'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'

/** node's flags for an agent whose heaps the bench reads (threadHeaps): reports written to dir on SIGWINCH (close-with-grace takes SIGUSR2 for a shutdown). */
export function reportArgs(dir: string): string[] {
  fs.mkdirSync(dir, { recursive: true })
  return ['--report-on-signal', '--report-signal=SIGWINCH', `--report-directory=${dir}`]
}

/** One thread's heap: used and held by V8, in MB. */
export interface Heap {
  usedMB: number
  totalMB: number
}

/** The agent's memory at one moment. */
export interface Memory {
  rssMB: number
  /** Threads the process runs, by name (libuv's pool, V8's own, the worker threads), counted. */
  threads: Record<string, number>
  /** The heap of the loop's thread (`main`) and of each worker thread, by its name. */
  heaps: Record<string, Heap>
}

const mb = (bytes: number): number => Math.round((bytes / 2 ** 20) * 10) / 10

interface Report {
  header: { event: string }
  javascriptHeap: { usedMemory: number; totalMemory: number }
  workers?: Report[]
}

/** The name a worker's subreport carries (`Worker thread subreport [layoutd-report]`), or its order. */
function workerName(r: Report, i: number): string {
  return /\[(.+)\]$/.exec(r.header.event)?.[1] ?? `worker ${i + 1}`
}

/** Each thread's heap, from a report the agent (pid) writes into dir when signalled; at most 30 s. */
export async function threadHeaps(pid: number, dir: string): Promise<Record<string, Heap>> {
  const before = new Set(fs.readdirSync(dir))
  process.kill(pid, 'SIGWINCH')
  for (const until = Date.now() + 30_000; Date.now() < until; await sleep(100)) {
    const file = fs.readdirSync(dir).find((f) => !before.has(f) && f.endsWith('.json'))
    if (file === undefined) continue
    let report: Report
    try {
      report = JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8')) as Report
    } catch {
      // Still being written.
      continue
    }
    fs.rmSync(path.join(dir, file))
    const heaps: Record<string, Heap> = {}
    const put = (name: string, r: Report): void => {
      heaps[name] = { usedMB: mb(r.javascriptHeap.usedMemory), totalMB: mb(r.javascriptHeap.totalMemory) }
    }
    put('main', report)
    for (const [i, w] of (report.workers ?? []).entries()) put(workerName(w, i), w)
    return heaps
  }
  throw new Error(`the agent wrote no diagnostic report into ${dir} within 30 s`)
}

/** The process's RSS, from /proc. */
export function rssMB(pid: number): number {
  const line = fs
    .readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('VmRSS:'))
  return Math.round((Number(/(\d+)/.exec(line ?? '')?.[1] ?? 0) / 1024) * 10) / 10
}

/** Threads of the process by name, counted. */
export function threadNames(pid: number): Record<string, number> {
  const out: Record<string, number> = {}
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      const name = fs.readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim()
      out[name] = (out[name] ?? 0) + 1
    } catch {
      // A thread that ended between the listing and the read.
    }
  }
  return out
}

/** The agent's memory now: RSS, threads, and each thread's heap. */
export async function memory(pid: number, reports: string): Promise<Memory> {
  const heaps = await threadHeaps(pid, reports)
  return { rssMB: rssMB(pid), threads: threadNames(pid), heaps }
}

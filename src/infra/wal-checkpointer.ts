// The registry's checkpoints, off the loop's thread (design §3.6). SQLite
// checkpoints on the connection that committed last, fsyncing WAL and
// database, so the loop would wait on the disk (docs/performance.md). The
// agent's connections never do; this does, on its own thread and connection,
// once the WAL holds 1,000 pages not copied back (read from the `-shm`
// index). A commit is durable with the WAL alone. If the thread fails, the
// connections checkpoint themselves again, and the agent says so. The thread
// lives only while checkpoints come (started by the first, ended after
// THREAD_IDLE_MS without one): an idle isolate would hold its heap for nothing.
import fs from 'node:fs'
import os from 'node:os'
import { Worker } from 'node:worker_threads'
import { trimAllocator } from './allocator-trim.js'

/** SQLite's own threshold (`wal_autocheckpoint`'s default, in pages), kept. */
export const CHECKPOINT_PAGES = 1000

/** The nice of the checkpoint thread: below the loop's thread, which answers the activator. */
export const CHECKPOINT_NICE = 5

/** How often the WAL index is looked at between the pass's commits (the claims commit too). */
const LOOK_EVERY_MS = 2000

/** How long the thread is kept after its last checkpoint, for the next. */
export const THREAD_IDLE_MS = 10_000

/** What the thread is started with. */
export interface CheckpointThreadData {
  file: string
  /** The agent's connections' `synchronous`, so a checkpoint fsyncs where their commits would. */
  synchronous: 'NORMAL' | 'OFF'
}

/** Its answer to each request: `PRAGMA wal_checkpoint(PASSIVE)`'s pages, or the error. */
export type CheckpointReply = { log: number; checkpointed: number } | { error: string }

export interface CheckpointerOptions {
  /** Called once, should the thread fail: the agent's connections checkpoint themselves from then on. */
  onFailed: (reason: string) => void
  /** The thread's script (tests hand in one that fails). */
  worker?: URL
  /** How long the thread is kept after its last checkpoint (THREAD_IDLE_MS; tests shorten it). */
  idleMs?: number
}

export class WalCheckpointer {
  readonly #file: string
  #shm: number | undefined
  readonly #onFailed: (reason: string) => void
  readonly #data: CheckpointThreadData
  readonly #script: URL
  readonly #idleMs: number
  /** The thread, while it lives (started by a checkpoint, ended THREAD_IDLE_MS after the last). */
  #worker: Worker | undefined
  #idle: NodeJS.Timeout | undefined
  readonly #timer: NodeJS.Timeout
  #asked: { resolve: (r: CheckpointReply) => void } | undefined
  /** Asked to end once the checkpoint under way is answered (release). */
  #releasing = false
  #failed = false
  /** Checkpoints asked of the thread, and made by it, and the threads started (the tests read them). */
  asked = 0
  done = 0
  started = 0

  constructor(data: CheckpointThreadData, opts: CheckpointerOptions) {
    this.#file = data.file
    this.#data = data
    this.#script = opts.worker ?? new URL('./wal-checkpoint-worker.js', import.meta.url)
    this.#idleMs = opts.idleMs ?? THREAD_IDLE_MS
    this.#onFailed = opts.onFailed
    this.#timer = setInterval(() => void this.consider(), LOOK_EVERY_MS)
    this.#timer.unref()
  }

  /** Whether the thread has failed (the connections checkpoint themselves since). */
  get failed(): boolean {
    return this.#failed
  }

  /** Whether the thread is alive now. */
  get running(): boolean {
    return this.#worker !== undefined
  }

  #thread(): Worker {
    if (this.#worker !== undefined) return this.#worker
    const worker = new Worker(this.#script, { workerData: this.#data, name: 'layoutd-checkpoint' })
    worker.on('message', (reply: CheckpointReply) => this.#answered(reply))
    worker.on('error', (err: Error) => this.#fail(`the checkpoint thread failed: ${err.message}`))
    worker.on('exit', (code) => this.#fail(`the checkpoint thread exited (code ${code})`))
    // Never what keeps the process alive; after the listeners, which would ref it again.
    worker.unref()
    this.started++
    this.#worker = worker
    return worker
  }

  /** Ends the thread, which made no checkpoint for THREAD_IDLE_MS; the next checkpoint starts another. */
  #end(): void {
    this.#idle = undefined
    this.#releasing = false
    const worker = this.#worker
    if (worker === undefined || this.#asked !== undefined) return
    this.#worker = undefined
    worker.removeAllListeners('exit')
    // What the isolate freed, glibc keeps unless asked (allocator-trim.ts).
    void worker.terminate().then(trimAllocator)
  }

  /**
   * Asks the thread for a checkpoint when the WAL holds the threshold's
   * pages not yet copied back and none is under way; answers when that one
   * is done (at once when none was needed). A read of 100 bytes on the
   * calling thread.
   */
  consider(): Promise<void> {
    if (this.#failed || this.#asked !== undefined) return Promise.resolve()
    const pending = this.#pendingPages()
    return pending === undefined || pending < CHECKPOINT_PAGES ? Promise.resolve() : this.#checkpoint()
  }

  /** A checkpoint now, asked synchronously, whatever the WAL's size. */
  async #checkpoint(): Promise<void> {
    clearTimeout(this.#idle)
    const reply = await new Promise<CheckpointReply>((resolve) => {
      this.#asked = { resolve }
      this.asked++
      this.#thread().postMessage('checkpoint')
    })
    if ('error' in reply) this.#fail(`a checkpoint failed: ${reply.error}`)
    else if (!this.#failed) {
      this.#idle = setTimeout(() => this.#end(), this.#releasing ? 0 : this.#idleMs)
      this.#idle.unref()
    }
  }

  /**
   * A large run is over and no burst of commits follows it: the thread ends
   * now, or as soon as the checkpoint under way is answered, rather than
   * holding its isolate through the idle wait. The next checkpoint starts one.
   */
  release(): void {
    if (this.#worker === undefined) return
    if (this.#asked !== undefined) {
      this.#releasing = true
      return
    }
    clearTimeout(this.#idle)
    this.#end()
  }

  /** Ends the thread and the looks (before the registry's connections close). */
  stop(): void {
    clearInterval(this.#timer)
    clearTimeout(this.#idle)
    this.#failed = true
    this.#worker?.removeAllListeners('exit')
    void this.#worker?.terminate()
    this.#worker = undefined
    this.#asked?.resolve({ error: 'the registry was closed' })
    this.#asked = undefined
  }

  /**
   * Closes the WAL index's descriptor, once every connection of this
   * process to the registry is closed: closing any descriptor of a file
   * drops every POSIX lock the process holds on it, SQLite's on the index
   * among them, so it stays open for as long as they are.
   */
  closeIndexAfterConnections(): void {
    if (this.#shm !== undefined) fs.closeSync(this.#shm)
    this.#shm = undefined
  }

  #answered(reply: CheckpointReply): void {
    if (!('error' in reply)) this.done++
    const asked = this.#asked
    this.#asked = undefined
    asked?.resolve(reply)
  }

  #fail(reason: string): void {
    if (this.#failed) return
    this.#failed = true
    clearInterval(this.#timer)
    clearTimeout(this.#idle)
    void this.#worker?.terminate()
    this.#worker = undefined
    this.#asked?.resolve({ error: reason })
    this.#asked = undefined
    this.#onFailed(reason)
  }

  /**
   * The WAL's frames not yet copied back into the database, from the WAL
   * index's header (SQLite's file format, walformat.html: the last valid
   * frame at byte 16, the frames copied back at byte 96, both in the
   * machine's byte order); undefined with no index yet. Read without
   * SQLite's locks (a torn read only moves one decision to the next look),
   * through a descriptor opened once and closed only after the connections
   * (closeIndexAfterConnections).
   */
  #pendingPages(): number | undefined {
    try {
      this.#shm ??= fs.openSync(`${this.#file}-shm`, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW)
      const header = Buffer.alloc(100)
      if (fs.readSync(this.#shm, header, 0, 100, 0) !== 100) return undefined
      const little = os.endianness() === 'LE'
      const last = little ? header.readUInt32LE(16) : header.readUInt32BE(16)
      const copied = little ? header.readUInt32LE(96) : header.readUInt32BE(96)
      return Math.max(0, last - copied)
    } catch {
      return undefined
    }
  }
}

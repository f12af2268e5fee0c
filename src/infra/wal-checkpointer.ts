// The registry's checkpoints, off the loop's thread (design §3.6). The connection that committed last would
// checkpoint, its fsyncs stalling the loop. If the thread fails the connections do again; it lives only while
// checkpoints come, as an idle isolate holds its heap.
import fs from 'node:fs'
import os from 'node:os'
import { Worker } from 'node:worker_threads'
import { trimAllocator } from './allocator-trim.js'

/** `wal_autocheckpoint`'s default, kept. */
export const CHECKPOINT_PAGES = 1000

/** Below the loop's thread. */
export const CHECKPOINT_NICE = 5

/** Between the pass's commits (claims commit too). */
const LOOK_EVERY_MS = 2000

export const THREAD_IDLE_MS = 10_000

export interface CheckpointThreadData {
  file: string
  /** So a checkpoint fsyncs where their commits would. */
  synchronous: 'NORMAL' | 'OFF'
}

export type CheckpointReply = { log: number; checkpointed: number } | { error: string }

export interface CheckpointerOptions {
  /** Called once; the connections checkpoint from then on. */
  onFailed: (reason: string) => void
  /** Tests fail it. */
  worker?: URL
  /** Tests shorten it. */
  idleMs?: number
}

export class WalCheckpointer {
  readonly #file: string
  #shm: number | undefined
  readonly #onFailed: (reason: string) => void
  readonly #data: CheckpointThreadData
  readonly #script: URL
  readonly #idleMs: number
  #worker: Worker | undefined
  #idle: NodeJS.Timeout | undefined
  readonly #timer: NodeJS.Timeout
  #asked: { resolve: (r: CheckpointReply) => void } | undefined
  /** Asked to end once the checkpoint under way is answered (release). */
  #releasing = false
  #failed = false
  /** For tests. */
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

  get failed(): boolean {
    return this.#failed
  }

  get running(): boolean {
    return this.#worker !== undefined
  }

  #thread(): Worker {
    if (this.#worker !== undefined) return this.#worker
    const worker = new Worker(this.#script, { workerData: this.#data, name: 'layoutd-checkpoint' })
    worker.on('message', (reply: CheckpointReply) => this.#answered(reply))
    worker.on('error', (err: Error) => this.#fail(`the checkpoint thread failed: ${err.message}`))
    worker.on('exit', (code) => this.#fail(`the checkpoint thread exited (code ${code})`))
    // Never keeps the process alive; after the listeners, which would ref it.
    worker.unref()
    this.started++
    this.#worker = worker
    return worker
  }

  /** The next checkpoint starts another. */
  #end(): void {
    this.#idle = undefined
    this.#releasing = false
    const worker = this.#worker
    if (worker === undefined || this.#asked !== undefined) return
    this.#worker = undefined
    worker.removeAllListeners('exit')
    // glibc keeps what the isolate freed unless asked (allocator-trim.ts).
    void worker.terminate().then(trimAllocator)
  }

  /** Once CHECKPOINT_PAGES are uncopied and none is under way; a 100-byte read here. */
  consider(): Promise<void> {
    if (this.#failed || this.#asked !== undefined) return Promise.resolve()
    const pending = this.#pendingPages()
    return pending === undefined || pending < CHECKPOINT_PAGES ? Promise.resolve() : this.#checkpoint()
  }

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

  /** After a large run no burst of commits follows: end now, or once the checkpoint under way is answered. */
  release(): void {
    if (this.#worker === undefined) return
    if (this.#asked !== undefined) {
      this.#releasing = true
      return
    }
    clearTimeout(this.#idle)
    this.#end()
  }

  /** Before the registry's connections close. */
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

  /** Closing any fd of the file drops SQLite's POSIX locks on it. */
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

  /** From the index header (walformat.html), lockless: a torn read only defers a decision to the next look. */
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

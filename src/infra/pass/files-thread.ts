// The files thread (design §3.6): a worker thread that does a move's file
// work (pass-files.ts) for the loop's thread, which keeps every decision,
// the fence table and the wake verdicts. Each request names hosts already
// fenced; the thread does the calls in order and answers what each did.
// Should the thread die, every request it had not answered fails, so the
// moves waiting on it keep their journals and fences for recovery (fail
// closed), and the next request starts another thread.
import { Worker } from 'node:worker_threads'
import type { Dirs } from '../../domain/paths.js'
import type { FsyncName } from '../failpoint.js'
import type { FileError, PassFiles, Prepared, PrepareItem, RenameItem, RenameRun } from './pass-files.js'
import { fromFileError } from './pass-files.js'

/** A request to the files thread: one call of PassFiles, by name. */
export type FilesRequest = { id: number } & (
  | { op: 'prepare'; dirs: Dirs; items: readonly PrepareItem[]; gid: number }
  | { op: 'fsync'; dirs: ReadonlyArray<readonly [string, FsyncName]> }
  | { op: 'rename'; items: readonly RenameItem[] }
)

/** Its answer: the call's result, or the error it threw. */
export type FilesReply = { id: number; ok: unknown } | { id: number; err: FileError }

/** What the thread is started with: CARLOS_FAILPOINT, for its failpoints and the fsyncs a test takes out. */
export interface FilesThreadData {
  failpoint: string
}

/** The nice of the files thread: below the loop's thread, which answers the activator (files-worker.ts). */
export const FILES_NICE = 5

type Pending = Map<number, { resolve: (v: unknown) => void; reject: (err: Error) => void }>

/** One running worker and the requests it has not answered. */
class Running {
  readonly worker: Worker
  readonly pending: Pending = new Map()
  dead: Error | undefined
  readonly #onGone: (r: Running) => void

  constructor(data: FilesThreadData, onGone: (r: Running) => void) {
    this.worker = new Worker(new URL('./files-worker.js', import.meta.url), { workerData: data, name: 'layoutd-files' })
    this.worker.on('message', (reply: FilesReply) => {
      const waiter = this.pending.get(reply.id)
      this.pending.delete(reply.id)
      if (waiter === undefined) return
      if ('err' in reply) waiter.reject(fromFileError(reply.err))
      else waiter.resolve(reply.ok)
    })
    this.#onGone = onGone
    this.worker.on('error', (err: Error) => this.end(new Error(`the files thread failed: ${err.message}`)))
    this.worker.on('exit', (code) => this.end(new Error(`the files thread exited (code ${code})`)))
    // Never what keeps the process alive: an agent stopping does not wait for it. (After the
    // listeners: a 'message' listener added to an unref'd worker refs it again.)
    this.worker.unref()
  }

  /** Fails every request not answered yet, at once: an answer that comes after is not heard. */
  end(err: Error): void {
    this.dead ??= err
    for (const waiter of this.pending.values()) waiter.reject(this.dead)
    this.pending.clear()
    this.#onGone(this)
  }
}

/** PassFiles on the files thread, started at the first request and again after it died. */
export class FilesThread implements PassFiles {
  readonly #data: FilesThreadData
  #running: Running | undefined
  #ids = 0

  constructor(data: FilesThreadData) {
    this.#data = data
  }

  prepare(dirs: Dirs, items: readonly PrepareItem[], gid: number): Promise<Prepared[]> {
    return this.#ask({ id: 0, op: 'prepare', dirs, items, gid }) as Promise<Prepared[]>
  }

  async fsync(dirs: ReadonlyArray<readonly [string, FsyncName]>): Promise<void> {
    await this.#ask({ id: 0, op: 'fsync', dirs })
  }

  rename(items: readonly RenameItem[]): Promise<RenameRun> {
    return this.#ask({ id: 0, op: 'rename', items }) as Promise<RenameRun>
  }

  /** Ends the thread (an agent stopping); what it had not answered fails now. */
  close(): void {
    const r = this.#running
    this.#running = undefined
    if (r === undefined) return
    r.end(new Error('the files thread was ended'))
    void r.worker.terminate()
  }

  #ask(req: FilesRequest): Promise<unknown> {
    const r = (this.#running ??= new Running(this.#data, (gone) => {
      if (this.#running === gone) this.#running = undefined
    }))
    if (r.dead !== undefined) return Promise.reject(r.dead)
    const id = ++this.#ids
    return new Promise((resolve, reject) => {
      r.pending.set(id, { resolve, reject })
      r.worker.postMessage({ ...req, id })
    })
  }
}

// Preflight's walks off the event loop's thread (design §3.3). The walk
// of every file of every source is most of a move's own work, and all of
// it system calls: on worker threads it takes another core, and the
// loop's thread is left to the activator, the HTTP routes and the rest of
// the pass (the renames, the rows, the fsyncs' answers). Each source is
// still walked after its fence and before its rename; only the thread
// that walks it changes. The same threads look at a batch's sources and
// destinations for steps 4 and 6 (lstats that change nothing; the loop's
// thread acts on what they found). A thread idle for a while ends, and the
// next walk starts another: an agent whose layout is settled keeps none.
import os from 'node:os'
import { Worker } from 'node:worker_threads'
import type { Dirs } from '../../domain/paths.js'
import { asError } from '../../errors.js'
import { lookAtMove, type Look, type LookRequest } from './mover.js'
import { preflight, type Preflight } from './preflight.js'
import type { Slicer } from './sliced-fs.js'

/** A list of sources for one thread to walk, or of moves to look at. */
export type WalkRequest =
  { id: number; kind: 'walk'; dirs: string[] } | { id: number; kind: 'look'; dirs: Dirs; looks: LookRequest[] }

/** What one source's walk found, or the error that stopped it. */
export type WalkAnswer = Preflight | { kind: 'error'; message: string }

/** What one move's look found, or the error that stopped it. */
export type LookAnswer = Look | { kind: 'error'; message: string }

export type WalkReply = { id: number; found: WalkAnswer[] } | { id: number; looked: LookAnswer[] }

/** What each source's walk found, in order, or the error it ended with. */
export type Walked = Array<Preflight | Error>

/** What each move's look found, in order, or the error it ended with. */
export type Looked = Array<Look | Error>

/**
 * Each source's preflight, in order; a source whose walk failed answers its
 * error, and fails alone. And each move's look (mover.ts lookAtMove), alike.
 */
export interface Preflighter {
  check(dirs: readonly string[]): Promise<Walked>
  look(dirs: Dirs, looks: readonly LookRequest[]): Promise<Looked>
}

/** A check that never rejects: one that throws whole answers its error for every source. */
export function walkAll(preflighter: Preflighter, dirs: readonly string[]): Promise<Walked> {
  return preflighter.check(dirs).catch((err: unknown) => dirs.map(() => asError(err)))
}

/** A look that never rejects: one that throws whole answers its error for every move. */
export function lookAll(preflighter: Preflighter, dirs: Dirs, looks: readonly LookRequest[]): Promise<Looked> {
  return preflighter.look(dirs, looks).catch((err: unknown) => looks.map(() => asError(err)))
}

/** A thread's answer as the pass takes it: an error made an Error again. */
function fromThread<T extends { kind: string }>(a: T | { kind: 'error'; message: string }): T | Error {
  return a.kind === 'error' && 'message' in a ? new Error(a.message) : (a as T)
}

/** Preflight on the loop's thread, in slices (tests, and a pass given no pool). */
export class SlicedPreflight implements Preflighter {
  readonly #slicer: Slicer

  constructor(slicer: Slicer) {
    this.#slicer = slicer
  }

  async check(dirs: readonly string[]): Promise<Walked> {
    return this.#slicer.map(dirs, (dir) => preflight(dir, this.#slicer).catch(asError))
  }

  async look(dirs: Dirs, looks: readonly LookRequest[]): Promise<Looked> {
    return this.#slicer.map(looks, (req) => {
      try {
        return lookAtMove(dirs, req)
      } catch (err) {
        return asError(err)
      }
    })
  }
}

/** The nice of a walking thread: below the loop's thread, which answers the activator (preflight-worker.ts). */
export const WALK_NICE = 10

/** Sources per message: a batch is shared among the threads in pieces this large. */
const CHUNK = 16

/** How long a thread with nothing to walk is kept. */
const IDLE_MS = 10_000

/**
 * Threads to walk on: one a core, at most 4. They run below the loop's
 * thread (WALK_NICE), so the loop has a core whenever it wants one, and
 * the walks have what it leaves: a converge is as long as its walks
 * (design §3.3), and on 2 cores two threads made a converge of 10,000
 * about 10% shorter than one, the activator's p99 within the runs' spread.
 */
export function walkThreads(cores = os.availableParallelism()): number {
  return Math.max(1, Math.min(4, cores))
}

/** One worker thread and the requests it has not answered. */
class WalkThread {
  readonly #worker: Worker
  readonly #pending = new Map<number, { resolve: (reply: WalkReply) => void; reject: (err: Error) => void }>()
  readonly #onGone: (t: WalkThread) => void
  readonly #idleMs: number
  #idle: NodeJS.Timeout | undefined
  #dead: Error | undefined

  constructor(idleMs: number, onGone: (t: WalkThread) => void) {
    this.#idleMs = idleMs
    this.#worker = new Worker(new URL('./preflight-worker.js', import.meta.url), { name: 'layoutd-walk' })
    this.#worker.on('message', (reply: WalkReply) => {
      const waiter = this.#pending.get(reply.id)
      this.#pending.delete(reply.id)
      waiter?.resolve(reply)
      if (this.#pending.size === 0) this.#idleSoon()
    })
    this.#onGone = onGone
    this.#worker.on('error', (err: Error) => this.#gone(new Error(`the walking thread failed: ${err.message}`)))
    this.#worker.on('exit', (code) => this.#gone(new Error(`the walking thread exited (code ${code})`)))
    // Never what keeps the process alive: an agent stopping does not wait for it. (After the
    // listeners: a 'message' listener added to an unref'd worker refs it again.)
    this.#worker.unref()
  }

  async walk(id: number, dirs: string[]): Promise<WalkAnswer[]> {
    const reply = await this.#ask({ id, kind: 'walk', dirs })
    if (!('found' in reply)) throw new Error('the walking thread answered a walk with a look')
    return reply.found
  }

  async look(id: number, dirs: Dirs, looks: LookRequest[]): Promise<LookAnswer[]> {
    const reply = await this.#ask({ id, kind: 'look', dirs, looks })
    if (!('looked' in reply)) throw new Error('the walking thread answered a look with a walk')
    return reply.looked
  }

  #ask(req: WalkRequest): Promise<WalkReply> {
    if (this.#dead !== undefined) return Promise.reject(this.#dead)
    clearTimeout(this.#idle)
    return new Promise((resolve, reject) => {
      this.#pending.set(req.id, { resolve, reject })
      this.#worker.postMessage(req)
    })
  }

  /** Ends the thread, taken out of its pool at once; what it had not answered fails. */
  end(): void {
    this.#gone(new Error('the walking thread was ended'))
    void this.#worker.terminate()
  }

  #gone(err: Error): void {
    this.#dead ??= err
    for (const waiter of this.#pending.values()) waiter.reject(this.#dead)
    this.#pending.clear()
    clearTimeout(this.#idle)
    this.#onGone(this)
  }

  #idleSoon(): void {
    this.#idle = setTimeout(() => this.end(), this.#idleMs)
    this.#idle.unref()
  }
}

/** Preflight on worker threads (walkThreads of them), started as walks come and ended when idle. */
export class PreflightPool implements Preflighter {
  readonly #size: number
  readonly #idleMs: number
  readonly #threads: WalkThread[] = []
  #next = 0
  #ids = 0

  constructor(opts: { size?: number; idleMs?: number } = {}) {
    this.#size = Math.max(1, opts.size ?? walkThreads())
    this.#idleMs = opts.idleMs ?? IDLE_MS
  }

  /** How many threads are running now. */
  get threads(): number {
    return this.#threads.length
  }

  async check(dirs: readonly string[]): Promise<Walked> {
    const chunks: Array<Promise<WalkAnswer[]>> = []
    for (let i = 0; i < dirs.length; i += CHUNK) chunks.push(this.#thread().walk(++this.#ids, dirs.slice(i, i + CHUNK)))
    const found = (await Promise.all(chunks)).flat()
    return found.map(fromThread)
  }

  /** One batch's looks, on one thread in one message: a few hundred lstats, no reason to share them out. */
  async look(dirs: Dirs, looks: readonly LookRequest[]): Promise<Looked> {
    return (await this.#thread().look(++this.#ids, dirs, [...looks])).map(fromThread)
  }

  /** Ends every thread (an agent stopping); a later walk starts them again. */
  close(): void {
    for (const t of this.#threads.splice(0)) t.end()
  }

  /** The threads in turn, one started while there are fewer than size. */
  #thread(): WalkThread {
    if (this.#threads.length < this.#size) {
      const t = new WalkThread(this.#idleMs, (gone) => {
        const i = this.#threads.indexOf(gone)
        if (i >= 0) this.#threads.splice(i, 1)
      })
      this.#threads.push(t)
      return t
    }
    this.#next = (this.#next + 1) % this.#threads.length
    return this.#threads[this.#next] as WalkThread
  }
}

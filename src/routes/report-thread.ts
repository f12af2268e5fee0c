// The report built off the loop's thread (design §6.2): the status
// route's JSON and the console's rows, for a version of the report, are
// made on a thread of their own (report-worker.ts), which keeps a copy of
// the box. This end reads the version's inputs in the tick it is asked
// (the agent's reportInputs), sends what changed since its last send a
// part a turn, and hands back what the thread made. The loop's thread,
// which answers the activator, no longer builds, serializes or draws
// 10,000 rows at each poll of a console, nor counts them for the row
// gauges and the box summary (ReportFigurer, handed to the agent by the app).
import { setImmediate as nextTurn } from 'node:timers/promises'
import { Worker } from 'node:worker_threads'
import {
  FeedWriter,
  type FeedHead,
  type FeedPart,
  type ReportFigurer,
  type ReportFigures,
  type ReportInputs,
  type SummaryAsk,
} from '../report/report-feed.js'
import type { ConsoleInput } from './console-view.js'

/** The nice of the report thread: below the loop's thread, which answers the activator. */
export const REPORT_NICE = 10

/** What a page asks beside the report. */
export type PageAsk = Omit<ConsoleInput, 'report'>

/** A message to the report thread: a part of a list, or a build of the version the parts before it make. */
export type ReportAsk =
  | { kind: 'part'; part: FeedPart }
  | {
      kind: 'build'
      id: number
      head: FeedHead
      want: { kind: 'status' } | ({ kind: 'page' } & PageAsk) | { kind: 'figures'; ask: SummaryAsk | null }
    }

/** The thread's answer to a build: the status JSON, the console's rows, the figures, or why it could not. */
export type ReportAnswer =
  | { id: number; ok: true; bytes: Uint8Array<ArrayBuffer> }
  | { id: number; ok: true; html: string }
  | { id: number; ok: true; figures: ReportFigures }
  | { id: number; ok: false; message: string }

type Made = Exclude<ReportAnswer, { ok: false }>

/**
 * How long a thread with nothing to make is kept: a console polling every
 * few seconds keeps its copy of the box, and a box nobody watches gives
 * that memory back (the next ask starts a thread and sends everything).
 * Longer than Prometheus's scrape interval at its default (1 min) or at
 * 2 min: each scrape asks the thread for the row gauges, and a thread
 * ended between two would be started again and sent every row at each
 * (the scrape waiting 0.3–0.45 s for 10,000 rows, design §6.2).
 */
const IDLE_MS = 150_000

export class ReportThread implements ReportFigurer {
  readonly #idleMs: number
  readonly #writer = new FeedWriter()
  readonly #pending = new Map<number, { resolve: (a: Made) => void; reject: (err: Error) => void }>()
  #worker: Worker | undefined
  #ids = 0
  /** The sends in order: an ask's parts go out a turn apiece, after those of the asks before it. */
  #sending: Promise<void> = Promise.resolve()
  #closed = false
  #idle: NodeJS.Timeout | undefined

  constructor(opts: { idleMs?: number } = {}) {
    this.#idleMs = opts.idleMs ?? IDLE_MS
  }

  /** Whether a thread is running now. */
  get running(): boolean {
    return this.#worker !== undefined
  }

  /** The status report's JSON, as the status route's schema makes it, for the version of inputs. */
  async status(inputs: ReportInputs): Promise<Buffer> {
    const made = await this.#ask(inputs, { kind: 'status' })
    if (!('bytes' in made)) throw new Error('the report thread answered a status with no bytes')
    return Buffer.from(made.bytes.buffer, made.bytes.byteOffset, made.bytes.byteLength)
  }

  /** The console's live part (console-view.ts livePart), drawn for the version of inputs. */
  async page(inputs: ReportInputs, page: PageAsk): Promise<string> {
    const made = await this.#ask(inputs, { kind: 'page', ...page })
    if (!('html' in made)) throw new Error('the report thread answered a page with no html')
    return made.html
  }

  /** The row gauges' figures and, when asked, the box summary, for the version of inputs. */
  async figures(inputs: ReportInputs, ask: SummaryAsk | null): Promise<ReportFigures> {
    const made = await this.#ask(inputs, { kind: 'figures', ask })
    if (!('figures' in made)) throw new Error('the report thread answered figures with none')
    return made.figures
  }

  /** Ends the thread (the app closing); what it had not answered fails. */
  async close(): Promise<void> {
    this.#closed = true
    clearTimeout(this.#idle)
    const worker = this.#worker
    this.#gone(new Error('the report thread was ended'))
    await worker?.terminate()
  }

  #ask(inputs: ReportInputs, want: Extract<ReportAsk, { kind: 'build' }>['want']): Promise<Made> {
    if (this.#closed) return Promise.reject(new Error('the report thread was ended'))
    const worker = this.#thread()
    clearTimeout(this.#idle)
    // In this tick: the inputs are those of the version the caller read.
    const { parts, head } = this.#writer.next(inputs)
    const id = ++this.#ids
    const made = new Promise<Made>((resolve, reject) => this.#pending.set(id, { resolve, reject }))
    this.#sending = this.#sending.then(async () => {
      for (const part of parts) {
        worker.postMessage({ kind: 'part', part } satisfies ReportAsk)
        await nextTurn()
      }
      worker.postMessage({ kind: 'build', id, head, want } satisfies ReportAsk)
    })
    return made
  }

  #thread(): Worker {
    if (this.#worker !== undefined) return this.#worker
    const worker = new Worker(new URL('./report-worker.js', import.meta.url), { name: 'layoutd-report' })
    worker.on('message', (answer: ReportAnswer) => {
      const waiter = this.#pending.get(answer.id)
      this.#pending.delete(answer.id)
      if (this.#pending.size === 0) this.#idleSoon(worker)
      if (answer.ok) {
        waiter?.resolve(answer)
        return
      }
      waiter?.reject(new Error(`report thread: ${answer.message}`))
      // What it holds may be half applied: the next thread is sent everything.
      void worker.terminate()
    })
    worker.on('error', (err: Error) => this.#gone(new Error(`the report thread failed: ${err.message}`), worker))
    worker.on('exit', (code) => this.#gone(new Error(`the report thread exited (code ${code})`), worker))
    // Never what keeps the process alive; after the listeners, which would ref it again.
    worker.unref()
    this.#worker = worker
    return worker
  }

  #idleSoon(worker: Worker): void {
    clearTimeout(this.#idle)
    this.#idle = setTimeout(() => {
      // Taken out at once: an ask from now on starts another thread.
      this.#gone(new Error('the report thread was idle'), worker)
      void worker.terminate()
    }, this.#idleMs)
    this.#idle.unref()
  }

  /** The thread is gone: what it had not answered fails, and the next ask starts another, sent everything. */
  #gone(err: Error, worker = this.#worker): void {
    if (worker !== this.#worker) return
    this.#worker = undefined
    this.#writer.reset()
    for (const waiter of this.#pending.values()) waiter.reject(err)
    this.#pending.clear()
  }
}

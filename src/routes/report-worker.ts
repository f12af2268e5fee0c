// The report thread (report-thread.ts, design §6.2): keeps the box as the
// loop's thread last sent it, builds the status report of each version
// from it, serializes it by the status route's own schema and draws the
// console's rows, and counts the figures of the agent's row gauges and box
// summary. A poll of 10,000 rows is this thread's work, never the thread
// that answers the activator. It answers nothing else.
import { createRequire } from 'node:module'
import { parentPort } from 'node:worker_threads'
import { errorMessage } from '../errors.js'
import { ReportMirror } from '../report/report-feed.js'
import type { LayoutReport } from '../domain/schemas.js'
import { livePart } from './console-view.js'
import { StatusBody } from '../report/report-json.js'
import { REPORT_NICE, type ReportAnswer, type ReportAsk } from './report-thread.js'
import { niceThisThread } from '../thread-nice.js'

// This thread alone is niced: when it and the loop's thread want the same core, the loop has it.
niceThisThread(REPORT_NICE)

type Serialize = (data: unknown) => string
type SerializerFactory = () => (externalSchemas: unknown, options: unknown) => (route: { schema: unknown }) => Serialize

// Fastify's own serializer compiler, as the app compiles the route's
// response with it (no shared schemas, no options): the bytes are the ones
// the route would have made in one piece.
const compilers = createRequire(import.meta.resolve('fastify'))('@fastify/fast-json-stringify-compiler') as {
  SerializerSelector: SerializerFactory
}
const serializeStatus = compilers.SerializerSelector()({}, undefined)({ schema: StatusBody })

const mirror = new ReportMirror()
/** The JSON of the last report serialized, by its tag: a console's page and its poll share one. */
let json: { tag: string; bytes: Uint8Array } | undefined

function statusBytes(tag: string, report: LayoutReport): Uint8Array {
  if (json?.tag !== tag) json = { tag, bytes: Buffer.from(serializeStatus(report)) }
  return json.bytes
}

function answer(ask: Extract<ReportAsk, { kind: 'build' }>): ReportAnswer {
  if (ask.want.kind === 'figures') return { id: ask.id, ok: true, figures: mirror.figures(ask.head, ask.want.ask) }
  const report = mirror.build(ask.head)
  if (ask.want.kind === 'status') {
    // A copy is handed over: the one kept serves the next reader of this tag.
    const bytes = new Uint8Array(statusBytes(ask.head.tag, report))
    return { id: ask.id, ok: true, bytes }
  }
  const { readiness, query, now, intent } = ask.want
  return { id: ask.id, ok: true, html: livePart({ report, readiness, query, now, intent }).text }
}

parentPort?.on('message', (ask: ReportAsk) => {
  if (ask.kind === 'part') {
    mirror.take(ask.part)
    return
  }
  let reply: ReportAnswer
  try {
    reply = answer(ask)
  } catch (err) {
    reply = { id: ask.id, ok: false, message: errorMessage(err) }
  }
  parentPort?.postMessage(reply, 'bytes' in reply ? [reply.bytes.buffer] : [])
})

// The status report as JSON, serialized once per version (design §6.2) in
// slices of the loop's budget, as run-json.ts does a run.
import type { FastifyReply } from 'fastify'
import { defaultSlicer } from '../domain/loop-turns.js'
import { LayoutReport, LegState, type RowReport } from '../domain/schemas.js'
import { Type } from '../domain/typebox.js'
import { around, runPieces } from './run-json.js'

export const StatusBody = Type.Object(
  { ...LayoutReport.properties, leg: LegState },
  { additionalProperties: false, description: 'The report, with its ETag.' },
)

const STATUS_BODY = StatusBody as unknown as Record<string, unknown>

/** Rows serialized between two looks at the loop's budget. */
export const ROWS_PER_TURN = 100

const ROWS = Type.Object({ rows: LayoutReport.properties.rows }, { additionalProperties: false }) as unknown as Record<
  string,
  unknown
>

/**
 * In UTF-8 slices joined once: a body of ten thousand rows made one string would be flattened and
 * encoded whole, in one stretch of the loop.
 */
export async function reportJson(reply: FastifyReply, report: LayoutReport): Promise<Buffer> {
  const hosts = Object.keys(report.rows)
  const head = reply.serializeInput({ ...report, rows: {}, leg: { ...report.leg, lastRun: null } }, STATUS_BODY)
  // The leg follows the rows, so the rows' place is cut first.
  const [beforeRows, afterRows] = around(head, '"rows":{}')
  const [beforeRun, afterRun] = around(afterRows, '"lastRun":null')
  const parts = [Buffer.from(`${beforeRows}"rows":{`)]
  for (let i = 0; i < hosts.length; i += ROWS_PER_TURN) {
    await defaultSlicer.pause()
    const part: LayoutReport['rows'] = {}
    for (const host of hosts.slice(i, i + ROWS_PER_TURN)) part[host] = report.rows[host] as RowReport
    // The entries alone: the slices joined make one object.
    const entries = reply.serializeInput({ rows: part }, ROWS).slice('{"rows":{'.length, -'}}'.length)
    parts.push(Buffer.from(i === 0 ? entries : `,${entries}`))
  }
  parts.push(Buffer.from(`}${beforeRun}"lastRun":`))
  if (report.leg.lastRun === null) parts.push(Buffer.from('null'))
  else for (const piece of await runPieces(reply, report.leg.lastRun)) parts.push(Buffer.from(piece))
  parts.push(Buffer.from(afterRun))
  await defaultSlicer.pause()
  return Buffer.concat(parts)
}

/** How long a body nobody asks for is kept (design §6.2): between converges a box's console is mostly closed. */
export const BODY_KEPT_UNREAD_MS = 30_000

/**
 * Serialized once per version and shared by its readers; a failed one is not kept, nor one unread for
 * BODY_KEPT_UNREAD_MS: the next reader serializes it again, in slices.
 */
export class StatusJson {
  readonly #soon: () => Promise<{ report: LayoutReport; tag: string }>
  #body: { tag: string; bytes: Promise<Buffer> } | undefined
  #readAt = 0
  #letGo: NodeJS.Timeout | undefined

  constructor(soon: () => Promise<{ report: LayoutReport; tag: string }>) {
    this.#soon = soon
  }

  /** Serialized by reply's app when none are kept for tag. */
  async bytes(reply: FastifyReply, tag: string): Promise<Buffer> {
    this.#read()
    if (this.#body?.tag === tag) return this.#body.bytes
    const built = await this.#soon()
    if (this.#body?.tag === built.tag) return this.#body.bytes
    const kept = { tag: built.tag, bytes: reportJson(reply, built.report) }
    this.#body = kept
    kept.bytes.catch(() => {
      if (this.#body === kept) this.#body = undefined
    })
    return kept.bytes
  }

  /** One timer at a time, put off while reads come. */
  #read(): void {
    this.#readAt = Date.now()
    if (this.#letGo !== undefined) return
    const check = (): void => {
      const unread = Date.now() - this.#readAt
      if (unread < BODY_KEPT_UNREAD_MS) {
        this.#letGo = setTimeout(check, BODY_KEPT_UNREAD_MS - unread).unref()
        return
      }
      this.#letGo = undefined
      this.#body = undefined
    }
    this.#letGo = setTimeout(check, BODY_KEPT_UNREAD_MS).unref()
  }
}

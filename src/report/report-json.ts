// The status report as JSON, serialized once per version (design §6.2), a
// slice of its rows per turn of the event loop, as run-json.ts does a run.
import type { FastifyReply } from 'fastify'
import { setImmediate as nextTurn } from 'node:timers/promises'
import { LayoutReport, LegState, type RowReport } from '../domain/schemas.js'
import { Type } from '../domain/typebox.js'
import { runJson, spliced } from './run-json.js'

export const StatusBody = Type.Object(
  { ...LayoutReport.properties, leg: LegState },
  { additionalProperties: false, description: 'The report, with its ETag.' },
)

const STATUS_BODY = StatusBody as unknown as Record<string, unknown>

/** Rows serialized in one turn of the loop. */
export const ROWS_PER_TURN = 500

const ROWS = Type.Object({ rows: LayoutReport.properties.rows }, { additionalProperties: false }) as unknown as Record<
  string,
  unknown
>

export async function reportJson(reply: FastifyReply, report: LayoutReport): Promise<string> {
  const hosts = Object.keys(report.rows)
  const slices: string[] = []
  for (let i = 0; i < hosts.length; i += ROWS_PER_TURN) {
    if (i > 0) await nextTurn()
    const part: LayoutReport['rows'] = {}
    for (const host of hosts.slice(i, i + ROWS_PER_TURN)) part[host] = report.rows[host] as RowReport
    // The entries alone: the slices joined make one object.
    slices.push(reply.serializeInput({ rows: part }, ROWS).slice('{"rows":{'.length, -'}}'.length))
  }
  const lastRun = report.leg.lastRun === null ? 'null' : await runJson(reply, report.leg.lastRun)
  const head = reply.serializeInput({ ...report, rows: {}, leg: { ...report.leg, lastRun: null } }, STATUS_BODY)
  // The leg follows the rows: spliced first, it cannot move their place.
  return spliced(spliced(head, '"lastRun":null', `"lastRun":${lastRun}`), '"rows":{}', `"rows":{${slices.join(',')}}`)
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
    const kept = { tag: built.tag, bytes: reportJson(reply, built.report).then((text) => Buffer.from(text)) }
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

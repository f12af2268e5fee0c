// The status report as JSON, serialized a slice of its rows per turn of
// the event loop (design §6.2). At 10,000 rows the report is some 600 KB,
// and its leg's last run 10,000 results more: serialized in one go it held
// the loop for about 30 ms a poll in a profiled converge with the console
// open. Each part goes through the schema's own serializer, so the bytes
// are the ones the schema would have made in one piece.
import type { FastifyReply } from 'fastify'
import { setImmediate as nextTurn } from 'node:timers/promises'
import type { TSchema } from 'typebox'
import { LayoutReport, LegState, type RowReport } from '../domain/schemas.js'
import { Type } from '../domain/typebox.js'
import { runJson, spliced } from './run-json.js'

/** The status route's 200: the report with its leg. */
export const StatusBody = Type.Object(
  { ...LayoutReport.properties, leg: LegState },
  { additionalProperties: false, description: 'The report, with its ETag.' },
)

/** Rows serialized in one turn of the loop. */
export const ROWS_PER_TURN = 500

const ROWS = Type.Object({ rows: LayoutReport.properties.rows }, { additionalProperties: false }) as unknown as Record<
  string,
  unknown
>

/** report's JSON by the schema body (the status route's 200), its rows a slice per turn. */
export async function reportJson(reply: FastifyReply, report: LayoutReport, body: TSchema): Promise<string> {
  const hosts = Object.keys(report.rows)
  const slices: string[] = []
  for (let i = 0; i < hosts.length; i += ROWS_PER_TURN) {
    if (i > 0) await nextTurn()
    const part: LayoutReport['rows'] = {}
    for (const host of hosts.slice(i, i + ROWS_PER_TURN)) part[host] = report.rows[host] as RowReport
    // `{"rows":{...}}` less all but the entries: the slices joined make one object.
    slices.push(reply.serializeInput({ rows: part }, ROWS).slice('{"rows":{'.length, -'}}'.length))
  }
  const lastRun = report.leg.lastRun === null ? 'null' : await runJson(reply, report.leg.lastRun)
  const head = reply.serializeInput(
    { ...report, rows: {}, leg: { ...report.leg, lastRun: null } },
    body as unknown as Record<string, unknown>,
  )
  // The leg comes after the rows: spliced first, its text cannot move the rows' place.
  return spliced(spliced(head, '"lastRun":null', `"lastRun":${lastRun}`), '"rows":{}', `"rows":{${slices.join(',')}}`)
}

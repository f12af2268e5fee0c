// A run of the leg as JSON for `converge?wait=1`, serialized a slice of its
// results per turn of the event loop. `converge?wait=1` answers with the run it waited for:
// after a converge of 10,000 hosts that is 10,000 results, twice (the run,
// and the leg's last run), and serialized in one go it held the loop for
// some 100 ms in a profiled run, in the turn the run ended (design §9, "A
// run's end"). Each slice goes through the schema's own serializer, so the
// bytes are the ones the schema would have made.
import type { FastifyReply } from 'fastify'
import { setImmediate as nextTurn } from 'node:timers/promises'
import { LegRun, LegState, ResultSchema } from '../domain/schemas.js'
import { Type } from '../domain/typebox.js'

/** Results serialized in one turn of the loop. */
export const RESULTS_PER_TURN = 500

// The schemas as serializeInput takes them, the same objects each time
// (Fastify keeps each compiled serializer by its schema object).
const LEG_STATE = LegState as unknown as Record<string, unknown>
const LEG_RUN = LegRun as unknown as Record<string, unknown>
const RESULTS = Type.Object(
  { results: Type.Array(ResultSchema) },
  { additionalProperties: false },
) as unknown as Record<string, unknown>

/**
 * Where a part serialized apart goes into its whole: the text the schema's
 * serializer makes for that property left empty. A key is never found
 * inside a string value, where every quote is escaped.
 */
export function spliced(whole: string, empty: string, part: string): string {
  const at = whole.lastIndexOf(empty)
  if (at < 0) throw new Error(`serialized run: ${empty} not found`)
  return whole.slice(0, at) + part + whole.slice(at + empty.length)
}

/** run's JSON, its results a slice per turn. */
export async function runJson(reply: FastifyReply, run: LegRun): Promise<string> {
  const slices: string[] = []
  for (let i = 0; i < run.results.length; i += RESULTS_PER_TURN) {
    if (i > 0) await nextTurn()
    // `{"results":[...]}` less all but the items: the slices joined make one array.
    const slice = reply.serializeInput({ results: run.results.slice(i, i + RESULTS_PER_TURN) }, RESULTS)
    slices.push(slice.slice('{"results":['.length, -']}'.length))
  }
  const head = reply.serializeInput({ ...run, results: [] }, LEG_RUN)
  return spliced(head, '"results":[]', `"results":[${slices.join(',')}]`)
}

/**
 * `{"leg": …, "run": …, "underWay"?: …}`, the answer of `converge?wait=1`:
 * the leg's last run is, once the run has ended, the very run waited for,
 * and is serialized once for both; underWay, when given, is the run that
 * was under way at the kick.
 */
export async function legAndRunJson(
  reply: FastifyReply,
  leg: LegState,
  run: LegRun,
  underWay: LegRun | null | undefined = undefined,
): Promise<string> {
  const ran = await runJson(reply, run)
  const last = leg.lastRun === null ? 'null' : leg.lastRun === run ? ran : await runJson(reply, leg.lastRun)
  const state = spliced(
    reply.serializeInput({ ...leg, lastRun: null }, LEG_STATE),
    '"lastRun":null',
    `"lastRun":${last}`,
  )
  const joined =
    underWay === undefined ? '' : `,"underWay":${underWay === null ? 'null' : await runJson(reply, underWay)}`
  return `{"leg":${state},"run":${ran}${joined}}`
}

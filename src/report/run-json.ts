// A run of the leg as JSON for `converge?wait=1`, serialized by the schema in
// slices of the loop's budget and written in chunks, so a large run never
// holds the loop.
import type { FastifyReply } from 'fastify'
import { Readable } from 'node:stream'
import { setImmediate as nextTurn } from 'node:timers/promises'
import { defaultSlicer } from '../domain/loop-turns.js'
import { LegRun, LegState, ResultSchema } from '../domain/schemas.js'
import { Type } from '../domain/typebox.js'

/** Results serialized between two looks at the loop's budget. */
export const RESULTS_PER_TURN = 100

/** About how many characters are written in one turn. */
export const WRITTEN_PER_TURN = 64 * 1024

// The same objects each time: Fastify keeps compiled serializers by schema object.
const LEG_STATE = LegState as unknown as Record<string, unknown>
const LEG_RUN = LegRun as unknown as Record<string, unknown>
const RESULTS = Type.Object(
  { results: Type.Array(ResultSchema) },
  { additionalProperties: false },
) as unknown as Record<string, unknown>

/** whole split around `empty`, a property's serialized empty value. */
export function around(whole: string, empty: string): [string, string] {
  const at = whole.lastIndexOf(empty)
  if (at < 0) throw new Error(`serialized body: ${empty} not found`)
  return [whole.slice(0, at), whole.slice(at + empty.length)]
}

/** In pieces, a slice of results per turn. */
export async function runPieces(reply: FastifyReply, run: LegRun): Promise<string[]> {
  const [before, after] = around(reply.serializeInput({ ...run, results: [] }, LEG_RUN), '"results":[]')
  const pieces = [`${before}"results":[`]
  for (let i = 0; i < run.results.length; i += RESULTS_PER_TURN) {
    if (i > 0) {
      pieces.push(',')
      await defaultSlicer.pause()
    }
    // The items alone: the slices joined make one array.
    const slice = reply.serializeInput({ results: run.results.slice(i, i + RESULTS_PER_TURN) }, RESULTS)
    pieces.push(slice.slice('{"results":['.length, -']}'.length))
  }
  pieces.push(`]${after}`)
  return pieces
}

/** `{"leg", "run", "underWay"?}` in pieces; the leg's last run is `run`, serialized once. */
export async function legAndRunPieces(
  reply: FastifyReply,
  leg: LegState,
  run: LegRun,
  underWay: LegRun | null | undefined = undefined,
): Promise<string[]> {
  const ran = await runPieces(reply, run)
  const last = leg.lastRun === null ? ['null'] : leg.lastRun === run ? ran : await runPieces(reply, leg.lastRun)
  const [before, after] = around(reply.serializeInput({ ...leg, lastRun: null }, LEG_STATE), '"lastRun":null')
  const pieces = [`{"leg":${before}"lastRun":`, ...last, `${after},"run":`, ...ran]
  if (underWay !== undefined)
    pieces.push(',"underWay":', ...(underWay === null ? ['null'] : await runPieces(reply, underWay)))
  pieces.push('}')
  return pieces
}

/** The loop is given back between chunks. */
export function inTurns(pieces: readonly string[]): Readable {
  async function* chunks(): AsyncGenerator<string> {
    let chunk = ''
    for (const piece of pieces) {
      chunk += piece
      if (chunk.length < WRITTEN_PER_TURN) continue
      yield chunk
      chunk = ''
      await nextTurn()
    }
    if (chunk !== '') yield chunk
  }
  return Readable.from(chunks(), { objectMode: false })
}

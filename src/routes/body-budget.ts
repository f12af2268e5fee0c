// The byte budget of request bodies still arriving, summed across
// connections (design §6), so unfinished bodies cannot grow memory without
// bound. A body past it gets 503 bodies_over_budget and its connection closes.
import { Transform, type Readable } from 'node:stream'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { errors } from '../errors.js'

/** The default budget: sixteen of the largest body (PUT /wakes, 1 MiB) at once. */
export const DEFAULT_BODY_BUDGET = 16 * 1024 * 1024

export class BodyBudget {
  #held = 0

  constructor(readonly limitBytes: number) {}

  /** The bytes the unfinished bodies hold now. */
  get held(): number {
    return this.#held
  }

  /** The request's body, counted against the budget until its answer is sent or its connection closes. */
  meter(reply: FastifyReply, payload: Readable): Readable {
    let mine = 0
    const release = (): void => {
      this.#held -= mine
      mine = 0
    }
    reply.raw.once('close', release)
    const meter = new Transform({
      transform: (chunk: Buffer, _enc, done) => {
        if (this.#held + chunk.length > this.limitBytes) {
          release()
          void reply.header('connection', 'close').header('retry-after', '1')
          done(errors.bodiesOverBudget(this.limitBytes))
          return
        }
        this.#held += chunk.length
        mine += chunk.length
        done(null, chunk)
      },
    })
    payload.on('error', (err) => meter.destroy(err))
    // The meter ends with the body; an error of it reaches the parser, which answers it.
    payload.pipe(meter)
    return meter
  }
}

/** Whether the request carries a body at all: the hot reads (no body) pass the meter untouched. */
export function hasBody(request: FastifyRequest): boolean {
  const h = request.headers
  return h['transfer-encoding'] !== undefined || (h['content-length'] !== undefined && h['content-length'] !== '0')
}

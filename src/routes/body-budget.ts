// The byte budget of request bodies still arriving, summed across connections
// (design §6), so unfinished bodies cannot grow memory without bound.
import { Transform, type Readable } from 'node:stream'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { errors } from '../errors.js'

/** Sixteen of the largest body (PUT /wakes) at once. */
export const DEFAULT_BODY_BUDGET = 16 * 1024 * 1024

export class BodyBudget {
  #held = 0

  constructor(readonly limitBytes: number) {}

  /** The bytes the unfinished bodies hold now. */
  get held(): number {
    return this.#held
  }

  /** Counted until the answer is sent or the connection closes. */
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
    // Its error reaches the parser, which answers it.
    payload.pipe(meter)
    return meter
  }
}

/** The hot reads carry no body and pass the meter untouched. */
export function hasBody(request: FastifyRequest): boolean {
  const h = request.headers
  return h['transfer-encoding'] !== undefined || (h['content-length'] !== undefined && h['content-length'] !== '0')
}

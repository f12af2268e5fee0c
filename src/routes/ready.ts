// `GET /ready` and `GET /ready/:host` (design §6): the activator's gate,
// which wakes nothing until `/ready` answers 200. The text form is Kubernetes' readyz.
import type { FastifyPluginCallbackTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply } from 'fastify'
import { Type } from '../domain/typebox.js'
import { type AgentApi, type GateAnswer, type Readiness, ReadyBody, WakeGrant, WakeRefusal } from '../agent-api.js'
import { durationMs } from '../domain/duration.js'
import { NOT_YET } from '../domain/gate-state.js'
import { errors } from '../errors.js'
import { commonErrors, errorEnvelope, parserErrors } from './error-envelope.js'
import { HostParams, hostTooLong, type TypeboxApp } from './wakes.js'

export interface ReadyRoutesOptions {
  api: AgentApi
}

// `verbose` is a flag by presence alone, as Kubernetes' `/readyz` reads it.
export const ReadyQuery = Type.Object({
  verbose: Type.Optional(
    Type.Union([Type.String(), Type.Array(Type.String())], {
      description:
        'Present (any value, any number of times): answer in text/plain, ' +
        'one `[+]name ok` or `[-]name failed: detail` line per check.',
    }),
  ),
})

function verboseText(r: Readiness): string {
  const lines = r.checks.map((c) => (c.ok ? `[+]${c.name} ok` : `[-]${c.name} failed: ${c.detail}`))
  // The gate's checks never fail readiness (flat wakes go on).
  for (const c of r.isolation ?? []) {
    lines.push(
      c.ok
        ? `[+]isolation/${c.name} ok (informational)`
        : `[-]isolation/${c.name} failed: ${c.detail} (informational: nested wakes and moves wait)`,
    )
  }
  lines.push(r.ready ? 'readyz check passed' : 'readyz check failed')
  return lines.join('\n') + '\n'
}

function readyResponse(description: string) {
  return {
    description,
    content: {
      'application/json': { schema: ReadyBody },
      'text/plain': {
        schema: Type.String({
          description: 'With `verbose`: one line per check, then `readyz check passed` or `readyz check failed`.',
        }),
      },
    },
  }
}

/** Its JSON answer is serialized once while readiness is unchanged. */
function readinessRoute(app: TypeboxApp, api: AgentApi): void {
  let answer: { readiness: Readiness; bytes: Buffer } | undefined
  app.get(
    '/ready',
    {
      schema: {
        operationId: 'getReadiness',
        summary: 'May the activator wake instances',
        description:
          '`200` once start-up recovery is done, else `503` with the phase; ' +
          'both carry every check and the isolation gate. ' +
          'The activator wakes nothing until this answers `200`.',
        tags: ['activator'],
        security: [],
        querystring: ReadyQuery,
        response: {
          200: readyResponse('Ready: the activator may wake instances.'),
          503: readyResponse(
            'Not ready: recovery has not finished, or the agent is stopping; `Retry-After` says when to ask again.',
          ),
          ...parserErrors,
          500: commonErrors[500],
        },
      },
    },
    (request, typed) => {
      // Untyped: the JSON answer goes out as bytes already serialized.
      const reply: FastifyReply = typed
      const r = api.readiness()
      void reply.code(r.ready ? 200 : 503).header('cache-control', 'no-store')
      if (!r.ready) void reply.header('retry-after', String(api.readyRetryAfter()))
      if (request.query.verbose !== undefined) {
        void reply.type('text/plain; charset=utf-8').send(verboseText(r))
        return
      }
      // The same object while unchanged; a Buffer bypasses the serializer.
      if (answer?.readiness !== r)
        answer = {
          readiness: r,
          bytes: Buffer.from(reply.serializeInput(r, r.ready ? '200' : '503', 'application/json') as string),
        }
      void reply.type('application/json; charset=utf-8').send(answer.bytes)
    },
  )
}

/** The shortest and the longest `wait` of `GET /ready/:host` (design §6.4). */
export const MIN_WAIT_MS = 500
export const MAX_WAIT_MS = 60_000

export const WakeCheckQuery = Type.Object({
  wait: Type.Optional(
    Type.String({
      description:
        'Hold the answer until the host is ready (or will never be), at most this long: ' +
        '`500ms` to `60s`, written as the configuration writes durations (`500ms`, `5s`, `1m`). ' +
        'A host still not ready then is answered `503` with `Retry-After`.',
    }),
  ),
})

/** The wait asked, in ms, by the configuration's duration rule. */
function waitMs(wait: string): number {
  const ms = durationMs(wait)
  const shown = `querystring/wait ${JSON.stringify(wait)}`
  if (ms === null) throw errors.badRequest(`${shown} is not a duration like 500ms, 5s or 1m`)
  if (ms < MIN_WAIT_MS) throw errors.badRequest(`${shown} is below the shortest wait, 500ms`)
  if (ms > MAX_WAIT_MS) throw errors.badRequest(`${shown} is above the longest wait, 60s`)
  return ms
}

/** `200` granted; `503` not judged yet or a wait ended not ready; `409` refused. */
function wakeCheckStatus(g: GateAnswer, waited: boolean): number {
  if (g.answer.granted) return 200
  if (g.state === 'starting' || g.state === 'stopping') return 503
  return waited && NOT_YET.has(g.state) ? 503 : 409
}

/** What a claim would get now, claiming nothing; with `wait`, once it is ready. */
function wakeCheckRoute(app: TypeboxApp, api: AgentApi, closing: AbortSignal): void {
  app.get(
    '/ready/:host',
    {
      schema: {
        operationId: 'checkWake',
        summary: 'May this host wake now, and where',
        description:
          'What `POST /wakes/:host` would answer now, without claiming anything: ' +
          '`200` with the paths the instance would wake at, ' +
          'or `409` with the reason it would be refused and its code. ' +
          'While start-up recovery runs (or the agent stops) `503 not_ready`. ' +
          'Every answer for a host that will pass on its own (starting, fenced for its move, the isolation gate ' +
          'shut) carries `Retry-After`, in seconds. With `wait`, the answer is held until the host is ready.',
        tags: ['activator'],
        security: [],
        params: HostParams,
        querystring: WakeCheckQuery,
        response: {
          200: WakeGrant,
          409: WakeRefusal,
          ...commonErrors,
          400: errorEnvelope(
            'The hostname is not a valid DNS name (`invalid_host`), `wait` is not a duration of 500ms to 60s, ' +
              'or the request is otherwise malformed.',
          ),
          414: hostTooLong,
          503: Type.Union([WakeRefusal, errorEnvelope('Too many waits are open (`too_many_waiters`).')], {
            description:
              'Not yet: the agent is starting or stopping (`not_ready`), a `wait` ended with the host still not ' +
              'ready, or too many waits are open (`too_many_waiters`); `Retry-After` says when to ask again.',
          }),
        },
      },
    },
    async (request, reply) => {
      const { host } = request.params
      // A bad wait is refused before anything is asked.
      const ms = request.query.wait === undefined ? undefined : waitMs(request.query.wait)
      void reply.header('cache-control', 'no-store')
      let g = await api.gate(host)
      if (ms !== undefined && NOT_YET.has(g.state)) {
        // A wait outlives the socket's idle timeout.
        const socket = request.raw.socket
        if (typeof socket.setTimeout === 'function') socket.setTimeout(ms + 5000)
        const left = new AbortController()
        reply.raw.once('close', () => left.abort())
        g = await api.waitGate(host, ms, AbortSignal.any([left.signal, closing]))
      }
      if (g.retryAfter !== null) void reply.header('retry-after', String(g.retryAfter))
      const status = wakeCheckStatus(g, ms !== undefined)
      return g.answer.granted ? reply.code(status).send(g.answer.grant) : reply.code(status).send(g.answer.refusal)
    },
  )
}

export const readyRoutes: FastifyPluginCallbackTypebox<ReadyRoutesOptions> = (app, { api }, done) => {
  // Waits end when the app closes: a held request must not hold the shutdown.
  const closing = new AbortController()
  app.addHook('preClose', (hookDone) => {
    closing.abort()
    hookDone()
  })
  readinessRoute(app, api)
  wakeCheckRoute(app, api, closing.signal)
  done()
}

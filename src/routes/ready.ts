// `GET /ready` and `GET /ready/:host` (design §6): the activator's gate,
// which wakes nothing until `/ready` answers 200. The plain text form is the
// Kubernetes readyz one, for a person at a terminal.
import type { FastifyPluginCallbackTypebox } from '@fastify/type-provider-typebox'
import type { FastifyReply } from 'fastify'
import { Type } from '../domain/typebox.js'
import { type AgentApi, type Readiness, ReadyBody, WakeGrant, WakeRefusal } from '../agent-api.js'
import { commonErrors, errorEnvelope, parserErrors } from './error-envelope.js'
import { HostParams, hostTooLong, type TypeboxApp } from './wakes.js'

export interface ReadyRoutesOptions {
  api: AgentApi
}

export const ReadyQuery = Type.Object({
  verbose: Type.Optional(
    Type.String({
      description:
        'Present (any value): answer in text/plain, one `[+]name ok` or `[-]name failed: detail` line per check.',
    }),
  ),
})

function verboseText(r: Readiness): string {
  const lines = r.checks.map((c) => (c.ok ? `[+]${c.name} ok` : `[-]${c.name} failed: ${c.detail}`))
  // The gate's checks are for a person reading why nested instances do not
  // wake: they never fail readiness (flat wakes go on), so they are marked
  // as information rather than as checks of their own.
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

/** `GET /ready`: the activator's gate, its JSON answer serialized once for as long as readiness is unchanged. */
function readinessRoute(app: TypeboxApp, api: AgentApi): void {
  /** The last readiness answered, with its serialized bytes. */
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
          503: readyResponse('Not ready: recovery has not finished, or the agent is stopping.'),
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
      if (request.query.verbose !== undefined) {
        void reply.type('text/plain; charset=utf-8').send(verboseText(r))
        return
      }
      // The agent answers the same object while readiness is unchanged: it
      // is serialized once, by this route's schema, and its bytes reused
      // (a JSON content type with a Buffer bypasses the serializer).
      if (answer?.readiness !== r)
        answer = {
          readiness: r,
          bytes: Buffer.from(reply.serializeInput(r, r.ready ? '200' : '503', 'application/json') as string),
        }
      void reply.type('application/json; charset=utf-8').send(answer.bytes)
    },
  )
}

/** `GET /ready/:host`: what a claim would get now, claiming nothing. */
function wakeCheckRoute(app: TypeboxApp, api: AgentApi): void {
  app.get(
    '/ready/:host',
    {
      schema: {
        operationId: 'checkWake',
        summary: 'May this host wake now, and where',
        description:
          'What `POST /wakes/:host` would answer now, without claiming anything: ' +
          '`200` with the paths the instance would wake at, ' +
          'or `409` with the reason it would be refused and its code.',
        tags: ['activator'],
        security: [],
        params: HostParams,
        response: {
          200: WakeGrant,
          409: WakeRefusal,
          ...commonErrors,
          400: errorEnvelope(
            'The hostname is not a valid DNS name (`invalid_host`), or the request is otherwise malformed.',
          ),
          414: hostTooLong,
        },
      },
    },
    async (request, reply) => {
      const answer = api.readyFor(request.params.host)
      void reply.header('cache-control', 'no-store')
      if (answer.granted) return reply.code(200).send(answer.grant)
      return reply.code(409).send(answer.refusal)
    },
  )
}

export const readyRoutes: FastifyPluginCallbackTypebox<ReadyRoutesOptions> = (app, { api }, done) => {
  readinessRoute(app, api)
  wakeCheckRoute(app, api)
  done()
}

// The activator's gate: it wakes nothing until this answers 200. The plain
// text form is the Kubernetes readyz one, for a person at a terminal.
import type { FastifyPluginCallbackTypebox } from '@fastify/type-provider-typebox'
import Type, { type Static } from 'typebox'
import { type AgentApi, type Readiness, WakeGrant, WakeRefusal } from '../agent-api.js'
import { commonErrors, errorEnvelope } from './error-envelope.js'
import { HostParams } from './wakes.js'

export interface ReadyRoutesOptions {
  api: AgentApi
}

export const ReadyBody = Type.Object(
  {
    ready: Type.Boolean({ description: 'Start-up recovery is done and the activator may wake instances.' }),
    phase: Type.Union([Type.Literal('starting'), Type.Literal('recovering'), Type.Literal('ready'), Type.Literal('stopping')], {
      description: 'Where the agent is in its life: starting, recovering, ready or stopping.',
    }),
    checks: Type.Array(
      Type.Object(
        {
          name: Type.String({ description: 'What was checked.' }),
          ok: Type.Boolean({ description: 'Whether it passed.' }),
          detail: Type.String({ description: 'Why it failed; empty when it passed.' }),
        },
        { additionalProperties: false },
      ),
      { description: 'Every readiness check, in order.' },
    ),
    nested: Type.Object(
      {
        allowed: Type.Boolean({ description: 'The isolation gate lets nested instances wake.' }),
        reason: Type.String({ description: 'Why nested instances may not wake; empty when they may.' }),
      },
      { additionalProperties: false, description: 'The isolation gate, as a wake would see it.' },
    ),
    isolation: Type.Optional(
      Type.Array(
        Type.Object(
          {
            name: Type.String({ description: '`selfcheck`, `mounts` or `probe`.' }),
            ok: Type.Boolean({ description: 'Whether it passed.' }),
            detail: Type.String({ description: 'What it found; `not yet run` before its first evaluation.' }),
          },
          { additionalProperties: false },
        ),
        {
          description:
            "The isolation gate's checks, in order; the first that failed is the gate's reason. They decide whether nested instances wake, " +
            'never whether the agent is ready. Absent where no activator is armed.',
        },
      ),
    ),
  },
  { additionalProperties: false },
)

// agent-api.ts writes Readiness by hand; this fails the build the day it
// and the schema part ways.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false
const readinessMatchesSchema: Same<Static<typeof ReadyBody>, Readiness> = true
void readinessMatchesSchema

const ReadyQuery = Type.Object({
  verbose: Type.Optional(Type.String({ description: 'Present (any value): answer in text/plain, one `[+]name ok` or `[-]name failed: detail` line per check.' })),
})

function verboseText(r: Readiness): string {
  const lines = r.checks.map((c) => (c.ok ? `[+]${c.name} ok` : `[-]${c.name} failed: ${c.detail}`))
  // The gate's checks are for a person reading why nested instances do not
  // wake: they never fail readiness (flat wakes go on), so they are marked
  // as information rather than as checks of their own.
  for (const c of r.isolation ?? []) {
    lines.push(c.ok ? `[+]isolation/${c.name} ok (informational)` : `[-]isolation/${c.name} failed: ${c.detail} (informational: nested wakes and moves wait)`)
  }
  lines.push(r.ready ? 'readyz check passed' : 'readyz check failed')
  return lines.join('\n') + '\n'
}

function readyResponse(description: string) {
  return {
    description,
    content: {
      'application/json': { schema: { ...ReadyBody, description } },
      'text/plain': { schema: Type.String({ description: 'With `verbose`: one line per check, then `readyz check passed` or `readyz check failed`.' }) },
    },
  }
}

export const readyRoutes: FastifyPluginCallbackTypebox<ReadyRoutesOptions> = (app, { api }, done) => {
  app.get(
    '/ready',
    {
      schema: {
        summary: 'May the activator wake instances',
        description:
          '`200` once start-up recovery is done, else `503` with the phase; both carry every check and the isolation gate. ' +
          'The activator wakes nothing until this answers `200`.',
        tags: ['activator'],
        querystring: ReadyQuery,
        response: {
          200: readyResponse('Ready: the activator may wake instances.'),
          503: readyResponse('Not ready: recovery has not finished, or the agent is stopping.'),
          500: commonErrors[500],
        },
      },
    },
    (request, reply) => {
      const r = api.readiness()
      void reply.code(r.ready ? 200 : 503).header('cache-control', 'no-store')
      if (request.query.verbose === undefined) return r
      void reply.type('text/plain; charset=utf-8')
      return verboseText(r)
    },
  )

  app.get(
    '/ready/:host',
    {
      schema: {
        summary: 'May this host wake now, and where',
        description:
          'What `POST /wakes/:host` would answer now, without claiming anything: `200` with the paths the instance would wake at, ' +
          'or `409` with the reason it would be refused.',
        tags: ['activator'],
        params: HostParams,
        response: {
          200: WakeGrant,
          409: WakeRefusal,
          ...commonErrors,
          400: errorEnvelope('The hostname is not a valid DNS name (`invalid_host`), or the request is otherwise malformed.'),
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
  done()
}

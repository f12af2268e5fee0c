// Which agent answers (`GET /agent`): its data root, pid and start id, as
// `D/agent.json` says; the CLI refuses an agent of another data root
// (design §8 "Which agent").
import type { FastifyPluginCallbackTypebox } from '@fastify/type-provider-typebox'
import { Type } from '../domain/typebox.js'
import type { Static } from 'typebox'
import { errors } from '../errors.js'
import { privateReadRefusal } from './auth.js'
import { commonErrors, errorEnvelope, parserErrors } from './error-envelope.js'

export const AgentIdentity = Type.Object(
  {
    dataDir: Type.String({ description: 'The data root this agent holds (`CARLOS_DATA_DIR`), its symlinks resolved.' }),
    pid: Type.Integer({ description: "The agent's process id." }),
    startId: Type.String({ description: 'This start of the agent, unique across restarts (a pid is reused).' }),
    startedAt: Type.String({ format: 'date-time', description: 'When this start took the data root.' }),
  },
  { title: 'AgentIdentity', additionalProperties: false, description: 'Who answers: the agent of one data root.' },
)

export type AgentIdentity = Static<typeof AgentIdentity>

export interface AgentIdentityOptions {
  /** Absent where no agent holds a data root (a schema-only app, a test's fake). */
  identity: AgentIdentity | undefined
  token: string
}

export const agentIdentityRoutes: FastifyPluginCallbackTypebox<AgentIdentityOptions> = (
  app,
  { identity, token },
  done,
) => {
  app.get(
    '/agent',
    {
      schema: {
        operationId: 'getAgentIdentity',
        summary: 'Which agent answers, and which data root it holds',
        description:
          'What `D/agent.json` says of this agent. The CLI asks it first and refuses an agent of another data root. ' +
          'Loopback peers may ask; others need the token: the answer names a path on the box.',
        tags: ['health'],
        // Either: anonymous (a loopback peer), or the bearer token.
        security: [{}, { bearer: [] }],
        response: {
          200: AgentIdentity,
          401: errorEnvelope('A token is configured and a peer beyond loopback did not send it.'),
          403: errorEnvelope('No token is configured, so loopback peers only.'),
          404: errorEnvelope('No agent holds a data root here (`not_found`).'),
          ...parserErrors,
          500: commonErrors[500],
        },
      },
    },
    (request, reply) => {
      const refused = privateReadRefusal(request, reply, token)
      if (refused !== undefined) throw refused
      if (identity === undefined) throw errors.notFound('this app holds no data root')
      void reply.header('cache-control', 'no-store')
      return identity
    },
  )
  done()
}

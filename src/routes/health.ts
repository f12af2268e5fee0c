// `GET /livez`, liveness for the supervisor: answers while the process
// serves, whatever the agent's phase, so a long recovery is never mistaken
// for a hang.
import type { FastifyPluginCallbackTypebox } from '@fastify/type-provider-typebox'
import { Type } from '../domain/typebox.js'
import { commonErrors, parserErrors } from './error-envelope.js'

export const healthRoutes: FastifyPluginCallbackTypebox = (app, _opts, done) => {
  app.get(
    '/livez',
    {
      schema: {
        operationId: 'getLiveness',
        summary: 'Is the process alive',
        description: '`200` while the process serves HTTP, from its first moment; readiness is `GET /ready`.',
        tags: ['health'],
        security: [],
        response: {
          200: Type.Object(
            { status: Type.Literal('ok', { description: 'Always `ok`.' }) },
            { additionalProperties: false, description: 'The process serves.' },
          ),
          ...parserErrors,
          500: commonErrors[500],
        },
      },
    },
    () => ({ status: 'ok' as const }),
  )
  done()
}

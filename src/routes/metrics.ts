// `GET /metrics`, the Prometheus scrape endpoint (design §9): the agent's
// own registry, never the process-global one.
import type { FastifyPluginCallbackTypebox } from '@fastify/type-provider-typebox'
import { Type } from '../domain/typebox.js'
import type { Metrics } from '../metrics/metrics.js'
import { commonErrors, parserErrors } from './error-envelope.js'

export interface MetricsRoutesOptions {
  metrics: Metrics
}

export const metricsRoutes: FastifyPluginCallbackTypebox<MetricsRoutesOptions> = (app, { metrics }, done) => {
  app.get(
    '/metrics',
    {
      schema: {
        operationId: 'getMetrics',
        summary: 'Prometheus metrics',
        description:
          'The `carlos_layout_*` metrics, the process metrics and the HTTP request histogram, ' +
          'in the Prometheus text format.',
        tags: ['health'],
        security: [],
        response: {
          200: {
            description: 'The exposition text.',
            content: {
              'text/plain': { schema: Type.String({ description: 'Prometheus text exposition format 0.0.4.' }) },
            },
          },
          ...parserErrors,
          500: commonErrors[500],
        },
      },
    },
    async (_request, reply) => reply.type(metrics.contentType).send(await metrics.text()),
  )
  done()
}

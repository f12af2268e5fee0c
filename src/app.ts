// The HTTP API as a Fastify instance, built around what it needs and never
// listening: main.ts listens, tests inject, openapi.ts reads the schemas.
import Fastify, { LogController, type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify'
import swagger, { type FastifyDynamicSwaggerOptions } from '@fastify/swagger'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { IncomingMessage, Server, ServerResponse } from 'node:http'
import type { AgentApi } from './agent-api.js'
import { AppError } from './errors.js'
import type { AppLogger } from './logger.js'
import { UNMATCHED_ROUTE, type Metrics } from './metrics.js'
import { authHook } from './routes/auth.js'
import { envelope, type ErrorEnvelope } from './routes/error-envelope.js'
import { healthRoutes } from './routes/health.js'
import { layoutRoutes } from './routes/layout.js'
import { metricsRoutes } from './routes/metrics.js'
import { readyRoutes } from './routes/ready.js'
import { wakesRoutes } from './routes/wakes.js'

export type App = FastifyInstance<Server, IncomingMessage, ServerResponse, AppLogger, TypeBoxTypeProvider>

export interface AppDeps {
  api: AgentApi
  metrics: Metrics
  logger: AppLogger
  /** CARLOS_AGENT_TOKEN; empty: mutations from loopback peers only. */
  token: string
  /** Largest request body accepted, in bytes; default 64 KiB. */
  bodyLimit?: number
  /** Server timeouts in ms; the defaults suit production, tests shorten them. */
  timeouts?: Partial<Timeouts>
  /** Registered before the routes, so it sees each of them (openapi.ts: the document). */
  swagger?: FastifyDynamicSwaggerOptions
}

export interface Timeouts {
  /** A socket silent this long is closed (a converge wait extends it for its request). */
  connectionMs: number
  /** The whole request must have arrived within this. */
  requestMs: number
  /** An idle keep-alive connection is closed after this. */
  keepAliveMs: number
}

// Every body the API takes is a small JSON object; anything near this is a
// mistake or an attack.
const DEFAULT_BODY_LIMIT = 64 * 1024

const DEFAULT_TIMEOUTS: Timeouts = { connectionMs: 30_000, requestMs: 30_000, keepAliveMs: 5_000 }

// Fastify's own client errors, answered with a code of the catalogue's kind
// instead of Fastify's FST_* names, and a message that says what to change.
const FRAMEWORK_ERRORS: Record<string, { code: string; message: (request: FastifyRequest) => string }> = {
  FST_ERR_CTP_BODY_TOO_LARGE: {
    code: 'payload_too_large',
    message: (r) => `the request body is larger than the limit of ${r.routeOptions.bodyLimit} bytes`,
  },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: {
    code: 'unsupported_media_type',
    message: (r) => `content type ${JSON.stringify(r.headers['content-type'] ?? '')} is not accepted; send application/json`,
  },
  FST_ERR_CTP_INVALID_JSON_BODY: { code: 'bad_request', message: () => 'the request body is not valid JSON' },
  FST_ERR_CTP_EMPTY_JSON_BODY: { code: 'bad_request', message: () => 'the request body is empty but its content type is application/json' },
}

interface Answer {
  status: number
  body: ErrorEnvelope
}

function answerFor(err: FastifyError | null | undefined, request: FastifyRequest): Answer {
  // Anything can be thrown; only what is recognised below is ever shown.
  if (typeof err !== 'object' || err === null) return { status: 500, body: envelope('internal', 'internal error') }
  if (err instanceof AppError) {
    // The catalogue's 500 carries no detail; its other codes are written to be read.
    const message = err.statusCode === 500 ? 'internal error' : err.message
    return { status: err.statusCode, body: envelope(err.code, message) }
  }
  if (err.validation !== undefined) {
    // Fastify's message names the part and the field: `querystring/timeout must be <= 600`.
    return { status: 400, body: envelope('bad_request', err.message) }
  }
  const status = err.statusCode
  if (typeof err.code === 'string' && err.code.startsWith('FST_') && status !== undefined && status >= 400 && status < 500) {
    const known = FRAMEWORK_ERRORS[err.code]
    if (known !== undefined) return { status, body: envelope(known.code, known.message(request)) }
    return { status, body: envelope(status === 400 ? 'bad_request' : 'client_error', err.message) }
  }
  return { status: 500, body: envelope('internal', 'internal error') }
}

// The path without its query: a query string may carry anything, and a
// message echoes only what names the resource.
function pathOf(url: string): string {
  const path = url.split('?', 1)[0] ?? url
  return path.length > 200 ? `${path.slice(0, 200)}…` : path
}

export async function buildApp(deps: AppDeps): Promise<App> {
  const timeouts = { ...DEFAULT_TIMEOUTS, ...deps.timeouts }
  const app = Fastify({
    loggerInstance: deps.logger,
    // The activator polls /ready and Prometheus scrapes /metrics: a line per
    // request would drown the layout lines. Errors are still logged, and
    // the HTTP histogram counts every request.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: deps.bodyLimit ?? DEFAULT_BODY_LIMIT,
    connectionTimeout: timeouts.connectionMs,
    requestTimeout: timeouts.requestMs,
    keepAliveTimeout: timeouts.keepAliveMs,
    // TypeBox schemas are exact: a field the schema does not name is refused
    // or kept, never silently dropped before the handler sees it.
    ajv: { customOptions: { removeAdditional: false } },
    // A URL Fastify cannot even route (bad percent-encoding) still gets the envelope.
    frameworkErrors: (err, _request, reply: FastifyReply) => {
      const status = err.statusCode ?? 400
      void reply.code(status).send(envelope(status === 400 ? 'bad_request' : 'client_error', err.message))
    },
  }).withTypeProvider<TypeBoxTypeProvider>()

  app.setErrorHandler((err: FastifyError | null | undefined, request, reply) => {
    const { status, body } = answerFor(err, request)
    if (status >= 500) {
      // The client learns only the code; the log keeps what happened and to which request.
      request.log.error({ err, method: request.method, route: request.routeOptions.url, url: pathOf(request.url), status }, 'request failed')
    } else {
      request.log.info({ code: body.error.code, status, reason: body.error.message }, 'request refused')
    }
    return reply.code(status).send(body)
  })

  app.setNotFoundHandler((request, reply) =>
    reply.code(404).send(envelope('not_found', `no route for ${request.method} ${pathOf(request.url)}`)),
  )

  app.addHook('onRequest', authHook(deps.token))

  app.addHook('onResponse', (request, reply, done) => {
    const route = request.is404 ? UNMATCHED_ROUTE : (request.routeOptions.url ?? UNMATCHED_ROUTE)
    deps.metrics.observeHttp(request.method, route, reply.statusCode, reply.elapsedTime / 1000)
    done()
  })

  if (deps.swagger !== undefined) await app.register(swagger, deps.swagger)

  await app.register(healthRoutes)
  await app.register(readyRoutes, { api: deps.api })
  await app.register(layoutRoutes, { api: deps.api })
  await app.register(wakesRoutes, { api: deps.api })
  await app.register(metricsRoutes, { metrics: deps.metrics })

  return app
}

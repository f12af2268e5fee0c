// The HTTP API as a Fastify instance that never listens: server.ts listens,
// tests inject, openapi.ts reads the schemas.
import Fastify, {
  LogController,
  type ConnectionError,
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type HookHandlerDoneFunction,
} from 'fastify'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { IncomingMessage, Server, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import type { DeployStore } from './domain/ports.js'
import { MAX_HOST_TEXT, type AgentApi } from './agent-api.js'
import { BodyBudget, DEFAULT_BODY_BUDGET, hasBody } from './routes/body-budget.js'
import { AppError, errors, httpStatusOf } from './errors.js'
import { requestLogger, type AppLogger } from './logger.js'
import { UNMATCHED_ROUTE, type Metrics } from './metrics/metrics.js'
import { lazyCompilers } from './routes/lazy-compilers.js'
import { agentIdentityRoutes, type AgentIdentity } from './routes/agent-identity.js'
import { authHook } from './routes/auth.js'
import { consoleRoutes } from './routes/console.js'
import { fleetPageRoutes } from './routes/fleet-page.js'
import { envelope, type ErrorEnvelope } from './routes/error-envelope.js'
import { healthRoutes } from './routes/health.js'
import { layoutRoutes } from './routes/layout.js'
import { metricsRoutes } from './routes/metrics.js'
import { openApiOptions, openApiRoutes } from './routes/openapi.js'
import { answerUnroutable, gateRoutes } from './routes/gate.js'
import { readyRoutes } from './routes/ready.js'
import { wakesRoutes } from './routes/wakes.js'

// node:http's CommonJS exports, not an ES import: that reads every export, the lazy WebSocket
// among them, and so loads node's own fetch and WebSocket client, which the agent never uses.
const { STATUS_CODES } = process.getBuiltinModule('node:http')

export type App = FastifyInstance<Server, IncomingMessage, ServerResponse, AppLogger, TypeBoxTypeProvider>

export interface AppDeps {
  api: AgentApi
  metrics: Metrics
  logger: AppLogger
  /** Every mutation needs it; empty: none is taken. */
  token: string
  /** For `GET /agent`. */
  identity?: AgentIdentity
  /** Largest request body, in bytes. */
  bodyLimit?: number
  timeouts?: Partial<Timeouts>
  /** For `GET /fleet`; absent, that page answers 404. */
  store?: DeployStore
  /** What the bodies still arriving may hold in all, in bytes. */
  bodyBudget?: number
  /**
   * The OpenAPI document, asked on the first `GET /openapi.json`: given it, the app registers no
   * @fastify/swagger, whose modules (yaml's among them) a start would load for a route seldom asked.
   * Without it the app documents itself (openapi.ts builds the document so; tests).
   */
  document?: () => Promise<unknown>
}

export interface Timeouts {
  /** A socket silent this long is closed; a converge wait extends it. */
  connectionMs: number
  /** For the whole request: a total, not an idle time. */
  requestMs: number
  /** For an idle keep-alive connection. */
  keepAliveMs: number
}

// Every body the API takes is a small JSON object.
const DEFAULT_BODY_LIMIT = 64 * 1024

/** Past 253-byte hosts, so a long name reaches its route's own refusal. */
const MAX_PARAM_LENGTH = MAX_HOST_TEXT

/** An abandoned request's status (nginx's "client closed request"). */
export const CLIENT_CLOSED_STATUS = 499

export const DEFAULT_TIMEOUTS: Timeouts = { connectionMs: 30_000, requestMs: 30_000, keepAliveMs: 5_000 }

// Fastify's client errors, by the catalogue's codes.
const FRAMEWORK_ERRORS: Record<string, (request: FastifyRequest) => AppError> = {
  FST_ERR_CTP_BODY_TOO_LARGE: (r) => errors.payloadTooLarge(r.routeOptions.bodyLimit),
  FST_ERR_CTP_INVALID_MEDIA_TYPE: (r) => errors.unsupportedMediaType(r.headers['content-type'] ?? ''),
  FST_ERR_CTP_INVALID_JSON_BODY: () => errors.invalidJson(),
  FST_ERR_CTP_EMPTY_JSON_BODY: () => errors.emptyJson(),
  FST_ERR_MAX_PARAM_LENGTH: () => errors.uriTooLong(MAX_PARAM_LENGTH),
}

/** The router's refusals of a URL itself. */
const URL_ERRORS = { FST_ERR_MAX_PARAM_LENGTH: true, FST_ERR_BAD_URL: true } as const

/** The client left mid-body; a route's own reset still logs as a failure. */
function abandoned(err: FastifyError | null | undefined, request: FastifyRequest): boolean {
  const reading = err?.code === 'ECONNRESET' || err?.code === 'ERR_STREAM_PREMATURE_CLOSE'
  return reading && (request.raw.aborted || request.raw.socket.destroyed)
}

/** Node's parser refusals get the envelope on the raw socket; a reset socket is left alone. */
function answerMalformed(this: FastifyInstance, err: ConnectionError, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return
  const known =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? errors.headersTooLarge()
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? errors.requestTimeout()
        : errors.malformedRequest()
  this.log.debug({ code: known.code, parser: err.code }, 'request refused by the HTTP parser')
  const body = JSON.stringify(envelope(known.code, known.message))
  if (socket.writable) {
    const head =
      `HTTP/1.1 ${known.statusCode} ${STATUS_CODES[known.statusCode] ?? ''}\r\n` +
      `Connection: close\r\nContent-Type: application/json; charset=utf-8`
    socket.write(`${head}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`)
  }
  socket.destroy()
}

interface Answer {
  status: number
  body: ErrorEnvelope
}

/** The catalogue's error for anything thrown: only what is recognised is shown. */
function catalogued(err: FastifyError | null | undefined, request: FastifyRequest): AppError {
  if (err instanceof AppError) return err
  if (typeof err !== 'object' || err === null) return errors.internal()
  // It names the part and field: `querystring/timeout must be <= 600`.
  if (err.validation !== undefined) return errors.badRequest(err.message)
  const status = err.statusCode
  if (
    typeof err.code === 'string' &&
    err.code.startsWith('FST_') &&
    status !== undefined &&
    status >= 400 &&
    status < 500
  ) {
    return FRAMEWORK_ERRORS[err.code]?.(request) ?? errors.clientError(status, err.message)
  }
  return errors.internal()
}

function answerFor(err: FastifyError | null | undefined, request: FastifyRequest): Answer {
  const known = catalogued(err, request)
  const status = httpStatusOf(known)
  return { status, body: envelope(known.code, status === 500 ? 'internal error' : known.message) }
}

// A message echoes only the path, which names the resource.
function pathOf(url: string): string {
  const path = url.split('?', 1)[0] ?? url
  return path.length > 200 ? `${path.slice(0, 200)}…` : path
}

/**
 * What the activator asks, then what a console, a converge and a scrape ask: compiled by warmHotRoutes, not
 * on a first request, which in a converge would hold the activator's answers behind a compile.
 */
const HOT_ROUTES: ReadonlySet<string> = new Set([
  '/ready',
  '/ready/:host',
  '/wakes/:host',
  '/gate',
  '/gate/:host',
  '/',
  '/layout/status',
  '/layout/converge',
  '/metrics',
])

declare module 'fastify' {
  interface FastifyInstance {
    /** Compiles the hot routes' schemas a turn each; answers how many. */
    warmHotRoutes(): Promise<number>
  }
}

/** Answered in the tick they are read, so no abort hook; `/ready/:host?wait=` ends its wait on close itself. */
const ANSWERED_AT_ONCE = new Set(['/ready', '/ready/:host', '/layout/status', '/livez', '/gate', '/gate/:host'])

const STARTED = Symbol('started')
const COUNTED = Symbol('counted')

interface Timed {
  [STARTED]?: number
  [COUNTED]?: boolean
}

/** Ajv's options for the request schemas (why: in buildApp). */
export const AJV_OPTIONS = { removeAdditional: false, coerceTypes: false, validateSchema: false } as const

export async function buildApp(deps: AppDeps): Promise<App> {
  const timeouts = { ...DEFAULT_TIMEOUTS, ...deps.timeouts }
  const compilers = lazyCompilers()
  const app = Fastify({
    loggerInstance: deps.logger,
    // A line per poll of /ready would drown the layout lines.
    logController: new LogController({ disableRequestLogging: true }),
    // A request's child logger is made only when it logs.
    childLoggerFactory: (parent, bindings, opts) => requestLogger(parent as AppLogger, bindings, opts),
    bodyLimit: deps.bodyLimit ?? DEFAULT_BODY_LIMIT,
    connectionTimeout: timeouts.connectionMs,
    requestTimeout: timeouts.requestMs,
    keepAliveTimeout: timeouts.keepAliveMs,
    // While closing, answer as the agent stands: no 503 without Retry-After.
    return503OnClosing: false,
    // Node enforces requestTimeout only when it checks connections, and Fastify sets it too late (design §6).
    http: {
      requestTimeout: timeouts.requestMs,
      headersTimeout: timeouts.requestMs,
      connectionsCheckingInterval: Math.max(10, Math.min(1000, Math.floor(timeouts.requestMs / 10))),
    },
    // Exact: `{"awake": "x"}` is refused, not read as a set releasing every other claim (design §6).
    // No meta-schema check: it delays the first /ready; test/app/route-schemas.test.ts checks them.
    ajv: { customOptions: AJV_OPTIONS },
    // Compiled on first request, not before listening (design §4.4).
    schemaController: { compilersFactory: compilers.factory },
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    // An unroutable URL still gets the envelope.
    frameworkErrors: (err, request, reply: FastifyReply) => {
      // The gate answers as the gate (design §6.4).
      if (err.code in URL_ERRORS && answerUnroutable(request.method, request.url, reply)) return
      const known = FRAMEWORK_ERRORS[err.code]?.(request) ?? errors.clientError(err.statusCode ?? 400, err.message)
      void reply.code(known.statusCode).send(envelope(known.code, known.message))
    },
    clientErrorHandler: answerMalformed,
  }).withTypeProvider<TypeBoxTypeProvider>()

  app.decorate('warmHotRoutes', () => compilers.warm(HOT_ROUTES))

  answerErrors(app, deps.api)

  hookRequests(app, deps)

  // Before the routes, so the document sees them.
  if (deps.document === undefined) {
    const { default: swagger } = await import('@fastify/swagger')
    await app.register(swagger, await openApiOptions())
  }

  await app.register(healthRoutes)
  await app.register(agentIdentityRoutes, { identity: deps.identity, token: deps.token })
  await app.register(readyRoutes, { api: deps.api })
  await app.register(gateRoutes, { api: deps.api })
  await app.register(layoutRoutes, { api: deps.api })
  await app.register(wakesRoutes, { api: deps.api })
  await app.register(metricsRoutes, { metrics: deps.metrics })
  await app.register(consoleRoutes, { api: deps.api })
  await app.register(fleetPageRoutes, { store: deps.store })
  await app.register(openApiRoutes, { document: deps.document ?? (() => Promise.resolve(app.swagger())) })

  return app
}

/** The one error handler. */
function answerErrors(app: App, api: AgentApi): void {
  app.setErrorHandler((err: FastifyError | null | undefined, request, reply) => {
    if (abandoned(err, request)) {
      // Nobody to answer and nothing failed here: one quiet line.
      request.log.info(
        { method: request.method, route: request.routeOptions.url, url: pathOf(request.url) },
        'request aborted by the client',
      )
      return reply
        .code(CLIENT_CLOSED_STATUS)
        .send(envelope('client_closed', 'the client closed the connection before its request was read'))
    }
    const { status, body } = answerFor(err, request)
    // Every 503 says when to ask again (design §6.4).
    if (status === 503 && !reply.hasHeader('retry-after'))
      void reply.header('retry-after', String(api.readyRetryAfter()))
    // A catalogued 503 was logged where it arose: no stack per request.
    if (status >= 500 && !(status === 503 && err instanceof AppError)) {
      request.log.error(
        { err, method: request.method, route: request.routeOptions.url, url: pathOf(request.url), status },
        'request failed',
      )
    } else {
      request.log.info({ code: body.error.code, status, reason: body.error.message }, 'request refused')
    }
    return reply.code(status).send(body)
  })

  app.setNotFoundHandler((request, reply) => {
    const known = errors.noRoute(request.method, pathOf(request.url))
    return reply.code(known.statusCode).send(envelope(known.code, known.message))
  })
}

/** The hooks every request passes: clock, mutation check (design §6), body budget. */
function hookRequests(app: App, deps: AppDeps): void {
  // The clock lives on the request, not in a side table: two property writes a request.
  const auth = authHook(deps.token)
  app.addHook('onRequest', (request, reply, done) => {
    ;(request as Timed)[STARTED] = performance.now()
    auth(request, reply, done)
  })
  // One budget for every body still arriving.
  const budget = new BodyBudget(deps.bodyBudget ?? DEFAULT_BODY_BUDGET)
  app.addHook('preParsing', (request, reply, payload, done) => {
    done(null, hasBody(request) ? budget.meter(reply, payload) : payload)
  })

  // Counted once: when answered, or at its client's close first (499).
  const count = (request: FastifyRequest, status: number, seconds: number): void => {
    const timed = request as Timed
    if (timed[COUNTED] === true) return
    timed[COUNTED] = true
    deps.metrics.observeHttp(
      request.method,
      request.is404 ? UNMATCHED_ROUTE : (request.routeOptions.url ?? UNMATCHED_ROUTE),
      status,
      seconds,
    )
  }
  const onAbort = (request: FastifyRequest, done: HookHandlerDoneFunction): void => {
    count(
      request,
      CLIENT_CLOSED_STATUS,
      (performance.now() - ((request as Timed)[STARTED] ?? performance.now())) / 1000,
    )
    done()
  }
  // An abort hook costs a close listener per request.
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method]
    if (methods.every((m) => m === 'GET' || m === 'HEAD') && ANSWERED_AT_ONCE.has(route.url)) return
    const own = route.onRequestAbort
    route.onRequestAbort = [...(own === undefined ? [] : Array.isArray(own) ? own : [own]), onAbort]
  })
  app.addHook('onResponse', (request, reply, done) => {
    count(request, reply.statusCode, reply.elapsedTime / 1000)
    done()
  })
}

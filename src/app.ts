// The HTTP API as a Fastify instance, built around what it needs and never
// listening: server.ts listens, tests inject, openapi.ts reads the schemas.
import Fastify, {
  LogController,
  type ConnectionError,
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type HookHandlerDoneFunction,
} from 'fastify'
import swagger from '@fastify/swagger'
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
  /** The bearer token every mutation needs (src/infra/agent-token.ts); empty: no mutation is taken. */
  token: string
  /** Which agent this is (`GET /agent`): the data root it holds; absent where none is held. */
  identity?: AgentIdentity
  /** Largest request body accepted, in bytes; default 64 KiB. */
  bodyLimit?: number
  /** Server timeouts in ms; the defaults suit production, tests shorten them. */
  timeouts?: Partial<Timeouts>
  /** The deploy store, for the fleet page (`GET /fleet`); absent, that page answers 404. */
  store?: DeployStore
  /** What the request bodies still arriving may hold in all, in bytes; default 16 MiB. */
  bodyBudget?: number
}

export interface Timeouts {
  /** A socket silent this long is closed (a converge wait extends it for its request). */
  connectionMs: number
  /** The whole request, headers and body, must have arrived within this: a total, not an idle time. */
  requestMs: number
  /** An idle keep-alive connection is closed after this. */
  keepAliveMs: number
}

// Every body the API takes is a small JSON object; anything near this is a
// mistake or an attack.
const DEFAULT_BODY_LIMIT = 64 * 1024

/** The longest path parameter routed: past 253-byte hosts, so a long name reaches its route's own refusal. */
const MAX_PARAM_LENGTH = MAX_HOST_TEXT

/** The status an abandoned request is counted under (nginx's "client closed request"). */
export const CLIENT_CLOSED_STATUS = 499

export const DEFAULT_TIMEOUTS: Timeouts = { connectionMs: 30_000, requestMs: 30_000, keepAliveMs: 5_000 }

// Fastify's own client errors, answered with the catalogue's codes instead
// of Fastify's FST_* names, and a message that says what to change.
const FRAMEWORK_ERRORS: Record<string, (request: FastifyRequest) => AppError> = {
  FST_ERR_CTP_BODY_TOO_LARGE: (r) => errors.payloadTooLarge(r.routeOptions.bodyLimit),
  FST_ERR_CTP_INVALID_MEDIA_TYPE: (r) => errors.unsupportedMediaType(r.headers['content-type'] ?? ''),
  FST_ERR_CTP_INVALID_JSON_BODY: () => errors.invalidJson(),
  FST_ERR_CTP_EMPTY_JSON_BODY: () => errors.emptyJson(),
  FST_ERR_MAX_PARAM_LENGTH: () => errors.uriTooLong(MAX_PARAM_LENGTH),
}

/** The router's refusals of a URL itself, before any route: a name too long to be a parameter, or not decodable. */
const URL_ERRORS = { FST_ERR_MAX_PARAM_LENGTH: true, FST_ERR_BAD_URL: true } as const

/** The client left before its body was read whole; a route's own failure still logs as one. */
function abandoned(err: FastifyError | null | undefined, request: FastifyRequest): boolean {
  const reading = err?.code === 'ECONNRESET' || err?.code === 'ERR_STREAM_PREMATURE_CLOSE'
  return reading && (request.raw.aborted || request.raw.socket.destroyed)
}

/** What Node's HTTP parser refuses gets the envelope on the raw socket, then closes; a reset one is left alone. */
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

/** The catalogue's error for anything a route or Fastify threw: only what is recognised is ever shown. */
function catalogued(err: FastifyError | null | undefined, request: FastifyRequest): AppError {
  if (err instanceof AppError) return err
  if (typeof err !== 'object' || err === null) return errors.internal()
  // Fastify's message names the part and the field: `querystring/timeout must be <= 600`.
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
  // The catalogue's 500 carries no detail; its other codes are written to be read.
  return { status, body: envelope(known.code, status === 500 ? 'internal error' : known.message) }
}

// The path without its query: a message echoes only what names the resource.
function pathOf(url: string): string {
  const path = url.split('?', 1)[0] ?? url
  return path.length > 200 ? `${path.slice(0, 200)}…` : path
}

/**
 * What the activator asks on a tenant's first request: compiled once the agent is ready (warmHotRoutes), not
 * on that request.
 */
const HOT_ROUTES: ReadonlySet<string> = new Set(['/ready', '/ready/:host', '/wakes/:host', '/gate', '/gate/:host'])

declare module 'fastify' {
  interface FastifyInstance {
    /** Compiles the hot routes' schemas now, a schema a turn of the loop; answers how many (lazy-compilers.ts). */
    warmHotRoutes(): Promise<number>
  }
}

/** The routes whose answer is sent in the tick their request is read: nothing to abort. */
/** `/ready/:host` stays though `?wait=` holds: its route ends a wait on the response's close, so no abort hook. */
const ANSWERED_AT_ONCE = new Set(['/ready', '/ready/:host', '/layout/status', '/livez', '/gate', '/gate/:host'])

const STARTED = Symbol('started')
const COUNTED = Symbol('counted')

/** When a request arrived (performance.now()), and whether the histogram has it yet. */
interface Timed {
  [STARTED]?: number
  [COUNTED]?: boolean
}

/** Ajv's options for the request schemas (why: below, where the app is made). */
export const AJV_OPTIONS = { removeAdditional: false, coerceTypes: false, validateSchema: false } as const

export async function buildApp(deps: AppDeps): Promise<App> {
  const timeouts = { ...DEFAULT_TIMEOUTS, ...deps.timeouts }
  const compilers = lazyCompilers()
  const app = Fastify({
    loggerInstance: deps.logger,
    // A line per poll of /ready or /metrics would drown the layout lines; errors are still logged.
    logController: new LogController({ disableRequestLogging: true }),
    // A request's child logger is made only when it logs: the hot routes build none.
    childLoggerFactory: (parent, bindings, opts) => requestLogger(parent as AppLogger, bindings, opts),
    bodyLimit: deps.bodyLimit ?? DEFAULT_BODY_LIMIT,
    connectionTimeout: timeouts.connectionMs,
    requestTimeout: timeouts.requestMs,
    keepAliveTimeout: timeouts.keepAliveMs,
    // While closing, answer as the agent stands, never a bare 503 without Retry-After.
    return503OnClosing: false,
    // Node enforces requestTimeout only when it checks its connections, and
    // Fastify sets it too late for headersTimeout: given here, with
    // headersTimeout no longer and checked often, the bound holds (design §6).
    http: {
      requestTimeout: timeouts.requestMs,
      headersTimeout: timeouts.requestMs,
      connectionsCheckingInterval: Math.max(10, Math.min(1000, Math.floor(timeouts.requestMs / 10))),
    },
    // Schemas are exact: no field silently dropped, no value coerced, so
    // `{"awake": "x"}` is refused, not read as a set releasing every other
    // claim (design §6). No meta-schema check at compile time (it would
    // delay the activator's first /ready); test/app/route-schemas.test.ts
    // checks every schema instead.
    ajv: { customOptions: AJV_OPTIONS },
    // Each route's schemas compile on its first request, not before listening (design §4.4).
    schemaController: { compilersFactory: compilers.factory },
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    // A URL Fastify cannot even route (bad percent-encoding, a parameter
    // over the limit) still gets the envelope.
    frameworkErrors: (err, request, reply: FastifyReply) => {
      // The gate answers every name as the gate, headers and all (design §6.4).
      if (err.code in URL_ERRORS && answerUnroutable(request.method, request.url, reply)) return
      const known = FRAMEWORK_ERRORS[err.code]?.(request) ?? errors.clientError(err.statusCode ?? 400, err.message)
      void reply.code(known.statusCode).send(envelope(known.code, known.message))
    },
    clientErrorHandler: answerMalformed,
  }).withTypeProvider<TypeBoxTypeProvider>()

  app.decorate('warmHotRoutes', () => compilers.warm(HOT_ROUTES))

  answerErrors(app, deps.api)

  hookRequests(app, deps)

  // Before the routes, so the document sees each of them.
  await app.register(swagger, await openApiOptions())

  await app.register(healthRoutes)
  await app.register(agentIdentityRoutes, { identity: deps.identity, token: deps.token })
  await app.register(readyRoutes, { api: deps.api })
  await app.register(gateRoutes, { api: deps.api })
  await app.register(layoutRoutes, { api: deps.api })
  await app.register(wakesRoutes, { api: deps.api })
  await app.register(metricsRoutes, { metrics: deps.metrics })
  await app.register(consoleRoutes, { api: deps.api })
  await app.register(fleetPageRoutes, { store: deps.store })
  await app.register(openApiRoutes, { document: () => app.swagger() })

  return app
}

/**
 * The one error handler (the catalogue's envelope; a 5xx logged with its request) and the envelope for an
 * unknown URL.
 */
function answerErrors(app: App, api: AgentApi): void {
  app.setErrorHandler((err: FastifyError | null | undefined, request, reply) => {
    if (abandoned(err, request)) {
      // Nobody is there to answer, and nothing failed here: one quiet line, no stack.
      request.log.info(
        { method: request.method, route: request.routeOptions.url, url: pathOf(request.url) },
        'request aborted by the client',
      )
      return reply
        .code(CLIENT_CLOSED_STATUS)
        .send(envelope('client_closed', 'the client closed the connection before its request was read'))
    }
    const { status, body } = answerFor(err, request)
    // Every 503 is a not yet (design §6.4): it says when to ask again.
    if (status === 503 && !reply.hasHeader('retry-after'))
      void reply.header('retry-after', String(api.readyRetryAfter()))
    // A 503 of the catalogue (not ready, a registry fault, a lock) is an
    // answer written for the client, said where it arose: no stack per request.
    if (status >= 500 && !(status === 503 && err instanceof AppError)) {
      // The client learns only the code; the log keeps what happened and to which request.
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

/** The hooks every request passes: the HTTP histogram's clock and count, and the mutation check (design §6). */
function hookRequests(app: App, deps: AppDeps): void {
  // One onRequest hook for every request: the clock of the HTTP histogram
  // starts, then the mutation check (design §6). Kept on the request itself
  // rather than in side tables, so a request costs two property writes.
  const auth = authHook(deps.token)
  app.addHook('onRequest', (request, reply, done) => {
    ;(request as Timed)[STARTED] = performance.now()
    auth(request, reply, done)
  })
  // Every body, while it arrives, counts against one budget (body-budget.ts).
  const budget = new BodyBudget(deps.bodyBudget ?? DEFAULT_BODY_BUDGET)
  app.addHook('preParsing', (request, reply, payload, done) => {
    done(null, hasBody(request) ? budget.meter(reply, payload) : payload)
  })

  // Every request is counted once: when its answer is sent, or when its
  // client closes the connection first (499: no answer ever went out).
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
  // Fastify listens for each request's close on a route with an abort
  // hook. The hot reads are answered in the tick their request is read
  // (no body, no wait), so no client can leave one mid-way: they have none.
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

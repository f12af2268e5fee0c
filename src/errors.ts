// The one catalogue of coded errors. A route throws one; the app's one
// error handler answers {"error": {"code", "message"}} with its status.
// Fastify's own client errors (payload_too_large, unsupported_media_type)
// are mapped to the same envelope in app.ts. A 500's message never reaches
// the client: it is logged with the request. A 503 or 504 from this
// catalogue is written for the client, and is sent as it is.

export class AppError extends Error {
  override name = 'AppError'
  constructor(
    readonly code: string,
    readonly statusCode: number,
    message: string,
  ) {
    super(message)
  }
}

export const errors = {
  badRequest: (message: string) => new AppError('bad_request', 400, message),
  unauthorized: (message: string) => new AppError('unauthorized', 401, message),
  forbidden: (message: string) => new AppError('forbidden', 403, message),
  notFound: (message: string) => new AppError('not_found', 404, message),
  conflict: (message: string) => new AppError('conflict', 409, message),
  hostExists: (host: string) => new AppError('host_exists', 409, `host ${host} is already in the registry`),
  invalidHost: (host: string, why: string) => new AppError('invalid_host', 400, `${JSON.stringify(host)} is not a valid hostname: ${why}`),
  intentUnreadable: (why: string) => new AppError('intent_unreadable', 503, `the layout intent is unreadable: ${why}`),
  notReady: (phase: string) => new AppError('not_ready', 503, `layoutd is ${phase}`),
  convergeTimeout: (seconds: number) =>
    new AppError('converge_timeout', 504, `the run did not finish within ${seconds}s; it goes on (GET /layout/status shows it)`),
  internal: () => new AppError('internal', 500, 'internal error'),
} as const

/** The message of anything thrown: an Error's message, or the value as text. */
export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err)
}

// The one catalogue of coded errors. A route throws one; the app's one
// error handler answers {"error": {"code", "message"}} with its status. A
// 5xx message never reaches the client: it is logged with the request.

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
  internal: () => new AppError('internal', 500, 'internal error'),
} as const

// pino, JSON by default; pretty only on a terminal. Also the lazy request
// logger: a request that logs nothing builds no child.
import pino from 'pino'

export type AppLogger = pino.Logger

export function createLogger(
  level: string,
  destination: NodeJS.WritableStream & { isTTY?: boolean } = process.stderr,
): AppLogger {
  const opts: pino.LoggerOptions = {
    level,
    base: { svc: 'layoutd' },
    // A token never reaches a log line, wherever it appears.
    redact: { paths: ['req.headers.authorization', 'token', '*.token'], censor: '[redacted]' },
  }
  if (destination.isTTY === true && process.env.NO_COLOR === undefined) {
    return pino({
      ...opts,
      transport: { target: 'pino-pretty', options: { destination: 2, translateTime: 'SYS:HH:MM:ss.l' } },
    })
  }
  return pino(opts, destination)
}

type LogArgs = Parameters<pino.LogFn>

/** A request's logger, bound to its id: the pino child is made on its first line. */
class RequestLogger {
  readonly #parent: AppLogger
  readonly #bindings: pino.Bindings
  readonly #opts: pino.ChildLoggerOptions
  #child: AppLogger | undefined

  constructor(parent: AppLogger, bindings: pino.Bindings, opts: pino.ChildLoggerOptions) {
    this.#parent = parent
    this.#bindings = bindings
    this.#opts = opts
  }

  #log(): AppLogger {
    return (this.#child ??= this.#parent.child(this.#bindings, this.#opts))
  }

  get level(): string {
    return this.#child?.level ?? this.#opts.level ?? this.#parent.level
  }

  set level(level: string) {
    this.#log().level = level
  }

  isLevelEnabled(level: string): boolean {
    return this.#log().isLevelEnabled(level)
  }

  bindings(): pino.Bindings {
    return this.#log().bindings()
  }

  child(bindings: pino.Bindings, opts?: pino.ChildLoggerOptions): AppLogger {
    return this.#log().child(bindings, opts)
  }

  fatal(...args: LogArgs): void {
    this.#log().fatal(...args)
  }

  error(...args: LogArgs): void {
    this.#log().error(...args)
  }

  warn(...args: LogArgs): void {
    this.#log().warn(...args)
  }

  info(...args: LogArgs): void {
    this.#log().info(...args)
  }

  debug(...args: LogArgs): void {
    this.#log().debug(...args)
  }

  trace(...args: LogArgs): void {
    this.#log().trace(...args)
  }

  silent(): void {}
}

/** Fastify's childLoggerFactory: a request logger that becomes a pino child only when it logs. */
export function requestLogger(parent: AppLogger, bindings: pino.Bindings, opts: pino.ChildLoggerOptions): AppLogger {
  return new RequestLogger(parent, bindings, opts) as unknown as AppLogger
}

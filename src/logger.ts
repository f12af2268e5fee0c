// pino, JSON by default; pretty only when a person is watching a terminal.
import pino from 'pino'

export type AppLogger = pino.Logger

export function createLogger(level: string, destination: NodeJS.WritableStream & { isTTY?: boolean } = process.stderr): AppLogger {
  const opts: pino.LoggerOptions = {
    level,
    base: { svc: 'layoutd' },
    // A token never reaches a log line, wherever it appears.
    redact: { paths: ['req.headers.authorization', 'token', '*.token'], censor: '[redacted]' },
  }
  if (destination.isTTY === true && process.env.NO_COLOR === undefined) {
    return pino({ ...opts, transport: { target: 'pino-pretty', options: { destination: 2, translateTime: 'SYS:HH:MM:ss.l' } } })
  }
  return pino(opts, destination)
}

// The edge's reload (CARLOS_EDGE_RELOAD_URL): asked after rows change so it routes to the new sockets at once.
// The edge polls too, so a failure never fails a move.
import type { Logger } from '../domain/ports.js'

export function edgeReloader(url: string, logger: Logger): (() => Promise<void>) | undefined {
  if (url === '') return undefined
  return async () => {
    try {
      // Loaded on first use.
      const { request } = await import('undici')
      const res = await request(url, { method: 'POST', headersTimeout: 10_000, bodyTimeout: 10_000 })
      await res.body.dump()
      if (res.statusCode >= 300)
        logger.warn({ status: res.statusCode }, `layout: edge reload answered ${res.statusCode}`)
    } catch (err) {
      logger.warn({ err }, 'layout: edge reload failed; the edge picks up the rows on its own poll')
    }
  }
}

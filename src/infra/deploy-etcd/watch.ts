// The watch of the intents' prefix (design §7) over the gateway's streaming
// POST /v3/watch: one stream at a time, read line by line; a callback on
// every event and whenever a stream is established or breaks; a broken
// stream re-established on the next endpoint with jittered backoff, and
// each break logged once, not once per retry.
import Value from 'typebox/value'
import { errorMessage } from '../../errors.js'
import type { Clock, Logger } from '../../domain/ports.js'
import { schemaErrors } from '../schema-errors.js'
import { b64, type EtcdGateway, type Endpoint, gatewayMessage, MAX_RESPONSE_BYTES, readCapped } from './gateway.js'
import { WatchLine } from './wire-schemas.js'

/** Watch re-establishment backoff: first delay, and the ceiling it doubles up to. */
export const WATCH_RETRY_FIRST_MS = 250
export const WATCH_RETRY_MAX_MS = 10_000

/** One line of the watch stream carries at most a few events of records. */
const MAX_WATCH_LINE_BYTES = 4 * 1024 * 1024

export interface PrefixWatchOptions {
  gateway: EtcdGateway
  /** The watched prefix, and the base64 range end that closes it. */
  prefix: string
  rangeEnd: string
  /** Where watch breaks are logged. */
  logger: Logger | undefined
  /** The backoff timers, and the bound on a stream not yet created. */
  clock: Clock
  /** Jitter for the backoff, in [0, 1). */
  random: () => number
  retryFirstMs: number
  retryMaxMs: number
}

/** What one line of the stream says: created, events, or why the watch ended. */
interface WatchLineSays {
  created: boolean
  events: boolean
  revision?: string
  why?: string
}

export class PrefixWatch {
  readonly #opts: PrefixWatchOptions

  constructor(opts: PrefixWatchOptions) {
    this.#opts = opts
  }

  /**
   * Watches the prefix from the endpoint that answered last. onChange is
   * called on every event, and also when a watch is (re)established or
   * breaks: what changed while no watch was up is then read at once, by
   * the poll the agent runs anyway. A broken watch is re-established with
   * backoff on the next endpoint until signal aborts or the gateway closes.
   */
  watch(onChange: () => void, signal: AbortSignal): void {
    const { gateway, logger } = this.#opts
    const stop = AbortSignal.any([signal, gateway.closed])
    const notify = (): void => {
      try {
        onChange()
      } catch (err) {
        logger?.error({ err, store: gateway.describe() }, 'etcd deploy store: the watch callback threw')
      }
    }
    this.#watchLoop(notify, stop).catch((err: unknown) => {
      logger?.error({ err, store: gateway.describe() }, 'etcd deploy store: the watch stopped; the agent polls only')
    })
  }

  async #watchLoop(notify: () => void, stop: AbortSignal): Promise<void> {
    const { gateway, logger, random, retryFirstMs, retryMaxMs } = this.#opts
    const { endpoints } = gateway
    let failures = 0
    let lastLogged = ''
    let i = gateway.preferred
    while (!stop.aborted) {
      const ep = endpoints[i % endpoints.length]
      if (ep === undefined) return
      const ended = await this.#watchOnce(ep, notify, stop)
      if (stop.aborted) return
      if (ended.created) {
        failures = 0
        lastLogged = ''
        // The watch was up and is gone: what lands before the next one is
        // up is found by reading now, and by the polls meanwhile.
        notify()
      }
      failures++
      const cap = Math.min(retryMaxMs, retryFirstMs * 2 ** Math.min(failures - 1, 30))
      // Half fixed, half random: a fleet that lost its etcd at once does not come back in step.
      const wait = Math.round(cap / 2 + (random() * cap) / 2)
      const why = `${ep.url}: ${ended.why}`
      if (ended.created || why !== lastLogged) {
        logger?.warn(
          { store: gateway.describe(), endpoint: ep.url, err: ended.why, retryMs: wait, failures },
          `etcd deploy store: watch ${ended.created ? 'broke' : 'not established'} on ${why}; polling until it is re-established (next try in ${wait} ms)`,
        )
        lastLogged = why
      }
      i = (i + 1) % endpoints.length
      await this.#sleep(wait, stop)
    }
  }

  /** One watch stream, to its end; answers whether it was established and why it ended. */
  async #watchOnce(ep: Endpoint, notify: () => void, stop: AbortSignal): Promise<{ created: boolean; why: string }> {
    const { gateway, logger, clock, prefix, rangeEnd } = this.#opts
    const ac = new AbortController()
    const onStop = () => ac.abort(stop.reason)
    stop.addEventListener('abort', onStop, { once: true })
    // Until etcd says the watch is created, the attempt has the request bound.
    const bound = gateway.requestTimeoutMs
    const notCreated = clock.setTimer(bound, () => ac.abort(new Error(`no watch within ${bound} ms`)))
    let created = false
    try {
      const res = await gateway.stream(ep, '/v3/watch', { create_request: { key: b64(prefix), range_end: rangeEnd } }, ac.signal)
      if (res.statusCode !== 200) {
        const text = await readCapped(res.body, MAX_RESPONSE_BYTES)
        return { created, why: `answered HTTP ${res.statusCode} to /v3/watch: ${gatewayMessage(text)}` }
      }
      /** Acts on one message; answers why the watch ended, if it did. */
      const onLine = (line: string): string | undefined => {
        const said = watchLineSays(line)
        if (said.created && !created) {
          created = true
          notCreated()
          gateway.prefer(ep)
          logger?.info({ store: gateway.describe(), endpoint: ep.url }, `etcd deploy store: watching ${prefix} on ${ep.url}`)
          // Whatever landed before the watch began is found by reading now.
          notify()
        }
        if (said.events) {
          // Records are an operator's act, rare enough to log each one seen.
          logger?.info(
            { store: gateway.describe(), endpoint: ep.url, revision: said.revision },
            `etcd deploy store: a record changed under ${prefix} (revision ${said.revision ?? '?'}); reading the intent now`,
          )
          notify()
        }
        return said.why
      }
      let buf = ''
      for await (const chunk of res.body.setEncoding('utf8') as AsyncIterable<string>) {
        buf += chunk
        let nl: number
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl).trim()
          buf = buf.slice(nl + 1)
          const why = line === '' ? undefined : onLine(line)
          if (why !== undefined) {
            res.body.destroy()
            return { created, why }
          }
        }
        if (buf.length > MAX_WATCH_LINE_BYTES) {
          res.body.destroy()
          return { created, why: `a watch message over ${MAX_WATCH_LINE_BYTES} bytes` }
        }
      }
      // The gateway writes its last message, the error that ends a stream, without a newline.
      const last = buf.trim()
      return { created, why: (last === '' ? undefined : onLine(last)) ?? 'the stream ended' }
    } catch (err) {
      return { created, why: ac.signal.aborted && !stop.aborted ? errorMessage(ac.signal.reason) : errorMessage(err) }
    } finally {
      notCreated()
      stop.removeEventListener('abort', onStop)
      ac.abort()
    }
  }

  /** Waits ms on the watch's clock, or until stop aborts. */
  #sleep(ms: number, stop: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      if (stop.aborted) return resolve()
      let cancel = (): void => undefined
      const done = () => {
        cancel()
        stop.removeEventListener('abort', done)
        resolve()
      }
      stop.addEventListener('abort', done, { once: true })
      cancel = this.#opts.clock.setTimer(ms, done)
    })
  }
}

/** What one line of the watch stream says: created, events, or why the watch ended. */
function watchLineSays(line: string): WatchLineSays {
  let parsed: unknown
  try {
    parsed = JSON.parse(line)
  } catch (err) {
    return { created: false, events: false, why: `a watch message that is not JSON: ${errorMessage(err)}` }
  }
  if (!Value.Check(WatchLine, parsed)) return { created: false, events: false, why: `a watch message that is not etcd's: ${schemaErrors(WatchLine, parsed)}` }
  if (parsed.error !== undefined) return { created: false, events: false, why: `etcd: ${parsed.error.message ?? 'an error without a message'}` }
  const result = parsed.result
  if (result === undefined) return { created: false, events: false }
  const events = (result.events?.length ?? 0) > 0
  const revision = result.header?.revision
  if (result.canceled === true) {
    return { created: result.created === true, events, revision, why: `etcd canceled the watch${result.cancel_reason ? `: ${result.cancel_reason}` : ''}` }
  }
  return { created: result.created === true, events, revision }
}

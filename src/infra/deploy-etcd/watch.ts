// The watch of the intents' prefix (design §7.2): resumed from the last
// revision seen, re-established with backoff, dropped when silent past its
// bound. One stream at a time, resumed on the next endpoint after the last
// revision seen, so no event is missed or seen twice.
import type { Dispatcher } from 'undici'
import { errorMessage } from '../../errors.js'
import type { Clock, Logger } from '../../domain/ports.js'
import { b64, type Gateway, type Endpoint, gatewayMessage, MAX_RESPONSE_BYTES, readCapped } from './gateway.js'
import { watchLineSays, type WatchEvent } from './watch-line.js'

/** Backoff: the first delay, and the ceiling it doubles up to. */
export const WATCH_RETRY_FIRST_MS = 250
export const WATCH_RETRY_MAX_MS = 10_000

/** The silence after which a stream is dropped (CARLOS_ETCD_WATCH_SILENCE). */
export const WATCH_SILENCE_MS = 5_000

const MAX_WATCH_LINE_BYTES = 4 * 1024 * 1024

export interface PrefixWatchOptions {
  gateway: Gateway
  prefix: string
  rangeEnd: string
  logger: Logger | undefined
  /** Backoff timers, and the bound on a stream not yet created. */
  clock: Clock
  /** Backoff jitter, in [0, 1). */
  random: () => number
  retryFirstMs: number
  retryMaxMs: number
  silenceMs: number
  onEvents?: (events: readonly WatchEvent[]) => void
}

export type { WatchEvent }

interface Stream {
  ep: Endpoint
  notify: () => void
  /** The revision up to which every event was seen; kept across streams. */
  seen: { revision: bigint | undefined }
  resumed: boolean
  created: boolean
  notCreated: () => void
  heard: () => void
}

export class PrefixWatch {
  readonly #opts: PrefixWatchOptions

  constructor(opts: PrefixWatchOptions) {
    this.#opts = opts
  }

  /** onChange fires on every event and whenever a watch comes up or breaks. */
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
    const seen: { revision: bigint | undefined } = { revision: undefined }
    while (!stop.aborted) {
      const ep = endpoints[i % endpoints.length]
      if (ep === undefined) return
      const ended = await this.#watchOnce(ep, notify, stop, seen)
      if (stop.aborted) return
      if (ended.created) {
        failures = 0
        lastLogged = ''
        // The watch is gone: what lands before the next is found by reading now, and by the polls meanwhile.
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
          `etcd deploy store: watch ${ended.created ? 'broke' : 'not established'} on ${why}; ` +
            `polling until it is re-established (next try in ${wait} ms)`,
        )
        lastLogged = why
      }
      i = (i + 1) % endpoints.length
      await this.#sleep(wait, stop)
    }
  }

  async #watchOnce(
    ep: Endpoint,
    notify: () => void,
    stop: AbortSignal,
    seen: { revision: bigint | undefined },
  ): Promise<{ created: boolean; why: string }> {
    const { gateway, clock } = this.#opts
    const ac = new AbortController()
    const onStop = () => ac.abort(stop.reason)
    stop.addEventListener('abort', onStop, { once: true })
    // Until etcd says the watch is created, the attempt has the request bound.
    const bound = gateway.requestTimeoutMs
    const notCreated = clock.setTimer(bound, () => ac.abort(new Error(`no watch within ${bound} ms`)))
    const s: Stream = {
      ep,
      notify,
      seen,
      resumed: seen.revision !== undefined,
      created: false,
      notCreated,
      heard: () => undefined,
    }
    let silence = (): void => undefined
    let token: string | undefined
    try {
      const auth = await gateway.headers(ac.signal)
      token = auth.headers.authorization
      const create = {
        key: b64(this.#opts.prefix),
        range_end: this.#opts.rangeEnd,
        // etcd's progress notifications come at its own interval; between two, #silenceGuard asks the member.
        progress_notify: true,
        ...(seen.revision === undefined ? {} : { start_revision: String(seen.revision + 1n) }),
      }
      const res = await gateway.stream(ep, '/v3/watch', { create_request: create }, ac.signal, auth.headers)
      if (res.statusCode !== 200) {
        const body = await readCapped(res.body, MAX_RESPONSE_BYTES)
        const why = `answered HTTP ${res.statusCode} to /v3/watch: ${gatewayMessage(body)}`
        gateway.refusedToken(token, why)
        return { created: s.created, why }
      }
      const heard = this.#silenceGuard(ep, ac)
      silence = heard.cancel
      s.heard = heard.now
      const why = await this.#read(s, res.body, token)
      return { created: s.created, why }
    } catch (err) {
      return {
        created: s.created,
        why:
          ac.signal.aborted && !stop.aborted
            ? errorMessage(ac.signal.reason)
            : (gateway.credentials.explain(err, ep.url.startsWith('https:')) ?? errorMessage(err)),
      }
    } finally {
      silence()
      notCreated()
      stop.removeEventListener('abort', onStop)
      ac.abort()
    }
  }

  /** Reads a line per message until one ends the watch; answers why. */
  async #read(s: Stream, body: Dispatcher.ResponseData['body'], token: string | undefined): Promise<string> {
    const { gateway } = this.#opts
    let buf = ''
    for await (const chunk of body.setEncoding('utf8') as AsyncIterable<string>) {
      buf += chunk
      let nl: number
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl).trim()
        buf = buf.slice(nl + 1)
        const why = line === '' ? undefined : this.#onLine(s, line)
        if (why !== undefined) {
          body.destroy()
          gateway.refusedToken(token, why)
          return why
        }
      }
      if (buf.length > MAX_WATCH_LINE_BYTES) {
        body.destroy()
        return `a watch message over ${MAX_WATCH_LINE_BYTES} bytes`
      }
    }
    // The gateway writes its last message, the error that ends a stream, without a newline.
    const last = buf.trim()
    const why = (last === '' ? undefined : this.#onLine(s, last)) ?? 'the stream ended'
    gateway.refusedToken(token, why)
    return why
  }

  #onLine(s: Stream, line: string): string | undefined {
    s.heard()
    const said = watchLineSays(line)
    const { seen } = s
    if (said.compacted === true) seen.revision = undefined
    if (said.created && !s.created) {
      this.#established(s, said.revision)
    } else if (said.events.length > 0) {
      this.#onEvents(s, said.events)
    } else if (
      s.created &&
      said.why === undefined &&
      said.revision !== undefined &&
      (seen.revision === undefined || said.revision > seen.revision)
    ) {
      // A progress notification: every event up to its revision has been sent.
      seen.revision = said.revision
    }
    return said.why
  }

  /** Created: bound off, endpoint preferred, what landed before read now. */
  #established(s: Stream, revision: bigint | undefined): void {
    const { gateway, logger, prefix } = this.#opts
    const { ep, seen, resumed } = s
    s.created = true
    s.notCreated()
    gateway.prefer(ep)
    // Watching from now: every event after the header's revision comes on this stream.
    if (!resumed && revision !== undefined) seen.revision = revision
    logger?.info(
      { store: gateway.describe(), endpoint: ep.url, fromRevision: seen.revision?.toString() },
      `etcd deploy store: watching ${prefix} on ${ep.url}` +
        `${resumed ? ` from revision ${String((seen.revision ?? 0n) + 1n)}` : ''}`,
    )
    s.notify()
  }

  /** Events past the last revision seen are told, logged and read. */
  #onEvents(s: Stream, events: readonly WatchEvent[]): void {
    const { gateway, logger, prefix } = this.#opts
    const { seen } = s
    const fresh = events.filter((e) => seen.revision === undefined || e.revision > seen.revision)
    for (const e of events) if (seen.revision === undefined || e.revision > seen.revision) seen.revision = e.revision
    if (fresh.length === 0) return
    const revision = String(fresh.at(-1)?.revision)
    // Records are an operator's act, rare enough to log each one seen.
    logger?.info(
      { store: gateway.describe(), endpoint: s.ep.url, revision },
      `etcd deploy store: a record changed under ${prefix} (revision ${revision}); reading the intent now`,
    )
    this.#opts.onEvents?.(fresh)
    s.notify()
  }

  /**
   * Drops the stream after silenceMs unheard. A third in, the member is asked a read, whose answer counts as
   * heard: a quiet prefix on a live member says nothing, a frozen member answers neither.
   */
  #silenceGuard(ep: Endpoint, ac: AbortController): { now: () => void; cancel: () => void } {
    const { gateway, clock, silenceMs } = this.#opts
    const early = Math.max(1, Math.floor(silenceMs / 3))
    let last = clock.now()
    let probing = false
    let cancel: () => void = () => undefined
    const check = (): void => {
      if (ac.signal.aborted) return
      const quiet = clock.now() - last
      if (quiet >= silenceMs) {
        ac.abort(
          new Error(
            `nothing heard for ${quiet} ms (the bound is ${silenceMs} ms): ` +
              `no event, no progress, no answer from ${ep.url}`,
          ),
        )
        return
      }
      if (quiet >= early && !probing) {
        probing = true
        gateway
          .probe(ep, ac.signal, silenceMs, this.#opts.prefix)
          .then(
            () => (last = clock.now()),
            () => undefined,
          )
          .finally(() => (probing = false))
      }
      cancel = clock.setTimer(Math.max(1, Math.min(early, last + silenceMs - clock.now())), check)
    }
    cancel = clock.setTimer(early, check)
    return { now: () => (last = clock.now()), cancel: () => cancel() }
  }

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

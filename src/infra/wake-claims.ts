// The wake claims the pass consults (DESIGN §4 "the sweep"): loaded from the
// registry at start, so a tenant that was awake when layoutd stopped stays
// claimed until the activator releases it. When they cannot be read the
// sweep failed, and every host counts as awake: the pass trusts no stop it
// cannot prove.
import { request } from 'undici'
import type { Claims } from '../domain/fence.js'
import type { Logger } from '../domain/ports.js'
import type { Registry } from './registry.js'

export class WakeClaims implements Claims {
  readonly #awake = new Set<string>()
  readonly #released = new Map<string, Set<() => void>>()
  #swept = false

  constructor(
    private readonly registry: Registry,
    private readonly activatorUrl: string,
    private readonly logger: Logger,
  ) {}

  /** Loads the persisted claims; reports whether it could (the sweep's answer). */
  sweep(): boolean {
    try {
      for (const h of this.registry.wakes()) this.#awake.add(h)
      this.#swept = true
    } catch (err) {
      this.logger.error({ err }, 'layout: wake claims unreadable at start; every host counts as awake')
      this.#swept = false
    }
    return this.#swept
  }

  get swept(): boolean {
    return this.#swept
  }

  claimed(host: string): boolean {
    return !this.#swept || this.#awake.has(host)
  }

  /** The host is asleep: its claim is gone, in the registry and here, and a stop waiting on it ends. */
  release(host: string): boolean {
    const had = this.registry.releaseWake(host)
    this.#awake.delete(host)
    for (const done of this.#released.get(host) ?? []) done()
    this.#released.delete(host)
    return had
  }

  async stop(host: string, signal: AbortSignal): Promise<boolean> {
    if (!this.claimed(host)) return true
    const released = new Promise<boolean>((resolve) => {
      const done = () => resolve(true)
      const waiters = this.#released.get(host) ?? new Set()
      waiters.add(done)
      this.#released.set(host, waiters)
      signal.addEventListener('abort', () => {
        waiters.delete(done)
        resolve(false)
      }, { once: true })
    })
    if (this.activatorUrl === '') {
      this.logger.warn({ host }, `layout: ${host}: awake, and no CARLOS_ACTIVATOR_URL to ask for a stop; waiting for its release`)
    } else {
      const url = `${this.activatorUrl.replace(/\/+$/, '')}/instances/${encodeURIComponent(host)}/stop`
      try {
        const res = await request(url, { method: 'POST', signal, headersTimeout: 10_000, bodyTimeout: 10_000 })
        await res.body.dump()
        if (res.statusCode >= 300) this.logger.warn({ host, status: res.statusCode }, `layout: ${host}: activator answered ${res.statusCode} to stop`)
      } catch (err) {
        if (!signal.aborted) this.logger.warn({ host, err }, `layout: ${host}: asking the activator to stop it failed: ${(err as Error).message}`)
      }
    }
    return released
  }
}

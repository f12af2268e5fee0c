// The boxes' summaries in etcd (design §7.3): one key per box,
// <root>boxes/<box>, put on a lease this agent keeps alive (a third of its
// TTL between renewals), so a box that dies disappears when its lease
// expires. A lease etcd no longer knows (the agent was cut off past its
// TTL) is granted again and the summary put again. This file owns the
// lease and the keys; the store hands it the gateway.
import { Value } from '../../domain/typebox.js'
import { BoxSummary } from '../../domain/box-summary.js'
import type { Clock, Logger } from '../../domain/ports.js'
import { errorMessage } from '../../errors.js'
import { schemaErrors } from '../schema-errors.js'
import { b64, type EtcdGateway, prefixEnd } from './gateway.js'
import { LeaseGrantResponse, LeaseKeepAliveResponse, RangeResponse, TxnResponse } from './wire-schemas.js'

/** The lease's TTL when CARLOS_ETCD_BOX_TTL is unset. */
export const BOX_TTL_MS = 30_000

const utf8 = new TextDecoder('utf-8', { fatal: true })

export interface EtcdBoxesOptions {
  gateway: EtcdGateway
  /** The keys' prefix, ending in `/`. */
  prefix: string
  ttlMs: number
  clock: Clock
  logger: Logger | undefined
}

export class EtcdBoxes {
  readonly #o: EtcdBoxesOptions
  /** The lease this agent's summary lives on, once granted. */
  #lease: string | undefined
  /** The last summary put, put again on a new lease. */
  #value: { key: string; value: string } | undefined
  #renewal: (() => void) | undefined
  #renewing = false
  /** The last summary given is in etcd (its put succeeded). */
  #written = false

  constructor(opts: EtcdBoxesOptions) {
    if (!opts.prefix.endsWith('/')) throw new Error(`etcd key prefix ${JSON.stringify(opts.prefix)} must end in "/"`)
    this.#o = opts
  }

  async publish(summary: BoxSummary, signal: AbortSignal): Promise<void> {
    if (!Value.Check(BoxSummary, summary))
      throw new Error(`refusing to publish an invalid box summary: ${schemaErrors(BoxSummary, summary)}`)
    this.#value = { key: b64(`${this.#o.prefix}${summary.box}`), value: b64(`${JSON.stringify(summary)}\n`) }
    this.#written = false
    // Renewals start whatever the put does: a failed one is put again by the next.
    this.#schedule()
    await this.#put(signal)
  }

  /** Puts the summary on the lease, granting one first when there is none or etcd forgot it. */
  async #put(signal: AbortSignal): Promise<void> {
    const v = this.#value
    if (v === undefined) return
    this.#lease ??= await this.#grant(signal)
    try {
      await this.#o.gateway.call('/v3/kv/put', { ...v, lease: this.#lease }, TxnResponse, signal)
    } catch (err) {
      if (!/requested lease not found/i.test(errorMessage(err))) throw err
      this.#lease = await this.#grant(signal)
      await this.#o.gateway.call('/v3/kv/put', { ...v, lease: this.#lease }, TxnResponse, signal)
    }
    if (this.#value === v) this.#written = true
  }

  async #grant(signal: AbortSignal): Promise<string> {
    const ttl = Math.max(1, Math.ceil(this.#o.ttlMs / 1000))
    const { value } = await this.#o.gateway.call('/v3/lease/grant', { TTL: String(ttl) }, LeaseGrantResponse, signal)
    if (value.ID === undefined || value.error)
      throw new Error(`etcd granted no lease: ${value.error ?? 'no ID in its answer'}`)
    return value.ID
  }

  /** The next renewal, a third of the TTL from now: two may fail before the summary goes. */
  #schedule(): void {
    if (this.#renewal !== undefined || this.#o.gateway.closed.aborted) return
    this.#renewal = this.#o.clock.setTimer(Math.max(100, Math.floor(this.#o.ttlMs / 3)), () => {
      this.#renewal = undefined
      void this.#renew().finally(() => this.#schedule())
    })
  }

  async #renew(): Promise<void> {
    if (this.#renewing || this.#value === undefined) return
    this.#renewing = true
    const { gateway, logger, ttlMs } = this.#o
    try {
      const signal = AbortSignal.any([gateway.closed, AbortSignal.timeout(Math.max(1000, ttlMs))])
      const lease = this.#lease
      if (lease === undefined || !this.#written) {
        // The last put failed: the summary is not in etcd until one succeeds.
        await this.#put(signal)
        logger?.info(
          { store: gateway.describe() },
          'etcd deploy store: the box summary is published again on a new lease',
        )
        return
      }
      const { value } = await gateway.call('/v3/lease/keepalive', { ID: lease }, LeaseKeepAliveResponse, signal)
      const ttl = value.result?.TTL
      if (value.error !== undefined || ttl === undefined || ttl === '0' || ttl.startsWith('-')) {
        // Expired while we were cut off (or too slow): the key went with it. A new lease, the summary again.
        logger?.warn(
          { store: gateway.describe(), lease },
          'etcd deploy store: the box summary lease expired; publishing again on a new one',
        )
        this.#lease = undefined
        await this.#put(signal)
      }
    } catch (err) {
      if (!gateway.closed.aborted)
        logger?.warn(
          { store: gateway.describe(), err },
          `etcd deploy store: the box summary lease was not renewed: ${errorMessage(err)}`,
        )
    } finally {
      this.#renewing = false
    }
  }

  /** Stops renewing and revokes the lease (best effort): a box that stops cleanly leaves at once. */
  async close(signal: AbortSignal): Promise<void> {
    this.#renewal?.()
    this.#renewal = undefined
    const lease = this.#lease
    this.#lease = undefined
    if (lease === undefined) return
    await this.#o.gateway.call('/v3/lease/revoke', { ID: lease }, LeaseGrantResponse, signal).catch(() => undefined)
  }

  /** Every live box's summary, sorted by label. A malformed one throws naming its key. */
  async list(signal: AbortSignal): Promise<BoxSummary[]> {
    const { prefix, gateway } = this.#o
    const { value } = await gateway.call(
      '/v3/kv/range',
      { key: b64(prefix), range_end: prefixEnd(prefix) },
      RangeResponse,
      signal,
    )
    const out: BoxSummary[] = []
    for (const kv of value.kvs ?? []) {
      const key = Buffer.from(kv.key, 'base64').toString('utf8')
      let parsed: unknown
      try {
        parsed = JSON.parse(utf8.decode(Buffer.from(kv.value ?? '', 'base64')))
      } catch (err) {
        throw new Error(`box summary etcd ${key}: not JSON: ${errorMessage(err)}`, { cause: err })
      }
      if (!Value.Check(BoxSummary, parsed))
        throw new Error(`box summary etcd ${key}: not a box summary: ${schemaErrors(BoxSummary, parsed)}`)
      if (`${prefix}${parsed.box}` !== key)
        throw new Error(
          `box summary etcd ${key}: holds box ${JSON.stringify(parsed.box)}, so its key must be ${prefix}${parsed.box}`,
        )
      out.push(parsed)
    }
    return out.sort((a, b) => (a.box < b.box ? -1 : a.box > b.box ? 1 : 0))
  }
}

// The boxes' summaries and labels in etcd (design §7.3, §7.5): one lease per
// agent carries <root>labels/<box> and <root>boxes/<box>, so a dead box leaves
// the live set when its lease expires; the unleased <root>boxes-kept/<box>
// keeps its last summary until `fleet forget`.
import { Value } from '../../domain/typebox.js'
import { BoxSummary, KeptBox } from '../../domain/box-summary.js'
import type { Clock, LabelHolder, Logger } from '../../domain/ports.js'
import { errorMessage, errors } from '../../errors.js'
import { schemaErrors } from '../schema-errors.js'
import { b64, type Gateway, prefixEnd } from './gateway.js'
import { LeaseGrantResponse, LeaseKeepAliveResponse, RangeResponse, TxnResponse } from './wire-schemas.js'

/** The lease's TTL when CARLOS_ETCD_BOX_TTL is unset. */
export const BOX_TTL_MS = 30_000

const utf8 = new TextDecoder('utf-8', { fatal: true })

export interface EtcdBoxesOptions {
  gateway: Gateway
  prefix: string
  keptPrefix: string
  labelPrefix: string
  /** Kept until a clean stop: how a takeover is told. */
  holderPrefix: string
  ttlMs: number
  clock: Clock
  logger: Logger | undefined
}

interface Published {
  key: string
  value: string
  kept: { key: string; value: string }
}

export class EtcdBoxes {
  readonly #o: EtcdBoxesOptions
  #lease: string | undefined
  #granting: Promise<string> | undefined
  #value: Published | undefined
  #renewal: (() => void) | undefined
  #renewing = false
  #written = false
  #label: { key: string; holderKey: string; value: string; holder: LabelHolder } | undefined
  #claimed = false
  /** The label was taken while this lease had expired: publish nothing more. */
  #lost = false

  constructor(opts: EtcdBoxesOptions) {
    if (!opts.prefix.endsWith('/')) throw new Error(`etcd key prefix ${JSON.stringify(opts.prefix)} must end in "/"`)
    this.#o = opts
  }

  async publish(summary: BoxSummary, signal: AbortSignal): Promise<void> {
    if (this.#lost) return
    if (!Value.Check(BoxSummary, summary))
      throw new Error(`refusing to publish an invalid box summary: ${schemaErrors(BoxSummary, summary)}`)
    const kept: KeptBox = { summary }
    this.#value = {
      key: b64(`${this.#o.prefix}${summary.box}`),
      value: b64(`${JSON.stringify(summary)}\n`),
      kept: { key: b64(`${this.#o.keptPrefix}${summary.box}`), value: b64(`${JSON.stringify(kept)}\n`) },
    }
    this.#written = false
    // Renewals start whatever the put does: the next puts a failed one again.
    this.#schedule()
    await this.#put(signal)
  }

  /**
   * Takes the label (design §7.5) or throws `label_taken`; a holder with our data root and host is a dead
   * run of this agent (the data root's lock says so), taken over at once.
   */
  async claim(holder: LabelHolder, signal: AbortSignal): Promise<void> {
    const { labelPrefix, holderPrefix } = this.#o
    this.#label = {
      key: b64(`${labelPrefix}${holder.box}`),
      holderKey: b64(`${holderPrefix}${holder.box}`),
      value: b64(`${JSON.stringify(holder)}\n`),
      holder,
    }
    this.#schedule()
    const other = await this.#claimNow(signal)
    if (other === undefined) return
    this.#renewal?.()
    this.#renewal = undefined
    throw errors.labelTaken(holder.box, describeHolder(other))
  }

  async #claimNow(signal: AbortSignal): Promise<LabelHolder | undefined> {
    const label = this.#label
    if (label === undefined) return undefined
    if (this.#lease === undefined) await this.#grantOnce(signal)
    const taken = await this.#take(signal)
    if (taken !== undefined) {
      const same = taken.dataRoot === label.holder.dataRoot && taken.host === label.holder.host
      if (!same) return taken
      // The data root's lock is ours, so that agent is gone; its lease has yet to expire.
      await this.#o.gateway.call('/v3/kv/deleterange', { key: label.key }, TxnResponse, signal)
      const again = await this.#take(signal)
      if (again !== undefined) return again
    }
    this.#claimed = true
    return undefined
  }

  /** One txn: the label put where no key holds it, the last holder swapped; else the live holder. */
  async #take(signal: AbortSignal): Promise<LabelHolder | undefined> {
    const label = this.#label
    if (label === undefined) return undefined
    const { key, holderKey, value } = label
    const txn = () => ({
      compare: [{ key, target: 'CREATE', result: 'EQUAL', create_revision: '0' }],
      success: [
        { request_range: { key: holderKey } },
        { request_put: { key, value, lease: this.#lease } },
        { request_put: { key: holderKey, value } },
      ],
      failure: [{ request_range: { key } }],
    })
    const call = () => this.#o.gateway.call('/v3/kv/txn', txn(), TxnResponse, signal)
    const { value: res } = await call().catch(async (err: unknown) => {
      if (!leaseNotFound(err)) throw err
      // No keep-alive runs while the label is unclaimed, so its lease may lapse meanwhile: take it on a new one.
      this.#written = false
      await this.#grantOnce(signal)
      return call()
    })
    const found = res.responses?.[0]?.response_range?.kvs?.[0]?.value
    if (res.succeeded !== true) {
      // A retried txn that landed finds its own value.
      if (found === value) return undefined
      return parseHolder(found) ?? { ...label.holder, pid: -1, host: 'unknown', dataRoot: 'unknown' }
    }
    const last = found === undefined || found === value ? undefined : parseHolder(found)
    if (last !== undefined)
      this.#o.logger?.warn(
        { box: label.holder.box, lastHolder: last },
        `etcd deploy store: box label ${label.holder.box} taken over from ${describeHolder(last)}, ` +
          `which did not stop cleanly (its lease expired, or it was killed)`,
      )
    return undefined
  }

  /** Puts the summary on the lease (a new one if etcd forgot it), guarded on the label being on this lease. */
  async #put(signal: AbortSignal): Promise<void> {
    if (this.#lost) return
    if (this.#label !== undefined && !this.#claimed) {
      // etcd was away at start: the label is taken before any summary.
      const other = await this.#claimNow(signal)
      if (other !== undefined) return this.#lose(other)
    }
    const v = this.#value
    if (v === undefined) return
    if (this.#lease === undefined) await this.#grantOnce(signal)
    try {
      await this.#guardedPut(v, signal)
    } catch (err) {
      if (!leaseNotFound(err)) throw err
      await this.#renewLease(signal)
      await this.#guardedPut(v, signal)
    }
    if (this.#value === v) this.#written = true
  }

  async #guardedPut(v: Published, signal: AbortSignal): Promise<void> {
    // The kept copy rides in the same txn: one write per change of the summary, none per keep-alive.
    const puts = () => [{ request_put: { key: v.key, value: v.value, lease: this.#lease } }, { request_put: v.kept }]
    const label = this.#label
    if (label === undefined) {
      await this.#o.gateway.call('/v3/kv/txn', { compare: [], success: puts(), failure: [] }, TxnResponse, signal)
      return
    }
    const txn = () => ({
      compare: [{ key: label.key, target: 'LEASE', result: 'EQUAL', lease: this.#lease }],
      success: puts(),
      failure: [],
    })
    const { value } = await this.#o.gateway.call('/v3/kv/txn', txn(), TxnResponse, signal)
    if (value.succeeded === true) return
    // The label went with an expired lease, or another agent holds it.
    await this.#renewLease(signal)
    if (this.#lost) return
    const again = await this.#o.gateway.call('/v3/kv/txn', txn(), TxnResponse, signal)
    if (again.value.succeeded !== true) throw new Error(`the box label is not on this agent's lease after taking it`)
  }

  async #renewLease(signal: AbortSignal): Promise<void> {
    // The summary went with the last lease: until it is put on this one, each renewal puts it again.
    this.#written = false
    await this.#grantOnce(signal)
    const label = this.#label
    if (label === undefined) return
    this.#claimed = false
    const holder = await this.#claimNow(signal)
    if (holder !== undefined) return this.#lose(holder)
    this.#o.logger?.warn(
      { box: label.holder.box },
      `etcd deploy store: box label ${label.holder.box} taken again on a new lease (the last one expired)`,
    )
  }

  #lose(holder: LabelHolder): void {
    const box = this.#label?.holder.box ?? holder.box
    this.#lost = true
    this.#renewal?.()
    this.#renewal = undefined
    this.#o.logger?.error(
      { box, holder },
      `etcd deploy store: box label ${box} was taken over by another agent ` +
        `(${describeHolder(holder)}) while this agent's lease had expired; ` +
        `this agent stops publishing its summary: stop it, or give it its own CARLOS_BOX`,
    )
  }

  /** One grant for all who ask at once: a second would leave the label or summary on a lease no renewal keeps. */
  #grantOnce(signal: AbortSignal): Promise<string> {
    this.#granting ??= this.#grant(signal)
      .then((lease) => (this.#lease = lease))
      .finally(() => (this.#granting = undefined))
    return this.#granting
  }

  async #grant(signal: AbortSignal): Promise<string> {
    const ttl = Math.max(1, Math.ceil(this.#o.ttlMs / 1000))
    const { value } = await this.#o.gateway.call('/v3/lease/grant', { TTL: String(ttl) }, LeaseGrantResponse, signal)
    if (value.ID === undefined || value.error)
      throw new Error(`etcd granted no lease: ${value.error ?? 'no ID in its answer'}`)
    return value.ID
  }

  /** A third of the TTL from now: two renewals may fail before the summary goes. */
  #schedule(): void {
    if (this.#renewal !== undefined || this.#o.gateway.closed.aborted || this.#lost) return
    this.#renewal = this.#o.clock.setTimer(Math.max(100, Math.floor(this.#o.ttlMs / 3)), () => {
      this.#renewal = undefined
      void this.#renew().finally(() => this.#schedule())
    })
  }

  async #renew(): Promise<void> {
    if (this.#renewing || (this.#value === undefined && this.#label === undefined) || this.#lost) return
    this.#renewing = true
    const { gateway, logger, ttlMs } = this.#o
    try {
      const signal = AbortSignal.any([gateway.closed, AbortSignal.timeout(Math.max(1000, ttlMs))])
      const lease = this.#lease
      const unclaimed = this.#label !== undefined && !this.#claimed
      if (lease === undefined || unclaimed || (!this.#written && this.#value !== undefined)) {
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
        // Expired while cut off: the keys went with it, so a new lease and the summary again.
        logger?.warn(
          { store: gateway.describe(), lease },
          'etcd deploy store: the box summary lease expired; publishing again on a new one',
        )
        await this.#renewLease(signal)
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

  /** Stops renewing, revokes the lease and marks the kept summary gone (best effort). */
  async close(signal: AbortSignal): Promise<void> {
    this.#renewal?.()
    this.#renewal = undefined
    const lease = this.#lease
    this.#lease = undefined
    const label = this.#label
    const stopped = this.#stoppedPut()
    if (label !== undefined && !this.#lost) {
      // A clean stop is no takeover: the last holder goes with our label, if still ours.
      const txn = {
        compare: [{ key: label.holderKey, target: 'VALUE', result: 'EQUAL', value: label.value }],
        success: [{ request_delete_range: { key: label.holderKey } }, ...stopped],
        failure: [],
      }
      await this.#o.gateway.call('/v3/kv/txn', txn, TxnResponse, signal).catch(() => undefined)
    } else if (label === undefined && stopped.length > 0) {
      const txn = { compare: [], success: stopped, failure: [] }
      await this.#o.gateway.call('/v3/kv/txn', txn, TxnResponse, signal).catch(() => undefined)
    }
    if (lease === undefined) return
    await this.#o.gateway.call('/v3/lease/revoke', { ID: lease }, LeaseGrantResponse, signal).catch(() => undefined)
  }

  #stoppedPut(): Array<{ request_put: { key: string; value: string } }> {
    const v = this.#value
    if (v === undefined || this.#lost) return []
    const kept = JSON.parse(Buffer.from(v.kept.value, 'base64').toString('utf8')) as KeptBox
    const since = new Date(this.#o.clock.now()).toISOString()
    const value: KeptBox = { summary: kept.summary, gone: { since, how: 'stopped' } }
    return [{ request_put: { key: v.kept.key, value: b64(`${JSON.stringify(value)}\n`) } }]
  }

  /**
   * Every box etcd knows, sorted (design §7.3), read in one txn. A kept box with no live summary is gone; the
   * first reader to find it so marks it, guarded so a box that came back meanwhile is never marked.
   */
  async listKnown(signal: AbortSignal): Promise<KeptBox[]> {
    const { prefix, keptPrefix, gateway } = this.#o
    const range = (p: string) => ({ request_range: { key: b64(p), range_end: prefixEnd(p) } })
    const txn = { compare: [], success: [range(prefix), range(keptPrefix)], failure: [] }
    const { value } = await gateway.call('/v3/kv/txn', txn, TxnResponse, signal)
    const [liveRange, keptRange] = value.responses ?? []
    const live = new Map<string, BoxSummary>()
    for (const kv of liveRange?.response_range?.kvs ?? []) {
      const summary = this.#summaryOf(kv.key, kv.value)
      live.set(summary.box, summary)
    }
    const out = new Map<string, KeptBox>([...live].map(([box, summary]) => [box, { summary }]))
    const now = new Date(this.#o.clock.now()).toISOString()
    const marks: Array<Promise<void>> = []
    for (const kv of keptRange?.response_range?.kvs ?? []) {
      const kept = this.#keptOf(kv.key, kv.value)
      if (live.has(kept.summary.box)) continue
      if (kept.gone === undefined) {
        kept.gone = { since: now, how: 'expired' }
        marks.push(this.#markGone(kept, kv.mod_revision ?? '0', signal))
      }
      out.set(kept.summary.box, kept)
    }
    await Promise.all(marks)
    return [...out.values()].sort((a, b) =>
      a.summary.box < b.summary.box ? -1 : a.summary.box > b.summary.box ? 1 : 0,
    )
  }

  async #markGone(kept: KeptBox, modRevision: string, signal: AbortSignal): Promise<void> {
    const { prefix, keptPrefix, gateway, logger } = this.#o
    const box = kept.summary.box
    const key = b64(`${keptPrefix}${box}`)
    const txn = {
      compare: [
        { key, target: 'MOD', result: 'EQUAL', mod_revision: modRevision },
        { key: b64(`${prefix}${box}`), target: 'CREATE', result: 'EQUAL', create_revision: '0' },
      ],
      success: [{ request_put: { key, value: b64(`${JSON.stringify(kept)}\n`) } }],
      failure: [],
    }
    // A reader without write access still shows the box gone.
    await gateway.call('/v3/kv/txn', txn, TxnResponse, signal).catch((err: unknown) => {
      logger?.warn(
        { box, err },
        `etcd deploy store: box ${box} is gone; its mark was not written: ${errorMessage(err)}`,
      )
    })
  }

  /** `fleet forget`: removes a kept summary, guarded on the box not being live. */
  async forget(box: string, signal: AbortSignal): Promise<KeptBox> {
    const { prefix, keptPrefix, gateway } = this.#o
    const key = b64(`${keptPrefix}${box}`)
    const liveKey = b64(`${prefix}${box}`)
    const txn = {
      compare: [{ key: liveKey, target: 'CREATE', result: 'EQUAL', create_revision: '0' }],
      success: [{ request_range: { key } }, { request_delete_range: { key } }],
      failure: [{ request_range: { key: liveKey } }],
    }
    const { value } = await gateway.call('/v3/kv/txn', txn, TxnResponse, signal)
    if (value.succeeded !== true) throw errors.boxLive(box)
    const kv = value.responses?.[0]?.response_range?.kvs?.[0]
    if (kv === undefined) throw errors.unknownBoxToForget(box)
    return this.#keptOf(kv.key, kv.value)
  }

  #summaryOf(b64key: string, b64value: string | undefined): BoxSummary {
    const { prefix } = this.#o
    const key = Buffer.from(b64key, 'base64').toString('utf8')
    const parsed = parseJson(`box summary etcd ${key}`, b64value)
    if (!Value.Check(BoxSummary, parsed))
      throw new Error(`box summary etcd ${key}: not a box summary: ${schemaErrors(BoxSummary, parsed)}`)
    if (`${prefix}${parsed.box}` !== key)
      throw new Error(
        `box summary etcd ${key}: holds box ${JSON.stringify(parsed.box)}, so its key must be ${prefix}${parsed.box}`,
      )
    return parsed
  }

  #keptOf(b64key: string, b64value: string | undefined): KeptBox {
    const { keptPrefix } = this.#o
    const key = Buffer.from(b64key, 'base64').toString('utf8')
    const parsed = parseJson(`kept box summary etcd ${key}`, b64value)
    if (!Value.Check(KeptBox, parsed))
      throw new Error(`kept box summary etcd ${key}: not a kept summary: ${schemaErrors(KeptBox, parsed)}`)
    if (`${keptPrefix}${parsed.summary.box}` !== key)
      throw new Error(
        `kept box summary etcd ${key}: holds box ${JSON.stringify(parsed.summary.box)}, ` +
          `so its key must be ${keptPrefix}${parsed.summary.box}`,
      )
    return parsed
  }

  async list(signal: AbortSignal): Promise<BoxSummary[]> {
    const { prefix, gateway } = this.#o
    const { value } = await gateway.call(
      '/v3/kv/range',
      { key: b64(prefix), range_end: prefixEnd(prefix) },
      RangeResponse,
      signal,
    )
    const out = (value.kvs ?? []).map((kv) => this.#summaryOf(kv.key, kv.value))
    return out.sort((a, b) => (a.box < b.box ? -1 : a.box > b.box ? 1 : 0))
  }
}

function parseJson(what: string, b64value: string | undefined): unknown {
  try {
    return JSON.parse(utf8.decode(Buffer.from(b64value ?? '', 'base64')))
  } catch (err) {
    throw new Error(`${what}: not JSON: ${errorMessage(err)}`, { cause: err })
  }
}

function parseHolder(b64value: string | undefined): LabelHolder | undefined {
  if (b64value === undefined) return undefined
  try {
    const h = JSON.parse(Buffer.from(b64value, 'base64').toString('utf8')) as Partial<LabelHolder>
    if (typeof h.box !== 'string' || typeof h.pid !== 'number') return undefined
    return {
      box: h.box,
      dataRoot: String(h.dataRoot),
      pid: h.pid,
      host: String(h.host),
      since: String(h.since),
    }
  } catch {
    return undefined
  }
}

/** `pid 4242 on host web-01, data root /var/lib/layoutd, since 2026-…`. */
export function describeHolder(h: LabelHolder): string {
  return `pid ${h.pid} on host ${h.host}, data root ${h.dataRoot}, since ${h.since}`
}

/** etcd's answer to a write on a lease it no longer has. */
function leaseNotFound(err: unknown): boolean {
  return /requested lease not found/i.test(errorMessage(err))
}

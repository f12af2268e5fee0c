// The boxes' summaries and labels in etcd (design §7.3, §7.5): one lease
// per agent, kept alive a third of its TTL apart, carrying two small keys,
// <root>labels/<box> (who holds the label: box, data root, pid, host) and
// <root>boxes/<box> (the summary), so a box that dies leaves the live set
// when its lease expires. Beside it, unleased, <root>boxes-kept/<box> keeps
// the last summary, put in the same transaction (so only when the summary
// changes, never on a keep-alive), and since when the box is gone: marked by
// its agent at a clean stop, or by the first reader to find its lease
// expired. It stays until the box comes back or `fleet forget` removes it,
// so a dead box never vanishes from the fleet's view. A summary is put only while the label is on this agent's
// lease; a lease etcd no longer knows (the agent was cut off past its TTL)
// is granted again and the label taken again, unless another agent has it
// by then: this one then stops publishing and says so. This file owns the
// lease and the keys; the store hands it the gateway.
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
  /** The summaries' prefix, ending in `/`. */
  prefix: string
  /** The kept last summaries' prefix (unleased), ending in `/`. */
  keptPrefix: string
  /** The labels' prefix (leased keys, who holds each label now). */
  labelPrefix: string
  /** The last holders' prefix (kept until a clean stop: how a takeover is told). */
  holderPrefix: string
  ttlMs: number
  clock: Clock
  logger: Logger | undefined
}

/** A summary as put: its leased key and value, and its kept copy's. */
interface Published {
  key: string
  value: string
  kept: { key: string; value: string }
}

export class EtcdBoxes {
  readonly #o: EtcdBoxesOptions
  /** The lease this agent's summary lives on, once granted. */
  #lease: string | undefined
  /** The grant under way, which every caller shares (publish, renewal and claim may each need a lease). */
  #granting: Promise<string> | undefined
  /** The last summary put, put again on a new lease, and its kept copy (unleased). */
  #value: Published | undefined
  #renewal: (() => void) | undefined
  #renewing = false
  /** The last summary given is in etcd (its put succeeded). */
  #written = false
  /** The label this agent claimed, as its key holds it; undefined before claim (tests publish without one). */
  #label: { key: string; holderKey: string; value: string; holder: LabelHolder } | undefined
  /** The label is on this agent's lease (taken at start, or by a later renewal when etcd was away). */
  #claimed = false
  /** Another agent took the label while this one's lease had expired: nothing more is published. */
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
    // Renewals start whatever the put does: a failed one is put again by the next.
    this.#schedule()
    await this.#put(signal)
  }

  /**
   * Takes the label on this agent's lease (design §7.5), or throws `label_taken` naming the live holder. A
   * holder of the same data root on the same host is a previous run of this agent (the data root's lock
   * says it is gone): taken over at once, and said. A last holder whose lease expired is said too.
   */
  async claim(holder: LabelHolder, signal: AbortSignal): Promise<void> {
    const { labelPrefix, holderPrefix } = this.#o
    this.#label = {
      key: b64(`${labelPrefix}${holder.box}`),
      holderKey: b64(`${holderPrefix}${holder.box}`),
      value: b64(`${JSON.stringify(holder)}\n`),
      holder,
    }
    // Renewals start whatever the claim does: one that could not reach etcd is made by the next.
    this.#schedule()
    const other = await this.#claimNow(signal)
    if (other === undefined) return
    this.#renewal?.()
    this.#renewal = undefined
    throw errors.labelTaken(holder.box, describeHolder(other))
  }

  /**
   * Takes the label on this lease (granted first when there is none). Resolves to the live holder when
   * another agent holds it, else undefined (taken).
   */
  async #claimNow(signal: AbortSignal): Promise<LabelHolder | undefined> {
    const label = this.#label
    if (label === undefined) return undefined
    if (this.#lease === undefined) await this.#grantOnce(signal)
    const taken = await this.#take(signal)
    if (taken !== undefined) {
      const same = taken.dataRoot === label.holder.dataRoot && taken.host === label.holder.host
      if (!same) return taken
      // The data root's lock is ours, so that agent is gone: its lease has yet to expire.
      await this.#o.gateway.call('/v3/kv/deleterange', { key: label.key }, TxnResponse, signal)
      const again = await this.#take(signal)
      if (again !== undefined) return again
    }
    this.#claimed = true
    return undefined
  }

  /**
   * One transaction: the label put on this lease where no key holds it, and the last holder read and
   * replaced. Resolves to the live holder when another holds it (nothing written), else undefined.
   */
  async #take(signal: AbortSignal): Promise<LabelHolder | undefined> {
    const label = this.#label
    if (label === undefined) return undefined
    const { key, holderKey, value } = label
    const txn = {
      compare: [{ key, target: 'CREATE', result: 'EQUAL', create_revision: '0' }],
      success: [
        { request_range: { key: holderKey } },
        { request_put: { key, value, lease: this.#lease } },
        { request_put: { key: holderKey, value } },
      ],
      failure: [{ request_range: { key } }],
    }
    const { value: res } = await this.#o.gateway.call('/v3/kv/txn', txn, TxnResponse, signal)
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

  /**
   * Puts the summary on the lease, granting one first when there is none or etcd forgot it. With a label,
   * the put is a transaction that applies only while the label is on this lease.
   */
  async #put(signal: AbortSignal): Promise<void> {
    if (this.#lost) return
    if (this.#label !== undefined && !this.#claimed) {
      // etcd could not be reached when the agent started: the label is taken before any summary.
      const other = await this.#claimNow(signal)
      if (other !== undefined) return this.#lose(other)
    }
    const v = this.#value
    if (v === undefined) return
    if (this.#lease === undefined) await this.#grantOnce(signal)
    try {
      await this.#guardedPut(v, signal)
    } catch (err) {
      if (!/requested lease not found/i.test(errorMessage(err))) throw err
      await this.#renewLease(signal)
      await this.#guardedPut(v, signal)
    }
    if (this.#value === v) this.#written = true
  }

  async #guardedPut(v: Published, signal: AbortSignal): Promise<void> {
    // The kept copy goes with the summary, in one transaction: one write per change of the summary.
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
    // The label is not on this lease: it went with an expired lease, or another agent holds it.
    await this.#renewLease(signal)
    if (this.#lost) return
    const again = await this.#o.gateway.call('/v3/kv/txn', txn(), TxnResponse, signal)
    if (again.value.succeeded !== true) throw new Error(`the box label is not on this agent's lease after taking it`)
  }

  /** A new lease, and the label taken again on it; another agent holding it by then ends publishing. */
  async #renewLease(signal: AbortSignal): Promise<void> {
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

  /** Another agent holds the label now: nothing more is published, and that is said. */
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

  /**
   * A new lease, granted once for all who ask while it is under way: two grants at once would leave the
   * label or the summary on a lease that no renewal keeps alive (the other one wins #lease), and the live
   * box would leave the fleet when it expires.
   */
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

  /** The next renewal, a third of the TTL from now: two may fail before the summary goes. */
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

  /**
   * Stops renewing and revokes the lease (best effort): a box that stops cleanly leaves the live set at once,
   * its kept summary marked gone since now, stopped.
   */
  async close(signal: AbortSignal): Promise<void> {
    this.#renewal?.()
    this.#renewal = undefined
    const lease = this.#lease
    this.#lease = undefined
    const label = this.#label
    const stopped = this.#stoppedPut()
    if (label !== undefined && !this.#lost) {
      // A clean stop is no takeover: the last holder goes with this agent's label, if it is still ours.
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

  /** The put of the kept summary marked gone since now, stopped; none when nothing was published. */
  #stoppedPut(): Array<{ request_put: { key: string; value: string } }> {
    const v = this.#value
    if (v === undefined || this.#lost) return []
    const kept = JSON.parse(Buffer.from(v.kept.value, 'base64').toString('utf8')) as KeptBox
    const since = new Date(this.#o.clock.now()).toISOString()
    const value: KeptBox = { summary: kept.summary, gone: { since, how: 'stopped' } }
    return [{ request_put: { key: v.kept.key, value: b64(`${JSON.stringify(value)}\n`) } }]
  }

  /**
   * Every box etcd knows, sorted by label (design §7.3): the live summaries and the kept ones, read in one
   * transaction (one revision). A kept box with no live summary is gone: since when its kept copy says, or,
   * the first time a reader finds its lease expired, since now, marked (best effort: guarded on the kept
   * copy as read and the box still not live, so a box that came back meanwhile is never marked).
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

  /** Puts the gone mark on a kept summary while it is as read and its box not live; a failure is logged. */
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
    // A reader without write access still shows the box gone, since its own look.
    await gateway.call('/v3/kv/txn', txn, TxnResponse, signal).catch((err: unknown) => {
      logger?.warn(
        { box, err },
        `etcd deploy store: box ${box} is gone; its mark was not written: ${errorMessage(err)}`,
      )
    })
  }

  /**
   * Removes a gone box's kept summary (`fleet forget`), in one transaction guarded on the box not being live.
   * Throws `box_live` while it is, `unknown_box` when etcd knows no such box.
   */
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

  /** A live summary's key-value, checked; throws naming the key. */
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

  /** A kept summary's key-value, checked; throws naming the key. */
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

  /** Every live box's summary, sorted by label. A malformed one throws naming its key. */
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

/** A value as JSON; throws naming what it is when it is not. */
function parseJson(what: string, b64value: string | undefined): unknown {
  try {
    return JSON.parse(utf8.decode(Buffer.from(b64value ?? '', 'base64')))
  } catch (err) {
    throw new Error(`${what}: not JSON: ${errorMessage(err)}`, { cause: err })
  }
}

/** A label's holder as its key holds it (base64 JSON); undefined when it is not one. */
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

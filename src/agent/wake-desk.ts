// The wake desk (design §6): the activator's claims, releases and whole-set
// replacements, and the list of claims, each judged by the wake verdict;
// and the hosts' preparation slots, which a claim waits for while the
// host's instance key is being minted.
import type { WakeAnswer, WakeList, WakeSet } from '../agent-api.js'
import { AppError, errors } from '../errors.js'
import type { FenceTable } from '../domain/fence.js'
import { requireValidHost } from '../domain/hostname.js'
import { judgeWake, NO_ACTIVATOR, type WakeFacts, type WakeVerdict } from '../domain/wake-verdict.js'
import { HostSlots } from '../infra/instance-keys.js'
import type { WakeClaims } from '../infra/wake-claims.js'
import type { Metrics, WakeClaimResult } from '../metrics.js'

export interface WakeDeskDeps {
  claims: WakeClaims
  fence: FenceTable
  metrics: Metrics
  /** What the agent knows at this tick: its phase, the armed pass, the rows, the gate. */
  facts: () => WakeFacts
  /**
   * The registry's file is still the one it can serve claims from, or the
   * coded fault is thrown (src/infra/registry-watch.ts); and what a failed
   * registry call stands for (registry_busy, registry_full, registry_corrupt).
   */
  registry: { health(): void; coded(err: unknown): unknown }
}

export class WakeDesk {
  readonly #deps: WakeDeskDeps
  /** Each host's preparation slot: its instance key is minted in it, and a wake claim waits for it. */
  readonly slots = new HostSlots()

  constructor(deps: WakeDeskDeps) {
    this.#deps = deps
  }

  /** Claims a wake; every answer, and every throw, is counted in wake_claims_total by its result. */
  async claim(host: string): Promise<WakeAnswer> {
    try {
      // The host's preparation slot (its key being minted): a claim never
      // starts an instance whose key is half made.
      for (let busy = this.slots.busy(host); busy !== undefined; busy = this.slots.busy(host)) await busy
      // From here to the claim's record, one synchronous stretch: no fence
      // can be raised between the verdict, the fence check and the record.
      // No grant from a registry that was removed, replaced or corrupted.
      this.#deps.registry.health()
      const verdict = this.#judge(host)
      if (!verdict.ok) {
        this.#recordClaimMetric(verdict.kind)
        return { granted: false, refusal: verdict.refusal }
      }
      const admitted = this.#deps.fence.admit(host, () => this.#deps.claims.claim(host))
      if (!admitted.admitted) {
        this.#recordClaimMetric('fenced')
        return {
          granted: false,
          refusal: {
            host,
            layout: 'fenced',
            code: 'fenced_for_move',
            reason: `fenced: fenced for its move (generation ${admitted.generation})`,
          },
        }
      }
      this.#recordClaimMetric('granted')
      return { granted: true, grant: verdict.grant }
    } catch (err) {
      this.#recordClaimMetric(err instanceof AppError && err.code === 'invalid_host' ? 'unknown_host' : 'error')
      throw this.#deps.registry.coded(err)
    }
  }

  /** What a claim would get now, recording nothing. */
  readyFor(host: string): WakeAnswer {
    const verdict = this.#registryCall(() => {
      this.#deps.registry.health()
      return this.#judge(host)
    })
    return verdict.ok ? { granted: true, grant: verdict.grant } : { granted: false, refusal: verdict.refusal }
  }

  release(host: string): void {
    requireValidHost(host)
    this.#registryCall(() => this.#deps.claims.release(host))
  }

  /** fn, a failed registry call in it thrown as the coded error it stands for. */
  #registryCall<T>(fn: () => T): T {
    try {
      return fn()
    } catch (err) {
      throw this.#deps.registry.coded(err)
    }
  }

  /** The activator's whole awake set, recorded as it is; answers which of them must stop. */
  replace(awake: readonly string[]): WakeSet {
    const facts = this.#deps.facts()
    if (!facts.armed) throw errors.conflict(NO_ACTIVATOR)
    if (facts.phase !== 'ready') throw errors.notReady(facts.phase)
    for (const h of awake) requireValidHost(h)
    const hosts = [...new Set(awake)].sort()
    // Recorded as they are: a host the activator has awake is awake, and
    // the pass must not move its files whatever a claim for it would get.
    this.#registryCall(() => this.#deps.claims.replace(hosts))
    const stop: WakeSet['stop'] = []
    for (const h of hosts) {
      const verdict = this.#judge(h)
      if (!verdict.ok) stop.push({ host: h, code: verdict.refusal.code, reason: verdict.refusal.reason })
    }
    return { awake: this.#deps.claims.list(), stop }
  }

  list(): WakeList {
    return { awake: this.#deps.claims.list(), swept: this.#deps.claims.swept }
  }

  /**
   * The verdict for host, invalid_host thrown for a name that is not a
   * hostname. A host the registry holds was validated when its row was
   * added, so only a name the verdict did not find in the rows (unknown,
   * or not judged yet) is checked: the activator's hot path re-validates
   * nothing.
   */
  #judge(host: string): WakeVerdict {
    const verdict = judgeWake(host, this.#deps.facts())
    if (!verdict.ok && (verdict.kind === 'unknown_host' || verdict.kind === 'not_ready')) requireValidHost(host)
    return verdict
  }

  #recordClaimMetric(result: WakeClaimResult): void {
    this.#deps.metrics.wakeClaim(result)
  }
}

// The wake desk (design §6): the activator's claims, releases and awake
// sets, judged by the wake verdict, and the hosts' preparation slots a claim
// waits for while a key is minted.
import type { WakeAnswer, WakeList, WakeSet } from '../agent-api.js'
import { AppError, errors } from '../errors.js'
import type { FenceTable } from '../domain/fence.js'
import { requireValidHost } from '../domain/hostname.js'
import { activatorManaged } from '../domain/paths.js'
import { filesTarget, type FilesLook, type FilesTarget } from '../domain/row-files.js'
import { judgeWake, NO_ACTIVATOR, type FilesSeen, type WakeFacts, type WakeVerdict } from '../domain/wake-verdict.js'
import { HostSlots } from '../infra/instance-keys.js'
import type { WakeClaims } from '../infra/wake-claims.js'
import type { Metrics, WakeClaimResult } from '../metrics/metrics.js'

export interface WakeDeskDeps {
  claims: WakeClaims
  fence: FenceTable
  metrics: Metrics
  facts: () => WakeFacts
  /** health() throws unless the registry can serve claims; coded() maps an error to its code. */
  registry: { health(): void; coded(err: unknown): unknown }
  lookFiles: (target: FilesTarget) => FilesLook
  /** Each look here is kept there; `PUT /wakes` judges by them. */
  looks: { note(host: string, look: FilesLook): void; last(host: string): FilesLook | undefined }
}

export class WakeDesk {
  readonly #deps: WakeDeskDeps
  /** A host's instance key is minted in its slot, and a wake claim waits for it. */
  readonly slots = new HostSlots()

  constructor(deps: WakeDeskDeps) {
    this.#deps = deps
  }

  /** Every answer and throw is counted in wake_claims_total. */
  async claim(host: string): Promise<WakeAnswer> {
    try {
      // Never start an instance whose key is half made.
      for (let busy = this.slots.busy(host); busy !== undefined; busy = this.slots.busy(host)) await busy
      const look = this.#look(host)
      // One synchronous stretch to the record: no fence rises between verdict, check and record; and no
      // grant from a removed, replaced or corrupt registry.
      this.#deps.registry.health()
      const verdict = this.#judge(host, { look, fresh: true })
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

  /** What a claim would get now, recording nothing; throws what the registry's coded() makes of a failure. */
  readyNow(host: string): WakeAnswer {
    let verdict: WakeVerdict
    try {
      const look = this.#look(host)
      this.#deps.registry.health()
      verdict = this.#judge(host, { look, fresh: true })
    } catch (err) {
      throw this.#deps.registry.coded(err)
    }
    return verdict.ok ? { granted: true, grant: verdict.grant } : { granted: false, refusal: verdict.refusal }
  }

  release(host: string): void {
    requireValidHost(host)
    this.#registryCall(() => this.#deps.claims.release(host))
  }

  #registryCall<T>(fn: () => T): T {
    try {
      return fn()
    } catch (err) {
      throw this.#deps.registry.coded(err)
    }
  }

  /** In the verdict's synchronous stretch, so no move comes between; undefined when the verdict needs none. */
  #look(host: string): FilesLook | undefined {
    const target = this.#target(host)
    if (target === null) return undefined
    const look = this.#deps.lookFiles(target)
    this.#deps.looks.note(host, look)
    return look
  }

  #target(host: string): FilesTarget | null {
    const facts = this.#deps.facts()
    if (!facts.armed || facts.phase !== 'ready' || facts.pass === null) return null
    const route = facts.rows().byHost.get(host)
    if (route === undefined || !activatorManaged(route)) return null
    return filesTarget(facts.dirs, route)
  }

  /** Recorded as it is; answers which awake hosts must stop. */
  replace(awake: readonly string[]): WakeSet {
    const facts = this.#deps.facts()
    if (!facts.armed) throw errors.conflict(NO_ACTIVATOR)
    if (facts.phase !== 'ready') throw errors.notReady(facts.phase)
    for (const h of awake) requireValidHost(h)
    const hosts = [...new Set(awake)].sort()
    // An awake host is awake: the pass must not move it, whatever its verdict.
    this.#registryCall(() => this.#deps.claims.replace(hosts))
    const stop: WakeSet['stop'] = []
    for (const h of hosts) {
      // By the last looks: the set names every awake host at once.
      const verdict = this.#judge(h, { look: this.#deps.looks.last(h), fresh: false })
      if (!verdict.ok) stop.push({ host: h, code: verdict.refusal.code, reason: verdict.refusal.reason })
    }
    return { awake: this.#deps.claims.list(), stop }
  }

  list(): WakeList {
    return { awake: this.#deps.claims.list(), swept: this.#deps.claims.swept }
  }

  /** Only a name not in the rows is checked as a hostname: a row's was when added. */
  #judge(host: string, files: FilesSeen): WakeVerdict {
    const verdict = judgeWake(host, this.#deps.facts(), files)
    if (!verdict.ok && (verdict.kind === 'unknown_host' || verdict.kind === 'not_ready')) requireValidHost(host)
    return verdict
  }

  #recordClaimMetric(result: WakeClaimResult): void {
    this.#deps.metrics.wakeClaim(result)
  }
}

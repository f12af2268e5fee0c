// The wake desk (design §6): the activator's claims, releases and whole-set
// replacements, and the list of claims, each judged by the wake verdict;
// and the hosts' preparation slots, which a claim waits for while the
// host's instance key is being minted. A claim, and what a claim would get
// (`/ready/:host`, `/gate`), first looks at the row's files (two async
// lstats, design §6.1), then judges in one synchronous stretch.
import type { WakeAnswer, WakeList, WakeSet } from '../agent-api.js'
import { AppError, errors } from '../errors.js'
import type { FenceTable } from '../domain/fence.js'
import { requireValidHost } from '../domain/hostname.js'
import { activatorManaged } from '../domain/paths.js'
import { filesTarget, lookFits, type FilesLook, type FilesTarget } from '../domain/row-files.js'
import { judgeWake, NO_ACTIVATOR, type FilesSeen, type WakeFacts, type WakeVerdict } from '../domain/wake-verdict.js'
import { HostSlots } from '../infra/instance-keys.js'
import type { WakeClaims } from '../infra/wake-claims.js'
import type { Metrics, WakeClaimResult } from '../metrics/metrics.js'

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
  /** Looks at a row's files now (src/infra/row-files.ts). */
  lookFiles: (target: FilesTarget) => Promise<FilesLook>
  /** The agent's last looks: each look taken here is kept there, and `PUT /wakes` judges by them. */
  looks: { note(host: string, look: FilesLook): void; last(host: string): FilesLook | undefined }
}

/**
 * How many times a wake looks at a row's files before it judges: a look is
 * taken again when the row was rewritten while it looked (a move
 * committed), and a row rewritten under every look is not yet judged.
 */
const LOOKS = 3

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
      const look = await this.#look(host)
      // From here to the claim's record, one synchronous stretch: no fence
      // can be raised between the verdict, the fence check and the record.
      // No grant from a registry that was removed, replaced or corrupted.
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

  /** What a claim would get now, recording nothing. */
  async readyFor(host: string): Promise<WakeAnswer> {
    let verdict: WakeVerdict
    try {
      const look = await this.#look(host)
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

  /** fn, a failed registry call in it thrown as the coded error it stands for. */
  #registryCall<T>(fn: () => T): T {
    try {
      return fn()
    } catch (err) {
      throw this.#deps.registry.coded(err)
    }
  }

  /**
   * A look at host's files at its row's paths now, taken again while the
   * row is rewritten under it (LOOKS in all); undefined when the verdict
   * will not need one (not ready, no such row, not a flat or nested one).
   */
  async #look(host: string): Promise<FilesLook | undefined> {
    let look: FilesLook | undefined
    for (let i = 0; i < LOOKS; i++) {
      const target = this.#target(host)
      if (target === null) return undefined
      if (look !== undefined && lookFits(look, target)) return look
      look = await this.#deps.lookFiles(target)
      this.#deps.looks.note(host, look)
    }
    return look
  }

  /** Where host's files are looked at for a wake now, or null when its verdict goes by none. */
  #target(host: string): FilesTarget | null {
    const facts = this.#deps.facts()
    if (!facts.armed || facts.phase !== 'ready' || facts.pass === null) return null
    const route = facts.rows().byHost.get(host)
    if (route === undefined || !activatorManaged(route)) return null
    return filesTarget(facts.dirs, route)
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
      // Judged by the agent's last look at each host's files: the set names every awake host at once.
      const verdict = this.#judge(h, { look: this.#deps.looks.last(h), fresh: false })
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
  #judge(host: string, files: FilesSeen): WakeVerdict {
    const verdict = judgeWake(host, this.#deps.facts(), files)
    if (!verdict.ok && (verdict.kind === 'unknown_host' || verdict.kind === 'not_ready')) requireValidHost(host)
    return verdict
  }

  #recordClaimMetric(result: WakeClaimResult): void {
    this.#deps.metrics.wakeClaim(result)
  }
}

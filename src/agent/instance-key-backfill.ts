// The instance keys (design §4.5): at start every activator-managed tenant
// without one; at the head of each run of the leg, the rows added since and
// the hosts that got none last time.
import { errorMessage } from '../errors.js'
import { hostError } from '../domain/hostname.js'
import { activatorManaged, type Dirs } from '../domain/paths.js'
import type { LayoutPass, Logger } from '../domain/ports.js'
import type { Route } from '../domain/schemas.js'
import { backfillInstanceKeys, type BackfillCounts, type HostSlots } from '../infra/instance-keys.js'
import type { Registry } from '../infra/registry.js'
import { sameRowsCarried } from '../infra/rows-snapshot.js'

export interface KeyBackfillDeps {
  config: Dirs
  registry: Pick<Registry, 'get' | 'snapshot' | 'addedAfter'>
  pass: Pick<LayoutPass, 'classify'>
  slots: HostSlots
  logger: Logger
  signal: AbortSignal
}

/** The activator's to wake, with a directory, of a valid host. */
function wantsKey(r: Route): boolean {
  return activatorManaged(r) && r.dir !== '' && hostError(r.host) === null
}

/**
 * Between runs only rows newer than the newest seen are looked at (a re-added host is new too); a keyless
 * host is tried each run, its reason said once.
 */
export class InstanceKeys {
  readonly #deps: KeyBackfillDeps
  /** Hosts that got no key last time, with why. */
  readonly #again = new Map<string, string>()
  #looked: readonly Route[] | undefined
  #hosts: ReadonlySet<string> = new Set()
  #newest = ''

  constructor(deps: KeyBackfillDeps) {
    this.#deps = deps
  }

  /** At start (design §4.4 step 7). */
  atStart(): Promise<void> {
    return this.#backfill('at start')
  }

  sinceLastLook(): Promise<void> {
    return this.#backfill('since the last look')
  }

  async #backfill(when: string): Promise<void> {
    const { logger } = this.#deps
    let hosts: string[]
    try {
      hosts = this.#candidates()
    } catch (err) {
      logger.error({ err }, `agent: instance keys: list routes: ${errorMessage(err)} (the next run tries again)`)
      return
    }
    if (hosts.length === 0) return
    let told = 0
    const counts = await backfillInstanceKeys({
      hosts,
      root: this.#deps.config.dataDir,
      slots: this.#deps.slots,
      target: (host) => this.#target(host),
      logger,
      signal: this.#deps.signal,
      toldAlready: (host, reason) => {
        const already = this.#again.get(host) === reason
        if (!already) told++
        return already
      },
      settled: (host, kind, reason) => {
        if (kind === 'skipped' || kind === 'failed') this.#again.set(host, reason)
        else this.#again.delete(host)
      },
    })
    if (counts.minted + told > 0) this.#sum(counts, when)
  }

  /** First every row that wants a key, then new rows and earlier failures. */
  #candidates(): string[] {
    const { registry } = this.#deps
    const snapshot = registry.snapshot()
    const routes = snapshot.routes
    const fresh = new Set(this.#again.keys())
    // The same list (the pass only rewrote rows): no rescan.
    if (sameRowsCarried(routes, this.#looked)) this.#looked = routes
    else if (routes !== this.#looked) {
      const first = this.#looked === undefined
      for (const added of registry.addedAfter(first ? '' : this.#newest)) {
        if (added.createdAt > this.#newest) this.#newest = added.createdAt
        if (!first) fresh.add(added.host)
      }
      for (const r of routes) if (first || !this.#hosts.has(r.host)) fresh.add(r.host)
      this.#hosts = new Set(routes.map((r) => r.host))
      this.#looked = routes
    }
    const hosts: string[] = []
    for (const host of fresh) {
      const row = snapshot.byHost.get(host)
      if (row !== undefined && wantsKey(row)) hosts.push(host)
      else this.#again.delete(host)
    }
    return hosts
  }

  /** Read again in the host's slot: the row may have changed since the list. */
  #target(host: string): { dir: string } | { skip: string } {
    const { registry, pass } = this.#deps
    const route = registry.get(host)
    if (route === undefined || !wantsKey(route)) return { skip: 'no longer an activator-managed row with a directory' }
    const { layout, reason } = pass.classify(route, registry.snapshot().routes)
    // Keys go only into flat or nested rows (design §4.5): another's directory is not surely its own.
    if (layout !== 'flat' && layout !== 'nested') return { skip: `${layout}: ${reason}` }
    return { dir: route.dir }
  }

  #sum(counts: BackfillCounts, when: string): void {
    this.#deps.logger.info(
      { ...counts, when },
      `agent: instance keys ${when}: ${counts.minted} minted, ${counts.present} present, ` +
        `${counts.skipped} skipped, ${counts.failed} failed`,
    )
  }
}

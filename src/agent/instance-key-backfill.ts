// The instance keys (design §4.5): at start every activator-managed tenant
// without one; at the head of each run of the leg, the rows added since and
// the hosts that got none last time. Minting is src/infra/instance-keys.ts.
import { errorMessage } from '../errors.js'
import { hostError } from '../domain/hostname.js'
import { activatorManaged, type Dirs } from '../domain/paths.js'
import type { LayoutPass, Logger } from '../domain/ports.js'
import type { Route } from '../domain/schemas.js'
import { backfillInstanceKeys, type BackfillCounts, type HostSlots } from '../infra/instance-keys.js'
import type { Registry } from '../infra/registry.js'
import { sameRowsCarried } from '../infra/rows-snapshot.js'

export interface KeyBackfillDeps {
  /** The data root: a key goes only into a row's flat or nested directory under it. */
  config: Dirs
  registry: Pick<Registry, 'get' | 'snapshot' | 'addedAfter'>
  pass: Pick<LayoutPass, 'classify'>
  slots: HostSlots
  logger: Logger
  signal: AbortSignal
}

/** A row that gets a key when it has none: the activator's to wake, with a directory, of a valid host. */
function wantsKey(r: Route): boolean {
  return activatorManaged(r) && r.dir !== '' && hostError(r.host) === null
}

/**
 * The agent's instance keys. Every backfill runs before the leg moves
 * anything, so no key is written into a directory the pass renames; a wake
 * claim waits only for its own host's mint. Between runs only rows new since
 * the newest seen are looked at (a host removed and re-added is new too);
 * a host that got no key is tried again each run, its reason said once.
 */
export class InstanceKeys {
  readonly #deps: KeyBackfillDeps
  /** Hosts that got no key the last time they were tried, with why: tried again at the next run. */
  readonly #again = new Map<string, string>()
  /** The list of rows last looked at, and its hosts. */
  #looked: readonly Route[] | undefined
  #hosts: ReadonlySet<string> = new Set()
  /** The newest created_at among the rows looked at. */
  #newest = ''

  constructor(deps: KeyBackfillDeps) {
    this.#deps = deps
  }

  /** Every activator-managed tenant without a key (design §4.4 step 7); a failure is logged and retried next run. */
  atStart(): Promise<void> {
    return this.#backfill('at start')
  }

  /** The rows added since the last look, and the hosts that got no key then (the head of each run of the leg). */
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

  /** The hosts to try now: first every row that wants a key, then new rows and earlier failures. */
  #candidates(): string[] {
    const { registry } = this.#deps
    const snapshot = registry.snapshot()
    const routes = snapshot.routes
    const fresh = new Set(this.#again.keys())
    // The same list as last time (the pass only rewrote rows): no rescan of the registry.
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
    // Keys go only into directories the pass manages (design §4.5): flat or
    // nested rows. A fenced, conflicting or foreign row's directory is not
    // surely its own, nor surely under the data root.
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

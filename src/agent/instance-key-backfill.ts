// The instance keys (design §4.5): at start, after the activator may wake,
// every activator-managed tenant without one; then, at the head of each run
// of the leg, before it moves anything, the rows added since the last look
// (`routes add`, `routes import` beside the running agent) and the hosts
// that got none the last time. Which hosts get a key is read again in each
// host's preparation slot; the minting itself is src/infra/instance-keys.ts.
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
 * The agent's instance keys. The leg waits for the start's backfill before
 * its first run, and runs each later backfill itself before it moves
 * anything, so no key is ever written into a directory the pass is
 * renaming; a wake claim for a host waits only for that host's own mint.
 *
 * Between runs only what is new is looked at, never the registry's every
 * directory: a list of rows the agent has not looked at yet (the registry
 * answers the same list while nothing changed) is compared with the last by
 * host, and the registry names the rows added since the newest it had seen
 * (so a host removed and added again, with a new directory, is new too).
 * A host that got no key (fenced, conflict, foreign, or a failure) is tried
 * again each run, its reason said once.
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

  /**
   * Every activator-managed tenant without a key (design §4.4 step 7). A
   * failure is logged: the next run tries again.
   */
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

  /**
   * The hosts to try now: at the first look every row that wants a key;
   * then the rows new since the last look, and those tried before in vain.
   * A host whose row no longer wants a key is forgotten.
   */
  #candidates(): string[] {
    const { registry } = this.#deps
    const snapshot = registry.snapshot()
    const routes = snapshot.routes
    const fresh = new Set(this.#again.keys())
    // A list carried over the pass's own rewrites has the rows looked at
    // before, and no other: after a converge of 10,000 rows, no scan of the
    // registry and no set of its hosts made again for a row it did not add.
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
    // Keys go only into directories the pass manages (design §4.5): a row
    // classified flat or nested has its dir exactly at its host's path
    // under the data root. A fenced host's files may be between two
    // directories, a conflicting row's directory is not its own alone, and
    // a foreign row's may be anywhere at all, outside the data root too.
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

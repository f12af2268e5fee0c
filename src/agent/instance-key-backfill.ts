// The instance keys at start (design §4: after the activator may wake):
// which hosts get a key, read again in each host's preparation slot, and
// the one log line that sums the backfill up. The minting itself is
// src/infra/instance-keys.ts.
import { errorMessage } from '../errors.js'
import { hostError } from '../domain/hostname.js'
import { activatorManaged, type Dirs } from '../domain/paths.js'
import type { LayoutPass, Logger } from '../domain/ports.js'
import { backfillInstanceKeys, type HostSlots } from '../infra/instance-keys.js'
import type { Registry } from '../infra/registry.js'

export interface KeyBackfillDeps {
  /** The data root: a key goes only into a row's flat or nested directory under it. */
  config: Dirs
  registry: Pick<Registry, 'get' | 'snapshot'>
  pass: Pick<LayoutPass, 'classify'>
  slots: HostSlots
  logger: Logger
  signal: AbortSignal
}

/**
 * Gives every activator-managed tenant without an instance key its key.
 * The leg waits for this before its first run, so no key is ever written
 * into a directory the pass is renaming; a wake claim for a host waits
 * only for that host's own mint. A failure is logged: each host's next
 * start mints its key.
 */
export async function backfillKeysAtStart(deps: KeyBackfillDeps): Promise<void> {
  const { registry, pass, logger } = deps
  let hosts: string[]
  try {
    hosts = registry
      .snapshot()
      .routes.filter((r) => activatorManaged(r) && r.dir !== '' && hostError(r.host) === null)
      .map((r) => r.host)
  } catch (err) {
    logger.error(
      { err },
      `agent: instance keys: list routes: ${errorMessage(err)} (each host's next start mints its key)`,
    )
    return
  }
  const counts = await backfillInstanceKeys({
    hosts,
    root: deps.config.dataDir,
    slots: deps.slots,
    target: (host) => {
      // Read again in the slot: the row may have changed since the list.
      const route = registry.get(host)
      if (route === undefined || !activatorManaged(route) || route.dir === '')
        return { skip: 'no longer an activator-managed row with a directory' }
      const { layout, reason } = pass.classify(route, registry.snapshot().routes)
      // Keys go only into directories the pass manages (design §4.5): a row
      // classified flat or nested has its dir exactly at its host's path
      // under the data root. A fenced host's files may be between two
      // directories, a conflicting row's directory is not its own alone, and
      // a foreign row's may be anywhere at all, outside the data root too.
      if (layout !== 'flat' && layout !== 'nested') return { skip: `${layout}: ${reason}` }
      return { dir: route.dir }
    },
    logger,
    signal: deps.signal,
  })
  if (counts.minted + counts.skipped + counts.failed > 0) {
    logger.info(
      { ...counts },
      `agent: instance keys: ${counts.minted} minted, ${counts.present} present, ` +
        `${counts.skipped} skipped, ${counts.failed} failed`,
    )
  }
}

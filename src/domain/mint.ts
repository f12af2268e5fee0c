// The mint rule (design §5.5): the mode a new row is minted in. It reads the
// intent as the leg does, so a mint and a pass agree.
import { errorMessage, errors } from '../errors.js'
import type { DefaultInputs } from './layout-default.js'
import { defaultLayoutIntent, nestedByDefault } from './layout-default.js'
import { INTENT_TIMEOUT_MS, loadLayoutIntent, type IntentRead } from './intent.js'
import { validMode, type Mode } from './modes.js'
import { activatorManaged, isNested, type Dirs } from './paths.js'
import type { DeployStore } from './ports.js'
import type { Route } from './schemas.js'

export interface MintDeps extends DefaultInputs {
  store: DeployStore
  box: string
  dirs: Dirs
  routes?: () => readonly Route[] | Promise<readonly Route[]>
  timeoutMs?: number
}

export function nestedRowsPresent(dirs: Dirs, rows: readonly Route[]): boolean {
  return rows.some((route) => activatorManaged(route) && isNested(dirs, route))
}

/**
 * An unreadable intent throws: minting flat where the fleet may want nested is the exposure nesting ends.
 * A box already moved mints nested before the gate answers, which still guards every wake.
 */
export async function mintLayoutIntentWith(deps: MintDeps, signal?: AbortSignal): Promise<Mode> {
  let read: IntentRead
  try {
    read = await loadLayoutIntent(deps.store, deps.box, signal, deps.timeoutMs ?? INTENT_TIMEOUT_MS)
  } catch (err) {
    throw errors.intentUnreadable(errorMessage(err))
  }
  if (read.found) {
    const { id, mode } = read.intent
    if (!validMode(mode)) {
      throw errors.intentUnreadable(
        `layout intent ${id} names mode ${JSON.stringify(mode)}, which this build does not know`,
      )
    }
    return mode
  }
  if (defaultLayoutIntent(deps).mode === 'nested') return 'nested'
  if (nestedByDefault(deps.layoutDefault) && deps.routes !== undefined) {
    let rows: readonly Route[]
    try {
      rows = await deps.routes()
    } catch (err) {
      throw new Error(`layout default: list routes: ${errorMessage(err)}`, { cause: err })
    }
    if (nestedRowsPresent(deps.dirs, rows)) return 'nested'
  }
  return 'flat'
}

export interface FoundAt {
  path: string
  /** A directory, not a symlink to one. */
  directory: boolean
  what: string
}

/** null: nothing there. */
export interface HostFiles {
  flat: FoundAt | null
  nested: FoundAt | null
}

export interface HostMint {
  mode: Mode
  found: Mode | 'none'
}

/** Where the files already are, else mode: a row in the other shape would hand a wake an empty directory. */
export function mintWhereFilesAre(host: string, mode: Mode, files: HostFiles): HostMint {
  const { flat, nested } = files
  if (flat !== null && nested !== null) throw errors.mintBothShapes(host, flat.path, nested.path)
  const at = flat ?? nested
  if (at === null) return { mode, found: 'none' }
  if (!at.directory) throw errors.mintNotDirectory(host, at.path, at.what)
  const found = flat === null ? 'nested' : 'flat'
  return { mode: found, found }
}

// The mint rule (design §5.5): the mode a new row is minted in, which
// `GET /layout/mint` answers and `layoutd routes add` uses. It makes the
// same read the leg makes, so a mint and a pass agree; a host whose files
// already sit in one shape is minted in that one (the looking is infra's).
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
  /** This box's label. */
  box: string
  dirs: Dirs
  /** The box's registry rows; absent when there is no registry to ask. */
  routes?: () => readonly Route[] | Promise<readonly Route[]>
  /** The intent read timeout; default 30 s. */
  timeoutMs?: number
}

/** Whether any activator-managed row is already at the nested paths (the box has evidently moved). */
export function nestedRowsPresent(dirs: Dirs, rows: readonly Route[]): boolean {
  return rows.some((route) => activatorManaged(route) && isNested(dirs, route))
}

/**
 * The mode of the intent addressing this box, else the default's, else flat.
 * An unreadable intent throws `intent_unreadable`: minting flat on a box the
 * fleet may want nested is the exposure nesting ends. With the default
 * nested and a managed row already nested, it mints nested before the gate
 * answers (the box has moved); the gate still guards every wake.
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

/** Something found at one of a host's dirs: its path, whether it is a real directory, and what it is. */
export interface FoundAt {
  path: string
  /** A directory, not a symlink to one. */
  directory: boolean
  /** What it is, for a message (`a directory`, `a symlink`, `a regular file`). */
  what: string
}

/**
 * What is at a host's flat dir and at its nested one (its nested root,
 * when that is not a directory); null: nothing.
 */
export interface HostFiles {
  flat: FoundAt | null
  nested: FoundAt | null
}

/** The mode a host's row is minted in, and the shape its files were found in (`none`: nowhere). */
export interface HostMint {
  mode: Mode
  found: Mode | 'none'
}

/**
 * The mode a row for this host is minted in (design §5.5): where its files
 * already sit, that shape, whatever the rule answers; the pass then moves
 * them to the intent's shape as any other row's, journaled and fenced. A
 * row minted in the other shape would name an empty directory beside the
 * real one, and a wake would hand the tenant that. With nothing at either
 * dir, the rule's mode. Something at both, or something that is not a real
 * directory, is for an operator to settle: refused, naming what was found.
 */
export function mintWhereFilesAre(host: string, mode: Mode, files: HostFiles): HostMint {
  const { flat, nested } = files
  if (flat !== null && nested !== null) throw errors.mintBothShapes(host, flat.path, nested.path)
  const at = flat ?? nested
  if (at === null) return { mode, found: 'none' }
  if (!at.directory) throw errors.mintNotDirectory(host, at.path, at.what)
  const found = flat === null ? 'nested' : 'flat'
  return { mode: found, found }
}

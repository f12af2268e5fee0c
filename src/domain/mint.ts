// The mint rule (design §5.5): the mode a new row is minted in, which
// `GET /layout/mint` answers and `layoutd routes add` uses. It makes the
// same read the leg makes, so a mint and a pass agree.
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
 * The mode of the intent addressing this box; with none recorded, the
 * default's answer, and flat when the default does not apply. An unreadable
 * intent throws the `intent_unreadable` AppError: minting flat on a box the
 * fleet may want nested would make the very exposure nesting exists to end,
 * so the caller defers its mint instead.
 *
 * With no intent and the deployment's default nested, a box whose registry
 * already holds an activator-managed row at the nested paths mints nested
 * even while the gate has not answered (the first mint after a restart can
 * come before the isolation probe's first verdict): the box has evidently
 * moved, and a flat row beside nested siblings is the exposure the default
 * exists to end. The gate still guards every wake, so a row minted this way
 * waits for it.
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

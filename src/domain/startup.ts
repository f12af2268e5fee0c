// The intent start-up recovery runs under, fail-closed (design §4.4,
// §5.3). The activator's start waits on it, so it reads only when there is
// something to recover.
import { errorMessage } from '../errors.js'
import type { DefaultInputs } from './layout-default.js'
import { defaultLayoutIntent, nestedByDefault } from './layout-default.js'
import { INTENT_TIMEOUT_MS, loadLayoutIntent, type IntentRead } from './intent.js'
import type { IntentState } from './intent-state.js'
import { validMode, type IntentMode } from './modes.js'
import type { DeployStore, LayoutDirectory, Logger } from './ports.js'

export interface StartupDeps extends DefaultInputs {
  layoutDir: LayoutDirectory
  /** The caller's: never closed here. */
  openStore: (signal: AbortSignal) => Promise<DeployStore>
  box: string
  state: IntentState
  logger: Logger
  timeoutMs?: number
  signal?: AbortSignal
}

export type OpenedStore = { ok: true; store: DeployStore } | { ok: false; error: unknown }

/** `none`, unread, with no journal or hold to recover. */
export async function startupRecoveryIntent(deps: StartupDeps): Promise<IntentMode> {
  const [journals, holds] = await Promise.allSettled([deps.layoutDir.journalHosts(), deps.layoutDir.holdHosts()])
  if (
    journals.status === 'fulfilled' &&
    holds.status === 'fulfilled' &&
    journals.value.length === 0 &&
    holds.value.length === 0
  ) {
    return 'none'
  }
  if (holds.status === 'rejected') {
    const err = errorMessage(holds.reason)
    deps.logger.info({ err: holds.reason }, `layout: list hold markers at start: ${err}; reading the intent anyway`)
  }
  if (journals.status === 'rejected') {
    const err = errorMessage(journals.reason)
    deps.logger.info({ err: journals.reason }, `layout: list journals at start: ${err}; reading the intent anyway`)
  }
  const timeoutMs = deps.timeoutMs ?? INTENT_TIMEOUT_MS
  const timeout = AbortSignal.timeout(timeoutMs)
  const signal = deps.signal ? AbortSignal.any([deps.signal, timeout]) : timeout
  let opened: OpenedStore
  try {
    opened = { ok: true, store: await deps.openStore(signal) }
  } catch (error) {
    opened = { ok: false, error }
  }
  return startupLayoutIntent({ ...deps, signal, timeoutMs }, opened)
}

/** Unsure is `unreadable`: recovery then keeps a revert fenced, not flat where the fleet may want nested. */
export async function startupLayoutIntent(
  deps: Pick<StartupDeps, 'box' | 'state' | 'logger' | 'timeoutMs' | 'signal'> & DefaultInputs,
  opened: OpenedStore,
): Promise<IntentMode> {
  const { logger, state } = deps
  if (!opened.ok) {
    const err = errorMessage(opened.error)
    logger.warn({ intent: 'unreadable', err }, `layout: intent -> unreadable: deploy store: ${err}`)
    state.noteIntent('unreadable', `deploy store: ${err}`)
    return 'unreadable'
  }
  let read: IntentRead
  try {
    read = await loadLayoutIntent(opened.store, deps.box, deps.signal, deps.timeoutMs ?? INTENT_TIMEOUT_MS)
  } catch (error) {
    const err = errorMessage(error)
    logger.warn({ intent: 'unreadable', err }, `layout: intent -> unreadable: ${err}`)
    state.noteIntent('unreadable', err)
    return 'unreadable'
  }
  if (!read.found) {
    // The gate has not answered at start, and `none` would drop every hold: recover fail-closed.
    if (nestedByDefault(deps.layoutDefault)) {
      logger.info(
        { intent: 'unreadable', default: 'nested' },
        'layout: no intent recorded at start -> holds and journals kept ' +
          'until the first serial move asks the isolation gate (nested by default)',
      )
      state.noteDefault(
        'none',
        'agent starting: holds and journals kept until the first serial move asks the isolation gate',
        'starting',
      )
      return 'unreadable'
    }
    const d = defaultLayoutIntent(deps)
    state.noteDefault(d.mode, d.reason, d.by)
    return d.mode
  }
  const { id, mode } = read.intent
  if (!validMode(mode)) {
    const why = `intent ${id} names mode ${JSON.stringify(mode)}, which is not flat or nested`
    logger.warn(
      { intent: 'unreadable', id, mode },
      `layout: intent ${id} -> unreadable: mode ${JSON.stringify(mode)} is not flat or nested`,
    )
    state.noteIntent('unreadable', why)
    return 'unreadable'
  }
  state.noteIntent(mode)
  return mode
}

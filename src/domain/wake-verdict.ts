// The wake verdict (design §6): what a claim for a host gets now, granted
// with its paths or refused with the reason, and the kind of refusal the
// claim metric counts. No I/O: the agent hands in what it knows at this
// tick (its phase, the armed pass, the rows, the isolation gate) and what
// a look at the row's files found.
import { activatorManaged, external, type Dirs } from './paths.js'
import type { IsolationGate, LayoutPass, RowsSnapshot } from './ports.js'
import { heldDown } from './fence.js'
import { why, type ReasonCode, type Why } from './reason-codes.js'
import { filesTarget, filesWhy, lookFits, type FilesLook } from './row-files.js'
import type { Route } from './schemas.js'

export const NO_ACTIVATOR = 'no activator is armed on this box (CARLOS_ACTIVATOR=none): nothing wakes through layoutd'

/** How a refusal is counted (the claim metric's result label). */
export const WAKE_REFUSAL_KINDS = [
  'fenced',
  'held',
  'conflict',
  'not_ready',
  'gate_shut',
  'unknown_host',
  'files',
] as const
export type WakeRefusalKind = (typeof WAKE_REFUSAL_KINDS)[number]

export interface WakeGrantPaths {
  host: string
  layout: string
  dir: string
  socket: string
  db: string
}

export interface WakeRefusalReason {
  host: string
  layout: string
  code: ReasonCode
  reason: string
}

export type WakeVerdict =
  { ok: true; grant: WakeGrantPaths } | { ok: false; refusal: WakeRefusalReason; kind: WakeRefusalKind }

export interface WakeFacts {
  /** An activator is armed on this box (CARLOS_ACTIVATOR is not `none`). */
  armed: boolean
  /** Where the agent is in its life; claims are judged only once it is `ready`. */
  phase: string
  /** The armed pass; null until start-up recovery has published it. */
  pass: Pick<LayoutPass, 'classify' | 'held'> | null
  /** The registry's rows now; read only once the agent is ready to judge. */
  rows: () => RowsSnapshot
  /** The isolation gate; null where no activator is armed. */
  gate: IsolationGate | null
  /** The data and run dirs, which place the row's shapes. */
  dirs: Dirs
}

function refused(host: string, layout: string, because: Why, kind: WakeRefusalKind): WakeVerdict {
  return { ok: false, refusal: { host, layout, code: because.code, reason: because.reason }, kind }
}

/** A refusal that says what stood in the way, before the row's own reason. */
function prefixed(prefix: string, c: { code: ReasonCode | ''; reason: string }, fallback: ReasonCode): Why {
  return why(c.code === '' ? fallback : c.code, `${prefix}: ${c.reason}`)
}

/** Why a row the activator does not manage is not its to wake. */
export function unmanagedReason(route: Route): string {
  if (route.kind !== 'instance') return `a ${route.kind} row is not the activator's to wake`
  if (route.socket === '') return 'the row has no socket'
  return 'the row does not hibernate: another supervisor runs it'
}

/** What the caller knows of a row's files (design §6.1). */
export interface FilesSeen {
  /** What a look at the row's files found; undefined when none was taken at its paths. */
  look: FilesLook | undefined
  /**
   * The look was taken for this verdict (a claim, `/ready/:host`, `/gate`): a row it does not fit (rewritten
   * while it was looked at) is not judged yet. False: the agent's last look at the host (the set of
   * `PUT /wakes`), which refuses only where it fits.
   */
  fresh: boolean
}

/** Why a flat or nested row may not wake by its files, or null when they are where it says. */
function filesRefusal(route: Route, dirs: Dirs, seen: FilesSeen): Why | null {
  const target = filesTarget(dirs, route)
  if (target === null) return null
  const { look } = seen
  if (look === undefined || !lookFits(look, target))
    return seen.fresh ? why('fenced_for_move', 'fenced: its paths changed while its files were looked at') : null
  return filesWhy(look)
}

/**
 * What a claim for host gets now, unrecorded: refused when the agent cannot
 * say, for a row it does not manage, for words that do not wake (design §1),
 * files not where the row says, and nested while the gate is shut. Flat and
 * foreign rows wake whatever the gate says.
 */
export function judgeWake(host: string, facts: WakeFacts, files: FilesSeen): WakeVerdict {
  if (!facts.armed) return refused(host, 'unmanaged', why('no_activator', NO_ACTIVATOR), 'not_ready')
  const pass = facts.pass
  if (facts.phase !== 'ready' || pass === null)
    return refused(host, 'unknown', why('not_ready', `not ready: layoutd is ${facts.phase}`), 'not_ready')
  const { routes, byHost } = facts.rows()
  const route = byHost.get(host)
  if (route === undefined)
    return refused(host, 'unknown', why('unknown_host', `unknown host: ${host} is not in the registry`), 'unknown_host')
  const notManaged = why('not_managed', `not activator-managed: ${unmanagedReason(route)}`)
  if (!activatorManaged(route))
    return refused(host, external(route) ? 'external' : 'unmanaged', notManaged, 'unknown_host')
  const classified = pass.classify(route, routes)
  const { layout } = classified
  const held = pass.held(host)
  if (held !== undefined)
    return refused(
      host,
      'fenced',
      layout === 'fenced'
        ? why(classified.code === '' ? held.code : classified.code, classified.reason)
        : heldDown(held),
      'held',
    )
  switch (layout) {
    case 'fenced':
      return refused(host, layout, prefixed('fenced', classified, 'fenced_for_move'), 'fenced')
    case 'conflict':
      return refused(host, layout, prefixed('conflict', classified, 'dir_claimed'), 'conflict')
    case 'external':
      return refused(host, layout, notManaged, 'unknown_host')
    case 'nested':
    case 'flat': {
      const no = shapeRefusal(route, layout, facts, files)
      if (no !== null) return no
      break
    }
    case 'foreign':
      break
  }
  return { ok: true, grant: { host, layout, dir: route.dir, socket: route.socket, db: route.db } }
}

/**
 * A flat or nested row's refusal, or null: its files not where it says (a
 * person decides), then, nested, the isolation gate shut; before the gate's
 * first checks have run a nested host is not yet judged, never refused.
 */
function shapeRefusal(route: Route, layout: 'flat' | 'nested', facts: WakeFacts, files: FilesSeen): WakeVerdict | null {
  const { host } = route
  const gone = filesRefusal(route, facts.dirs, files)
  if (gone !== null) return refused(host, 'fenced', gone, gone.code === 'fenced_for_move' ? 'fenced' : 'files')
  if (layout === 'flat') return null
  const gate = facts.gate
  const shut = gate?.check() ?? null
  if (shut === null) return null
  if (gate?.judged?.() === false)
    return refused(host, layout, why('gate_pending', `not yet judged: isolation gate ${shut}`), 'not_ready')
  return refused(host, layout, why('gate_shut', `isolation not ready: ${shut}`), 'gate_shut')
}

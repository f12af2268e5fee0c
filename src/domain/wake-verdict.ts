// The wake verdict (design §6.1): a claim granted with the row's paths, or
// refused with the reason. No I/O: the agent hands in what it knows.
import { activatorManaged, external, type Dirs } from './paths.js'
import type { IsolationGate, LayoutPass, RowsSnapshot } from './ports.js'
import { heldDown } from './fence.js'
import { why, type ReasonCode, type Why } from './reason-codes.js'
import { filesTarget, filesWhy, lookFits, type FilesLook } from './row-files.js'
import type { Route } from './schemas.js'

export const NO_ACTIVATOR = 'no activator is armed on this box (CARLOS_ACTIVATOR=none): nothing wakes through layoutd'

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
  armed: boolean
  phase: string
  /** null until start-up recovery publishes it. */
  pass: Pick<LayoutPass, 'classify' | 'held'> | null
  rows: () => RowsSnapshot
  gate: IsolationGate | null
  dirs: Dirs
}

function refused(host: string, layout: string, because: Why, kind: WakeRefusalKind): WakeVerdict {
  return { ok: false, refusal: { host, layout, code: because.code, reason: because.reason }, kind }
}

function prefixed(prefix: string, c: { code: ReasonCode | ''; reason: string }, fallback: ReasonCode): Why {
  return why(c.code === '' ? fallback : c.code, `${prefix}: ${c.reason}`)
}

export function unmanagedReason(route: Route): string {
  if (route.kind !== 'instance') return `a ${route.kind} row is not the activator's to wake`
  if (route.socket === '') return 'the row has no socket'
  return 'the row does not hibernate: another supervisor runs it'
}

export interface FilesSeen {
  look: FilesLook | undefined
  /** Taken for this verdict: a row it no longer fits is not judged yet. False: refuse only where it fits. */
  fresh: boolean
}

function filesRefusal(route: Route, dirs: Dirs, seen: FilesSeen): Why | null {
  const target = filesTarget(dirs, route)
  if (target === null) return null
  const { look } = seen
  if (look === undefined || !lookFits(look, target))
    return seen.fresh ? why('fenced_for_move', 'fenced: its paths changed while its files were looked at') : null
  return filesWhy(look)
}

/** Unrecorded; flat and foreign rows wake whatever the gate says (design §1.1). */
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

/** Before the gate's first checks a nested host is not judged yet, never refused (design §5.4). */
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

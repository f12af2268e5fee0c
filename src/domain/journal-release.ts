// Whether an operator may release a kept journal's move (design §4.1, §8):
// only when the files are wholly at the end the row names, so removing the
// journal changes nothing but the fence.
import type { MoveRecord, RowAt } from './pass-plan.js'
import type { ReasonCode } from './reason-codes.js'

/** Looked at without following a symlink. */
export type EndFound =
  | { kind: 'absent' }
  | { kind: 'directory' }
  | { kind: 'symlink' }
  /** Anything else, or what could not be looked at. */
  | { kind: 'other'; what: string }

export interface ReleaseFacts {
  atFrom: EndFound
  atDest: EndFound
  row: RowAt
  rowDir: string | undefined
  /** undefined: no agent runs, or it reports no row. */
  agentCode: ReasonCode | '' | undefined
}

export type ReleaseVerdict = { release: true; found: string } | { release: false; found: string; todo: string }

/** Under way or not judged: the journal makes it exact after a crash. */
const UNDER_WAY: ReadonlySet<string> = new Set<ReasonCode>([
  'in_flight',
  'fenced_for_move',
  'agent_starting',
  'recovery_pending',
])

const refuse = (found: string, todo: string): ReleaseVerdict => ({ release: false, found, todo })

function oddEnd(dir: string, end: EndFound): ReleaseVerdict | undefined {
  if (end.kind === 'symlink')
    return refuse(
      `${dir} is a symlink, not the tenant's directory`,
      `put the tenant's real directory at the end its row names and remove the link`,
    )
  if (end.kind === 'other')
    return refuse(`${dir} is ${end.what}`, `make it the tenant's directory or remove it, as the row says`)
  return undefined
}

function misplaced(host: string, filesAt: string, other: string, facts: ReleaseFacts): ReleaseVerdict {
  if (facts.row === 'missing')
    return refuse(
      `the row is gone while its files are at ${filesAt}`,
      `add the row back (\`layoutd routes add ${host} --hibernate --dir ${filesAt} …\`) to keep them, ` +
        `or move them out of the data root to drop the host`,
    )
  if (facts.row === 'other')
    return refuse(
      `its files are at ${filesAt}, but its row names ${facts.rowDir ?? 'another directory'}, neither end`,
      `move the files to the directory the row names, or put the row back at ${filesAt}`,
    )
  return refuse(
    `its files are at ${filesAt}, but its row names ${other}`,
    `move the files to ${other}, where its row says (the tenant stopped), ` +
      `or let the agent finish the move (\`layoutd converge --wait\`)`,
  )
}

export function releaseVerdict(move: MoveRecord, facts: ReleaseFacts): ReleaseVerdict {
  const from = move.from.dir
  const dest = move.dest.dir
  if (facts.agentCode !== undefined && UNDER_WAY.has(facts.agentCode))
    return refuse(
      `the agent reports ${facts.agentCode}: its move is under way or not judged yet`,
      'wait for the run to end (`layoutd converge --wait`), then look again',
    )
  const odd = oddEnd(from, facts.atFrom) ?? oddEnd(dest, facts.atDest)
  if (odd !== undefined) return odd
  const atFrom = facts.atFrom.kind === 'directory'
  const atDest = facts.atDest.kind === 'directory'
  if (atFrom && atDest)
    return refuse(
      `files at both ${from} and ${dest}`,
      `keep the tenant's files at the end its row names (${facts.rowDir ?? 'no row'}) and move the other aside`,
    )
  if (!atFrom && !atDest) {
    if (facts.row === 'missing') return { release: true, found: 'no row, and no files at either end: nothing to move' }
    return refuse(
      `files at neither ${from} nor ${dest}`,
      `find the tenant's files and put them at ${facts.rowDir ?? 'the end its row names'}, where its row says`,
    )
  }
  const filesAt = atFrom ? from : dest
  const other = atFrom ? dest : from
  if (facts.row === (atFrom ? 'from' : 'dest'))
    return { release: true, found: `its files are at ${filesAt}, as its row says; nothing is at ${other}` }
  return misplaced(move.host, filesAt, other, facts)
}

/** `journal settle` (design §8); `none`: no row, no files. */
export type SettleVerdict =
  | { settle: true; at: 'from' | 'dest' | 'none'; rewrite: boolean; found: string }
  | { settle: false; found: string; todo: string }

/** As releaseVerdict, and a row at the files' other end is rewritten: the journal records both exactly. */
export function settleVerdict(move: MoveRecord, facts: Omit<ReleaseFacts, 'agentCode'>): SettleVerdict {
  const verdict = releaseVerdict(move, { ...facts, agentCode: undefined })
  if (verdict.release)
    return {
      settle: true,
      at: facts.row === 'missing' ? 'none' : facts.row === 'from' ? 'from' : 'dest',
      rewrite: false,
      found: verdict.found,
    }
  const atFrom = facts.atFrom.kind === 'directory' && facts.atDest.kind === 'absent'
  const atDest = facts.atDest.kind === 'directory' && facts.atFrom.kind === 'absent'
  const side = atFrom ? 'from' : atDest ? 'dest' : undefined
  if (side === undefined || facts.row !== (side === 'from' ? 'dest' : 'from'))
    return { settle: false, found: verdict.found, todo: verdict.todo }
  const filesAt = side === 'from' ? move.from.dir : move.dest.dir
  const other = side === 'from' ? move.dest.dir : move.from.dir
  return {
    settle: true,
    at: side,
    rewrite: true,
    found: `its files are at ${filesAt} and nothing is at ${other}; its row named ${other}, rewritten to ${filesAt}`,
  }
}

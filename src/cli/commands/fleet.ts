// `layoutd fleet status [--json] [--wait [--timeout S]]` (design §7.3, §8):
// every live box's summary against the intent addressing it; exit 0 only
// when all have converged. The summaries come from the deploy store, shown
// as a table with the boxes not yet converged first and a summary line, an
// unreadable record named above it; the exit status lets a rollout script
// wait on it (--wait reads again until then, the timeout, a box it saw
// leaving before it converged, or what remains needing a person).
import { fleetView, summaryLine, type FleetRow, type FleetView } from '../../domain/box-summary.js'
import { INTENT_TIMEOUT_MS } from '../../domain/intent.js'
import { fleetRecords } from '../../domain/rollout.js'
import type { DeployStore } from '../../domain/ports.js'
import { errors } from '../../errors.js'
import type { OptionsConfig, ParsedArgs } from '../args.js'
import {
  runGroup,
  subcommandIn,
  withDeployStore,
  type Cli,
  type Command,
  type CommandContext,
  type CommandGroup,
  type Signature,
} from '../command.js'
import { formatTable } from '../table.js'
import { rolloutCommand } from './rollout.js'

export const usage = `usage:
  layoutd fleet status [--json] [--wait [--timeout S]]
  layoutd fleet rollout migrate|revert --waves W [--max-parallel N] [--progress-deadline D]
                        [--on-failure pause|revert|freeze] [--max-failed-rows N] [--force] [-m MSG]
  layoutd fleet rollout revert --now [-m MSG] | fleet rollout status [--json] [--wait [--timeout S]]
  layoutd fleet rollout pause|resume|abort [-m MSG]
`

const STATUS_USAGE = `usage:
  layoutd fleet status [--json] [--wait [--timeout S]]

  every live box, the intent addressing it and whether it converged; exit 0
  only when every live box has converged to it
  --json       print {"boxes": [...], "converged", "converging", "held", "allConverged", "unreadable"}
  --wait       read again every second until every live box has converged; exit 1 at once when
               a box seen leaves before it converged, or when what remains needs a person
               (held or refused rows, a kept journal, an unreadable record), naming each box and why
  --timeout S  give up waiting after S seconds (default 600), exit 1
`

export const signature: Signature = { failures: 'layoutd fleet', usageErrors: 'layoutd fleet' }

export interface FleetIo extends CommandContext {
  /** The caller opens the store and closes it after the command. */
  store: DeployStore
  now?: () => number
  /** Between two reads of --wait; default 1 s. */
  everyMs?: number
}

const STATUS_OPTIONS = { json: { type: 'boolean' }, wait: { type: 'boolean' }, timeout: { type: 'string' } } as const

const statusCommand: Command<typeof STATUS_OPTIONS, FleetIo> = {
  usage: STATUS_USAGE,
  options: STATUS_OPTIONS,
  signature,
  run: (args: ParsedArgs<typeof STATUS_OPTIONS>, io: FleetIo) => fleetStatus(io, args.values),
}

const SUBCOMMANDS: Record<string, Command<OptionsConfig, FleetIo>> = {
  status: statusCommand,
  rollout: rolloutCommand,
}

export const group: CommandGroup<FleetIo> = {
  usage,
  signature,
  subcommand: subcommandIn(SUBCOMMANDS),
}

/** Runs `fleet <argv>` with a store the caller opened (tests, benchmarks). Resolves to the exit status. */
export function fleetCommand(argv: readonly string[], io: FleetIo): Promise<number> {
  return runGroup(group, argv, io, (use) => use(io))
}

/** `layoutd fleet …` from the command line: opens the deploy store for the command. */
export function main(argv: readonly string[], cli: Cli): Promise<number> {
  return runGroup(group, argv, cli, withDeployStore(cli))
}

/**
 * The fleet as the store says now. A record that cannot be read is named in the view, not thrown: the
 * table is what the operator needs to see then.
 */
export async function readFleet(store: DeployStore): Promise<FleetView> {
  if (store.listBoxes === undefined) throw new Error(`${store.describe()} keeps no box summaries`)
  const signal = AbortSignal.timeout(INTENT_TIMEOUT_MS)
  const contents = store.inspect?.(signal) ?? store.list(signal).then((records) => ({ records, unreadable: [] }))
  const [{ records, unreadable }, boxes, played] = await Promise.all([
    contents,
    store.listBoxes(signal),
    rolloutInPlay(store, signal),
  ])
  // A box that started in the rollout in play is on the rollout's intent, as its agent reads it (design §7.6).
  return fleetView(boxes, fleetRecords(records, played?.record, played?.progress ?? new Map()), unreadable)
}

/** The rollout in play and its boxes' progress, on a store that keeps rollouts. */
async function rolloutInPlay(store: DeployStore, signal: AbortSignal) {
  const port = store.rollouts?.()
  if (port === undefined) return undefined
  const { current } = await port.active(signal)
  if (current === undefined) return undefined
  return { record: current.record, progress: await port.progress(current.record.id, undefined, signal) }
}

/** How far a box's stamp may be ahead of this clock before it is said to be (two clocks never agree). */
const CLOCK_TOLERANCE_MS = 10_000

/** A time stamp as an age: `12s ago`, `4m ago`, `3h ago`; `-` for none; one ahead of this clock says so. */
function ago(iso: string | null, now: number): string {
  if (iso === null) return '-'
  const ms = now - Date.parse(iso)
  if (!Number.isFinite(ms)) return iso
  if (ms < -CLOCK_TOLERANCE_MS) return `${span(-ms)} ahead of this clock`
  const s = Math.max(0, Math.round(ms / 1000))
  return `${span(s * 1000)} ago`
}

function span(ms: number): string {
  const s = Math.round(ms / 1000)
  return s < 120 ? `${s}s` : s < 7200 ? `${Math.round(s / 60)}m` : `${Math.round(s / 3600)}h`
}

const HEAD = ['BOX', 'INTENT', 'MODE', 'CONVERGED', 'NESTED', 'FLAT', 'FENCED', 'DEFERRED', 'HELD', 'REFUSED']

function converged(r: FleetRow): string {
  if (r.state === 'converged') return 'yes'
  if (r.state === 'none') return 'no intent'
  if (r.state === 'unreadable') return 'unreadable'
  return r.summary.leg.running ? 'running' : r.needs !== null ? 'needs you' : 'no'
}

export function formatFleet(v: FleetView, now: number): string {
  const rows = v.rows.map((r) => {
    const s = r.summary
    const intent = r.wants ?? '-'
    const stale = r.wants !== null && s.intent !== r.wants ? ` (box read ${s.intent ?? 'none'})` : ''
    const n = (w: string) => String(s.counts[w] ?? 0)
    // A box of a build before `withheld` does not say: `-`.
    const w = s.leg.withheld
    return [
      s.box,
      `${intent}${stale}`,
      s.mode,
      converged(r),
      n('nested'),
      n('flat'),
      n('fenced'),
      w === undefined ? '-' : String(w.deferred),
      String(s.held),
      w === undefined ? '-' : String(w.refused),
      ago(s.leg.lastRunAt, now),
    ]
  })
  const above = v.unreadable.map(
    (u) =>
      `intent record ${u.id} cannot be read (${u.where}: ${u.why}): no box can read its intent until it is ` +
      `quarantined (layoutd intent quarantine ${u.id} --record MODE --fleet)\n`,
  )
  const table = formatTable([...HEAD, 'LAST RUN'], rows)
  const needs = v.rows.filter((r) => r.needs !== null).map((r) => `${r.summary.box} needs you: ${r.needs}\n`)
  return `${above.join('')}${table}\n${summaryLine(v)}\n${needs.join('')}`
}

function toJson(v: FleetView): string {
  const boxes = v.rows.map((r) => ({ ...r.summary, wants: r.wants, state: r.state, needs: r.needs }))
  const { converged, converging, held, allConverged, fleetIntent, unreadable } = v
  const out = { boxes, converged, converging, held, allConverged, fleetIntent, unreadable }
  return `${JSON.stringify(out, null, 2)}\n`
}

/** Why --wait ends before every box converged: boxes seen that left unconverged, or what needs a person. */
function waitEnds(v: FleetView, seen: Map<string, boolean>): string[] {
  const live = new Set(v.rows.map((r) => r.summary.box))
  const why: string[] = []
  for (const [box, done] of seen)
    if (!done && !live.has(box))
      why.push(`box ${box} left before it converged (its summary is gone: its agent stopped or died)`)
  for (const u of v.unreadable) why.push(`intent record ${u.id} cannot be read (${u.where}: ${u.why})`)
  const waiting = v.rows.filter((r) => r.state === 'converging')
  // Only when nothing else is still on its way: a box still moving may clear what another waits on.
  if (waiting.length > 0 && waiting.every((r) => r.needs !== null))
    for (const r of waiting) why.push(`box ${r.summary.box} needs a person: ${r.needs}`)
  for (const r of v.rows) seen.set(r.summary.box, (seen.get(r.summary.box) ?? false) || r.state === 'converged')
  return why
}

async function fleetStatus(io: FleetIo, o: { json?: boolean; wait?: boolean; timeout?: string }): Promise<number> {
  if (o.timeout !== undefined && o.wait !== true) throw errors.usage('--timeout goes with --wait')
  if (o.timeout !== undefined && !/^[0-9]{1,6}$/.test(o.timeout))
    throw errors.usage(`--timeout ${JSON.stringify(o.timeout)}: a whole number of seconds, like 600`)
  const now = io.now ?? (() => Date.now())
  const deadline = now() + Number(o.timeout ?? '600') * 1000
  let v = await readFleet(io.store)
  const seen = new Map<string, boolean>()
  let ended = waitEnds(v, seen)
  if (o.wait === true) {
    let said = ''
    while (!v.allConverged && ended.length === 0 && now() < deadline) {
      const line = `waiting: ${summaryLine(v)}\n`
      // Progress on stderr, once per change: stdout stays the final answer.
      if (line !== said) io.stderr.write(line)
      said = line
      await new Promise((r) => setTimeout(r, io.everyMs ?? 1000))
      v = await readFleet(io.store)
      ended = waitEnds(v, seen)
    }
  }
  io.stdout.write(o.json === true ? toJson(v) : formatFleet(v, now()))
  if (o.wait === true && ended.length > 0) {
    for (const why of ended) io.stderr.write(`${signature.failures}: ${why}\n`)
    return 1
  }
  if (v.allConverged) return 0
  const why =
    v.rows.length === 0
      ? 'no box has reported'
      : `${v.rows.length - v.converged} of ${v.rows.length} boxes have not converged`
  io.stderr.write(`${signature.failures}: ${why}${o.wait === true ? ` after waiting ${o.timeout ?? '600'}s` : ''}\n`)
  return 1
}

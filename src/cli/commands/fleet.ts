// `layoutd fleet status [--json] [--wait [--timeout S]]` (design §7.3, §8):
// every live box's summary against the intent addressing it; exit 0 only
// when all have converged. The summaries come from the deploy store, shown
// as a table with the boxes not yet converged first and a summary line; the
// exit status lets a rollout script wait on it (--wait reads again until
// then, or the timeout).
import { fleetView, summaryLine, type FleetView } from '../../domain/box-summary.js'
import { INTENT_TIMEOUT_MS } from '../../domain/intent.js'
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
  --json       print {"boxes": [...], "converged", "converging", "held", "allConverged"}
  --wait       read again every second until every live box has converged
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

/** The fleet as the store says now. */
export async function readFleet(store: DeployStore): Promise<FleetView> {
  if (store.listBoxes === undefined) throw new Error(`${store.describe()} keeps no box summaries`)
  const signal = AbortSignal.timeout(INTENT_TIMEOUT_MS)
  const [records, boxes] = await Promise.all([store.list(signal), store.listBoxes(signal)])
  return fleetView(boxes, records)
}

/** A time stamp as an age: `12s ago`, `4m ago`, `3h ago`; `-` for none. */
function ago(iso: string | null, now: number): string {
  if (iso === null) return '-'
  const s = Math.max(0, Math.round((now - Date.parse(iso)) / 1000))
  if (!Number.isFinite(s)) return iso
  return s < 120 ? `${s}s ago` : s < 7200 ? `${Math.round(s / 60)}m ago` : `${Math.round(s / 3600)}h ago`
}

export function formatFleet(v: FleetView, now: number): string {
  const rows = v.rows.map((r) => {
    const s = r.summary
    const converged =
      r.state === 'converged' ? 'yes' : r.state === 'none' ? 'no intent' : s.leg.running ? 'running' : 'no'
    const intent = r.wants ?? '-'
    const stale = r.wants !== null && s.intent !== r.wants ? ` (box read ${s.intent ?? 'none'})` : ''
    const n = (w: string) => String(s.counts[w] ?? 0)
    return [
      s.box,
      `${intent}${stale}`,
      converged,
      n('nested'),
      n('flat'),
      n('fenced'),
      String(s.held),
      ago(s.leg.lastRunAt, now),
    ]
  })
  const table = formatTable(['BOX', 'INTENT', 'CONVERGED', 'NESTED', 'FLAT', 'FENCED', 'HELD', 'LAST RUN'], rows)
  return `${table}\n${summaryLine(v)}\n`
}

function toJson(v: FleetView): string {
  const boxes = v.rows.map((r) => ({ ...r.summary, wants: r.wants, state: r.state }))
  const { converged, converging, held, allConverged, fleetIntent } = v
  return `${JSON.stringify({ boxes, converged, converging, held, allConverged, fleetIntent }, null, 2)}\n`
}

async function fleetStatus(io: FleetIo, o: { json?: boolean; wait?: boolean; timeout?: string }): Promise<number> {
  if (o.timeout !== undefined && o.wait !== true) throw errors.usage('--timeout goes with --wait')
  if (o.timeout !== undefined && !/^[0-9]{1,6}$/.test(o.timeout))
    throw errors.usage(`--timeout ${JSON.stringify(o.timeout)}: a whole number of seconds, like 600`)
  const now = io.now ?? (() => Date.now())
  const deadline = now() + Number(o.timeout ?? '600') * 1000
  let v = await readFleet(io.store)
  if (o.wait === true) {
    let said = ''
    while (!v.allConverged && now() < deadline) {
      const line = `waiting: ${summaryLine(v)}\n`
      // Progress on stderr, once per change: stdout stays the final answer.
      if (line !== said) io.stderr.write(line)
      said = line
      await new Promise((r) => setTimeout(r, io.everyMs ?? 1000))
      v = await readFleet(io.store)
    }
  }
  io.stdout.write(o.json === true ? toJson(v) : formatFleet(v, now()))
  if (v.allConverged) return 0
  const why =
    v.rows.length === 0
      ? 'no box has reported'
      : `${v.rows.length - v.converged} of ${v.rows.length} boxes have not converged`
  io.stderr.write(`${signature.failures}: ${why}${o.wait === true ? ` after waiting ${o.timeout ?? '600'}s` : ''}\n`)
  return 1
}

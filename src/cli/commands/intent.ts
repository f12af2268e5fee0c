// `layoutd intent migrate|revert|prune|status` (design §7, §8): the deploy
// store, read, recorded and pruned directly; `--dry-run` asks this box's
// agent for its report. `intent migrate|revert (--box LABEL | --fleet)`
// records a layout intent in the deploy store (or, with --dry-run, says
// what this box would do and records nothing); `intent prune --keep N` removes old records;
// `intent status [--json]` shows the one this box would read (design §7,
// §8). They act on the store directly: the agent need not run, and it picks
// a new record up on its watch or next poll.
import { randomBytes } from 'node:crypto'
import os from 'node:os'
import { hostError } from '../../domain/hostname.js'
import { INTENT_TIMEOUT_MS, loadLayoutIntent, newIntentId, type IntentRead } from '../../domain/intent.js'
import { dryRun, formatDryRun, formatSummaryDryRun, prunePlan } from '../../domain/intent-plan.js'
import { validMode, type IntentMode, type Mode } from '../../domain/modes.js'
import { printable } from '../../domain/printable.js'
import type { DeployStore } from '../../domain/ports.js'
import type { IntentRecord, LayoutReport } from '../../domain/schemas.js'
import { errorMessage, errors } from '../../errors.js'
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

export const usage = `usage:
  layoutd intent migrate|revert (--box LABEL | --fleet) [--force] [--dry-run] [--new-box]
  layoutd intent prune --keep N [--dry-run]
  layoutd intent status [--json]
`

const RECORD_USAGE = `usage:
  layoutd intent migrate|revert (--box LABEL | --fleet) [--force] [--dry-run] [--new-box]

  migrate     record the nested layout; revert: the flat one
  --box LABEL for that box only (upper case folded, as CARLOS_BOX is)
  --fleet     for every box of the fleet: one of the two is required
  --force     stop awake instances at once instead of giving them their grace
  --dry-run   say what this box would do (which rows move, which are withheld and why); record nothing
  --new-box   record for a box no agent has reported yet (etcd knows the boxes)
`

const PRUNE_USAGE = `usage:
  layoutd intent prune --keep N [--dry-run]

  --keep N    keep the newest N records; never removed either: the newest
              addressing any box, and one a live box reports converging to
  --dry-run   list what would be removed; remove nothing
`

const STATUS_USAGE = `usage:
  layoutd intent status [--json]

  --json      print {"intent": {...} | null, "mode": "..."}
`

export const signature: Signature = { failures: 'layoutd intent', usageErrors: 'layoutd intent' }

/** What an intent subcommand runs with. */
export interface IntentIo extends CommandContext {
  /** The caller opens the store and closes it after the command. */
  store: DeployStore
  now?: () => Date
  /** Who records the intent; default `<user>@<hostname>`. */
  by?: string
  /** Where --dry-run gets this box's report; default its agent, over HTTP. */
  report?: () => Promise<LayoutReport>
}

const RECORD_OPTIONS = {
  box: { type: 'string' },
  fleet: { type: 'boolean' },
  force: { type: 'boolean' },
  'dry-run': { type: 'boolean' },
  'new-box': { type: 'boolean' },
} as const

function recordCommand(mode: Mode): Command<typeof RECORD_OPTIONS, IntentIo> {
  return {
    usage: RECORD_USAGE,
    options: RECORD_OPTIONS,
    signature,
    run: ({ values }: ParsedArgs<typeof RECORD_OPTIONS>, io: IntentIo) =>
      recordIntent(io, mode, {
        box: values.box,
        fleet: values.fleet === true,
        force: values.force === true,
        dryRun: values['dry-run'] === true,
        newBox: values['new-box'] === true,
      }),
  }
}

const PRUNE_OPTIONS = { keep: { type: 'string' }, 'dry-run': { type: 'boolean' } } as const

const pruneCommand: Command<typeof PRUNE_OPTIONS, IntentIo> = {
  usage: PRUNE_USAGE,
  options: PRUNE_OPTIONS,
  signature,
  run: ({ values }, io) => prune(io, values.keep, values['dry-run'] === true),
}

const STATUS_OPTIONS = { json: { type: 'boolean' } } as const

const statusCommand: Command<typeof STATUS_OPTIONS, IntentIo> = {
  usage: STATUS_USAGE,
  options: STATUS_OPTIONS,
  signature,
  run: ({ values }, io) => showStatus(io, values.json === true),
}

const SUBCOMMANDS: Record<string, Command<OptionsConfig, IntentIo>> = {
  migrate: recordCommand('nested'),
  revert: recordCommand('flat'),
  prune: pruneCommand,
  status: statusCommand,
}

export const group: CommandGroup<IntentIo> = {
  usage,
  signature,
  subcommand: subcommandIn(SUBCOMMANDS),
}

/** Runs `intent <argv>` with a store the caller opened (tests, benchmarks). Resolves to the exit status. */
export function intentCommand(argv: readonly string[], io: IntentIo): Promise<number> {
  return runGroup(group, argv, io, (use) => use(io))
}

/** `layoutd intent …` from the command line: opens the deploy store for the command. */
export function main(argv: readonly string[], cli: Cli): Promise<number> {
  return runGroup(group, argv, cli, withDeployStore(cli))
}

interface RecordAsk {
  box: string | undefined
  fleet: boolean
  force: boolean
  dryRun: boolean
  newBox: boolean
}

/** The box a --box names, folded as CARLOS_BOX is; undefined for the fleet. */
function addressed(ask: RecordAsk): string | undefined {
  if (ask.box !== undefined && ask.fleet) throw errors.usage('--box and --fleet are two different intents: give one')
  if (ask.box === undefined && !ask.fleet)
    throw errors.usage('say whom the intent is for: --box LABEL for one box, or --fleet for every box')
  if (ask.box === undefined) return undefined
  const box = ask.box.toLowerCase()
  const why = hostError(box)
  if (why !== null) throw errors.invalidBoxLabel(ask.box, why)
  return box
}

async function recordIntent(io: IntentIo, mode: Mode, ask: RecordAsk): Promise<number> {
  const box = addressed(ask)
  const whom = box === undefined ? 'for the whole fleet' : `for box ${box}`
  if (ask.force && box === io.config.box && io.config.activatorUrl === '') {
    throw errors.forceWithoutActivator([box])
  }
  const checkKnown = box !== undefined && !ask.newBox && io.store.tracksBoxes === true
  if ((checkKnown || ask.force) && io.store.listBoxes !== undefined) {
    const known = await io.store.listBoxes(AbortSignal.timeout(INTENT_TIMEOUT_MS))
    if (checkKnown && !known.some((b) => b.box === box)) throw errors.unknownBox(box, known.length)
    // What each box published of itself says whether it can stop an awake
    // instance; a forced intent for one that cannot would fence its awake
    // tenants and wait on a release nobody asks for.
    if (ask.force) {
      const cannot = known
        .filter((b) => b.canStopAwake === false && (box === undefined || b.box === box))
        .map((b) => b.box)
      if (cannot.length > 0) throw errors.forceWithoutActivator(cannot.sort(), box === undefined)
    }
  }
  if (ask.dryRun) return showDryRun(io, mode, box, `${mode} ${whom}${ask.force ? ' (forced)' : ''}`)
  const now = (io.now ?? (() => new Date()))()
  // The new id must sort after every recorded one, so the store is read
  // first; a store that cannot be read refuses the record rather than risk
  // an id that sorts before the intent it means to supersede.
  const existing = (await io.store.list(AbortSignal.timeout(INTENT_TIMEOUT_MS))).map((r) => r.id)
  const record: IntentRecord = {
    id: newIntentId(now, existing, () => randomBytes(3).toString('hex')),
    mode,
    force: ask.force,
    ...(box === undefined ? {} : { box }),
    recordedAt: now.toISOString(),
    by: io.by ?? whoami(),
  }
  await io.store.record(record, AbortSignal.timeout(INTENT_TIMEOUT_MS))
  io.stdout.write(`recorded intent ${record.id}: ${mode} ${whom}${ask.force ? ' (forced)' : ''}\n`)
  return 0
}

/** --dry-run: what would be recorded, and what this box would do, from its agent's report. */
async function showDryRun(io: IntentIo, mode: Mode, box: string | undefined, what: string): Promise<number> {
  io.stdout.write(`dry run: would record ${what}; nothing recorded\n`)
  const self = io.config.box
  // The other boxes it addresses, from what each published of itself (counts, not rows).
  const summaries =
    io.store.listBoxes === undefined ? [] : await io.store.listBoxes(AbortSignal.timeout(INTENT_TIMEOUT_MS))
  const others = summaries
    .filter((s) => s.box !== self && (box === undefined || s.box === box))
    .sort((a, b) => (a.box < b.box ? -1 : 1))
  if (box !== undefined && box !== self) {
    const [summary] = others
    io.stdout.write(
      summary === undefined
        ? `box ${box} is not this box (${self}): run --dry-run there to see its rows\n`
        : formatSummaryDryRun(summary, mode),
    )
    return 0
  }
  const report = await (io.report ?? (() => agentReport(io)))()
  io.stdout.write(formatDryRun(self, mode, dryRun(report, mode)))
  for (const summary of others) io.stdout.write(formatSummaryDryRun(summary, mode))
  return 0
}

async function agentReport(io: IntentIo) {
  const { AgentClient, findAgent } = await import('../agent-client.js')
  return new AgentClient(findAgent(io.config, undefined), io.config.token).status()
}

async function prune(io: IntentIo, keepText: string | undefined, dry: boolean): Promise<number> {
  if (keepText === undefined) throw errors.usage('--keep N is required: how many of the newest records to keep')
  if (!/^[0-9]{1,6}$/.test(keepText))
    throw errors.usage(`--keep ${JSON.stringify(keepText)}: a whole number of records, like 10`)
  const keep = Number(keepText)
  const signal = AbortSignal.timeout(INTENT_TIMEOUT_MS)
  if (io.store.remove === undefined) throw new Error(`${io.store.describe()} cannot remove records`)
  const records = await io.store.list(signal)
  const boxes = (await io.store.listBoxes?.(signal)) ?? []
  const plan = prunePlan(records, keep, boxes)
  if (!dry) await io.store.remove(plan.remove, signal)
  const verb = dry ? 'would remove' : 'removed'
  io.stdout.write(`${verb} ${plan.remove.length} of ${records.length} intent records; ${plan.kept.length} kept\n`)
  for (const id of plan.remove) io.stdout.write(`  ${dry ? 'remove' : 'removed'}  ${id}\n`)
  for (const k of plan.kept) io.stdout.write(`  kept     ${k.id}: ${k.why}\n`)
  return 0
}

function whoami(): string {
  let user: string
  try {
    user = os.userInfo().username
  } catch {
    // A uid with no passwd entry (common in containers) is still someone.
    user = `uid-${process.getuid?.() ?? 'unknown'}`
  }
  return `${user}@${os.hostname()}`
}

/** What `intent status` reports: the intent this box reads, and the mode it makes. */
export interface IntentStatus {
  intent: IntentRecord | null
  mode: IntentMode
  error?: string
}

export async function readIntentStatus(store: DeployStore, box: string): Promise<IntentStatus> {
  let read: IntentRead
  try {
    read = await loadLayoutIntent(store, box)
  } catch (err) {
    return { intent: null, mode: 'unreadable', error: `${store.describe()}: ${errorMessage(err)}` }
  }
  if (!read.found) return { intent: null, mode: 'none' }
  const { intent } = read
  // A mode this build does not know fails closed, as the agent does.
  if (!validMode(intent.mode)) {
    return {
      intent,
      mode: 'unreadable',
      error: `intent ${intent.id}: mode ${JSON.stringify(intent.mode)} is not flat or nested`,
    }
  }
  return { intent, mode: intent.mode }
}

export function formatIntentStatus(box: string, s: IntentStatus): string {
  // The record's fields are the store's bytes: each is shown printable.
  const p = printable
  let out = `box       ${p(box)}\nmode      ${s.mode}\n`
  if (s.intent !== null) {
    const i = s.intent
    out +=
      `intent    ${p(i.id)} (${i.box === undefined ? 'the whole fleet' : `box ${p(i.box)}`})\n` +
      `recorded  ${p(String(i.recordedAt))} by ${p(String(i.by))}\n` +
      `force     ${i.force ? 'yes: awake instances are stopped at once' : 'no'}\n`
  } else if (s.mode === 'none') {
    out += 'intent    none addresses this box; the deployment default may stand in\n'
  }
  return out
}

async function showStatus(io: IntentIo, json: boolean): Promise<number> {
  const box = io.config.box
  const s = await readIntentStatus(io.store, box)
  io.stdout.write(json ? `${JSON.stringify(s, null, 2)}\n` : formatIntentStatus(box, s))
  if (s.error === undefined) return 0
  // The report is printed either way; the verdict is the exit status.
  io.stderr.write(`${signature.failures}: intent unreadable: ${printable(s.error)}\n`)
  return 1
}

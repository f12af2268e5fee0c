// `layoutd intent migrate|revert|quarantine|history|prune|status` (design
// §7, §8): the deploy store read and written directly, so no agent need
// run; it picks a new record up on its watch or next poll.
import { randomBytes } from 'node:crypto'
import os from 'node:os'
import { hostError } from '../../domain/hostname.js'
import { INTENT_TIMEOUT_MS, loadLayoutIntent, newIntentId, type IntentRead } from '../../domain/intent.js'
import { dryRun, formatDryRun, formatSummaryDryRun, prunePlan } from '../../domain/intent-plan.js'
import { FLEET, historyRows, planRepair, repairWords, type RepairPlan } from '../../domain/intent-repair.js'
import { validMode, type IntentMode, type Mode } from '../../domain/modes.js'
import type { DeployStore, StoreContents } from '../../domain/ports.js'
import { printable } from '../../domain/printable.js'
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
import { formatTable } from '../table.js'

export const usage = `usage:
  layoutd intent migrate|revert (--box LABEL | --fleet) [--force] [--dry-run] [--new-box] [--supersede ID] [-m MSG]
  layoutd intent quarantine ID [--record nested|flat] [--box LABEL | --fleet] [--dry-run] [-m MSG]
  layoutd intent history [--box LABEL] [--json]
  layoutd intent prune --keep N [--dry-run]
  layoutd intent status [--json]
  layoutd intent forget-applied
`

const RECORD_USAGE = `usage:
  layoutd intent migrate|revert (--box LABEL | --fleet) [--force] [--dry-run] [--new-box] [--supersede ID] [-m MSG]

  migrate     record the nested layout; revert: the flat one
  --box LABEL for that box only (upper case folded, as CARLOS_BOX is)
  --fleet     for every box of the fleet: one of the two is required
  --force     stop awake instances at once instead of giving them their grace
  --dry-run   say what this box would do (which rows move, which are withheld and why); record nothing
  --new-box   record for a box no agent has reported yet (etcd knows the boxes)
  --supersede ID  record over record ID (one that cannot be read, or a wrong one): it is moved
              aside in the same step (intent quarantine ID --record ...)
  -m MSG      why, kept with the record (intent history shows it)
`

const QUARANTINE_USAGE = `usage:
  layoutd intent quarantine ID [--record nested|flat] [--box LABEL | --fleet] [--dry-run] [-m MSG]

  moves record ID (one that cannot be read, or a wrong one) aside, where an
  operator can still read it, and with --record records the intent that
  takes its place in the same step, so no box reads the record before it
  --record M  the mode of the replacement: nested or flat
  --box LABEL, --fleet  whom the replacement addresses; default the record's own
              (required when the record cannot be read)
  --dry-run   say what would be done; change nothing
  -m MSG      why, kept with the replacement
`

const HISTORY_USAGE = `usage:
  layoutd intent history [--box LABEL] [--json]

  every record, newest first: id, mode, box, who recorded it, when, and why;
  those that cannot be read, and those moved aside, marked
  --box LABEL only the records addressing that box (its own and the fleet's)
  --json      print {"records": [...]}
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

const FORGET_USAGE = `usage:
  layoutd intent forget-applied

  forgets the intent this box last applied, kept in D/layout/intent.applied:
  the agent then reads the deploy store as it finds it (a store with no
  record for this box reads none, and the nested default may apply). For a
  store gone, emptied or replaced (applied_intent_missing) that is meant so;
  to mean an intent instead, record it (intent migrate|revert)
`

export const signature: Signature = { failures: 'layoutd intent', usageErrors: 'layoutd intent' }

export interface IntentIo extends CommandContext {
  /** Opened and closed by the caller. */
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
  supersede: { type: 'string' },
  message: { type: 'string', short: 'm' },
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
        supersede: values.supersede,
        message: checkedMessage(values.message),
      }),
  }
}

const QUARANTINE_OPTIONS = {
  record: { type: 'string' },
  box: { type: 'string' },
  fleet: { type: 'boolean' },
  'dry-run': { type: 'boolean' },
  message: { type: 'string', short: 'm' },
} as const

const quarantineCommand: Command<typeof QUARANTINE_OPTIONS, IntentIo> = {
  usage: QUARANTINE_USAGE,
  options: QUARANTINE_OPTIONS,
  positionals: ['ID'],
  signature,
  run: ({ values, positionals }, io) => quarantine(io, positionals[0] ?? '', values),
}

const HISTORY_OPTIONS = { box: { type: 'string' }, json: { type: 'boolean' } } as const

const historyCommand: Command<typeof HISTORY_OPTIONS, IntentIo> = {
  usage: HISTORY_USAGE,
  options: HISTORY_OPTIONS,
  signature,
  run: ({ values }, io) => history(io, values.box, values.json === true),
}

/** A -m message: one line, at most 1,000 characters; empty is none. */
function checkedMessage(m: string | undefined): string | undefined {
  if (m === undefined || m === '') return undefined
  if (m.length > 1000) throw errors.usage(`-m: ${m.length} characters, over the 1000 a message may have`)
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(m)) throw errors.usage('-m: one line of text, with no control characters')
  return m
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

const forgetCommand: Command<Record<string, never>, IntentIo> = {
  usage: FORGET_USAGE,
  options: {},
  signature,
  run: (_args, io) => forgetApplied(io),
}

const SUBCOMMANDS: Record<string, Command<OptionsConfig, IntentIo>> = {
  migrate: recordCommand('nested'),
  revert: recordCommand('flat'),
  quarantine: quarantineCommand,
  history: historyCommand,
  prune: pruneCommand,
  status: statusCommand,
  'forget-applied': forgetCommand,
}

export const group: CommandGroup<IntentIo> = {
  usage,
  signature,
  subcommand: subcommandIn(SUBCOMMANDS),
}

/** Runs `intent <argv>` on a store the caller opened (tests, benchmarks). */
export function intentCommand(argv: readonly string[], io: IntentIo): Promise<number> {
  return runGroup(group, argv, io, (use) => use(io))
}

/** `layoutd intent …`, with the deploy store opened for it. */
export function main(argv: readonly string[], cli: Cli): Promise<number> {
  const scope = withDeployStore(cli)
  return runGroup(group, argv, cli, (use) => scope((context) => use({ ...context, by: whoami(cli.environ) })))
}

interface RecordAsk {
  box: string | undefined
  fleet: boolean
  force: boolean
  dryRun: boolean
  newBox: boolean
  supersede: string | undefined
  message: string | undefined
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
  await refuseUnknownOrForce(io, box, ask)
  // An unreadable record refuses (boxes would not read past it) unless --supersede moves it aside.
  const contents = await readContents(io.store)
  if (ask.supersede === undefined) refuseUnreadable(contents)
  else planRepair(contents, { id: ask.supersede, mode, address: box ?? FLEET })
  const what = `${mode} ${whom}${ask.force ? ' (forced)' : ''}`
  const over = ask.supersede === undefined ? '' : `, quarantining record ${ask.supersede} in the same step`
  if (ask.dryRun) return showDryRun(io, mode, box, `${what}${over}`)
  const record = newRecord(io, contents, { mode, force: ask.force, box, message: ask.message })
  if (ask.supersede !== undefined) await quarantineWith(io, ask.supersede, record)
  else await io.store.record(record, AbortSignal.timeout(INTENT_TIMEOUT_MS))
  io.stdout.write(`recorded intent ${record.id}: ${what}\n`)
  return 0
}

async function refuseUnknownOrForce(io: IntentIo, box: string | undefined, ask: RecordAsk): Promise<void> {
  if (ask.force && box === io.config.box && io.config.activatorUrl === '') {
    throw errors.forceWithoutActivator([box])
  }
  const checkKnown = box !== undefined && !ask.newBox && io.store.tracksBoxes === true
  if ((checkKnown || ask.force) && io.store.listBoxes !== undefined) {
    const known = await io.store.listBoxes(AbortSignal.timeout(INTENT_TIMEOUT_MS))
    if (checkKnown && !known.some((b) => b.box === box)) throw errors.unknownBox(box, known.length)
    // A forced intent for a box that cannot stop an instance would wait on a release nobody asks for.
    if (ask.force) {
      const cannot = known
        .filter((b) => b.canStopAwake === false && (box === undefined || b.box === box))
        .map((b) => b.box)
      if (cannot.length > 0) throw errors.forceWithoutActivator(cannot.sort(), box === undefined)
    }
  }
}

/** A store without inspect throws on an unreadable record, as list does. */
async function readContents(store: DeployStore): Promise<StoreContents> {
  const signal = AbortSignal.timeout(INTENT_TIMEOUT_MS)
  if (store.inspect !== undefined) return store.inspect(signal)
  return { records: await store.list(signal), unreadable: [] }
}

/** Refused, naming the record: --supersede or quarantine it. */
function refuseUnreadable(contents: StoreContents): void {
  const [first] = contents.unreadable
  if (first === undefined) return
  throw errors.repairRefused(
    `intent record ${first.where}: ${first.why}; while it is in the store no box can read any intent, ` +
      `so a new record would not be read either: record with --supersede ${first.id} to move it aside ` +
      `in the same step, or \`layoutd intent quarantine ${first.id}\``,
  )
}

/** Its id sorts after every one in the store, the unreadable ones too. */
function newRecord(
  io: IntentIo,
  contents: StoreContents,
  r: { mode: Mode; force: boolean; box: string | undefined; message: string | undefined },
): IntentRecord {
  const now = (io.now ?? (() => new Date()))()
  const existing = [...contents.records.map((x) => x.id), ...contents.unreadable.map((u) => u.id)]
  return {
    id: newIntentId(now, existing, () => randomBytes(3).toString('hex')),
    mode: r.mode,
    force: r.force,
    ...(r.box === undefined ? {} : { box: r.box }),
    recordedAt: now.toISOString(),
    by: io.by ?? whoami(process.env),
    ...(r.message === undefined ? {} : { message: r.message }),
  }
}

/** Moves id aside with its replacement (design §7.4), saying where it went. */
async function quarantineWith(io: IntentIo, id: string, replacement: IntentRecord | undefined): Promise<void> {
  if (io.store.quarantine === undefined) throw errors.repairRefused(`${io.store.describe()} cannot quarantine records`)
  const where = await io.store.quarantine(id, replacement, AbortSignal.timeout(INTENT_TIMEOUT_MS))
  io.stdout.write(`quarantined intent record ${id}: moved to ${where} (still readable there)\n`)
}

interface QuarantineValues {
  record?: string
  box?: string
  fleet?: boolean
  'dry-run'?: boolean
  message?: string
}

/** --box (folded, checked) or --fleet of a replacement; undefined: the record's own. */
function replacementAddress(o: QuarantineValues): string | undefined {
  if (o.box !== undefined && o.fleet === true) throw errors.usage('--box and --fleet: give one')
  if (o.box === undefined) return o.fleet === true ? FLEET : undefined
  const box = o.box.toLowerCase()
  const why = hostError(box)
  if (why !== null) throw errors.invalidBoxLabel(o.box, why)
  return box
}

async function quarantine(io: IntentIo, id: string, o: QuarantineValues): Promise<number> {
  if (o.record !== undefined && !validMode(o.record))
    throw errors.usage(`--record ${JSON.stringify(o.record)}: nested or flat`)
  if (o.record === undefined && (o.box !== undefined || o.fleet === true || o.message !== undefined))
    throw errors.usage('--box, --fleet and -m say whom and why of the replacement: they go with --record')
  const message = checkedMessage(o.message)
  const address = replacementAddress(o)
  const contents = await readContents(io.store)
  const plan: RepairPlan = planRepair(contents, { id, mode: o.record, address })
  const dry = o['dry-run'] === true
  if (dry) io.stdout.write(`dry run: would quarantine ${repairWords(id, plan)}; nothing changed\n`)
  const r = plan.replacement
  const record =
    r === undefined ? undefined : newRecord(io, contents, { mode: r.mode, force: false, box: r.box, message })
  if (!dry) await quarantineWith(io, id, record)
  const whom = r?.box === undefined ? 'for the whole fleet' : `for box ${r.box}`
  if (record !== undefined && !dry)
    io.stdout.write(`recorded intent ${record.id}: ${record.mode} ${whom}, in its place\n`)
  if (r === undefined) io.stdout.write(`nothing ${dry ? 'would be ' : ''}recorded in its place: ${plan.after}\n`)
  return 0
}

async function history(io: IntentIo, boxOpt: string | undefined, json: boolean): Promise<number> {
  const box = boxOpt?.toLowerCase()
  if (box !== undefined && boxOpt !== undefined) {
    const why = hostError(box)
    if (why !== null) throw errors.invalidBoxLabel(boxOpt, why)
  }
  const contents = await readContents(io.store)
  const aside = (await io.store.listQuarantined?.(AbortSignal.timeout(INTENT_TIMEOUT_MS))) ?? []
  const rows = historyRows(contents, aside, box)
  if (json) {
    io.stdout.write(`${JSON.stringify({ records: rows }, null, 2)}\n`)
    return 0
  }
  const state = (s: string, note: string) => (s === 'recorded' ? '' : `[${s}: ${note}] `)
  const table = rows.map((r) => [r.id, r.mode, r.box, r.by, r.at, `${state(r.state, r.note)}${r.message}`])
  io.stdout.write(formatTable(['ID', 'MODE', 'BOX', 'WHO', 'WHEN', 'MESSAGE'], table))
  return 0
}

/** What would be recorded, and what this box would do, by its agent's report. */
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
  const { agentClient } = await import('../agent-client.js')
  return agentClient(io.config, undefined).status()
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

/** USER, else LOGNAME, else the uid's passwd entry. */
export function whoami(environ: NodeJS.ProcessEnv): string {
  let user = environ.USER ?? environ.LOGNAME ?? ''
  if (user === '') {
    try {
      user = os.userInfo().username
    } catch {
      // A uid with no passwd entry (common in containers) is still someone.
      user = `uid-${process.getuid?.() ?? 'unknown'}`
    }
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
      (i.message === undefined ? '' : `message   ${p(i.message)}\n`) +
      `force     ${i.force ? 'yes: awake instances are stopped at once' : 'no'}\n`
  } else if (s.mode === 'none') {
    out += 'intent    none addresses this box; the deployment default may stand in\n'
  }
  return out
}

async function showStatus(io: IntentIo, json: boolean): Promise<number> {
  const box = io.config.box
  // Read as the agent reads it: held to the intent this box last applied (design §7.7).
  const { KeptIntentStore } = await import('../../infra/applied-intent.js')
  const s = await readIntentStatus(new KeptIntentStore(io.store, { dirs: io.config, box, keep: false }), box)
  io.stdout.write(json ? `${JSON.stringify(s, null, 2)}\n` : formatIntentStatus(box, s))
  if (s.error === undefined) return 0
  // The report is printed either way; the verdict is the exit status.
  io.stderr.write(`${signature.failures}: intent unreadable: ${printable(s.error)}\n`)
  return 1
}

/** Removes D/layout/intent.applied, saying what it held (design §7.7). */
async function forgetApplied(io: IntentIo): Promise<number> {
  const { appliedIntentPath, forgetAppliedIntent, readAppliedIntent } = await import('../../infra/applied-intent.js')
  const file = appliedIntentPath(io.config)
  // One that cannot be read is forgotten too: it is what stops the box, and the operator asked.
  const kept = await readAppliedIntent(io.config).catch(() => undefined)
  if (!(await forgetAppliedIntent(io.config))) {
    io.stdout.write(`no applied intent is kept (${file}): nothing to forget\n`)
    return 0
  }
  const what =
    kept === undefined
      ? `the unreadable ${file}`
      : `intent ${printable(kept.id)} (${kept.mode}, read from ${printable(kept.store)} at ${kept.appliedAt})`
  io.stdout.write(
    `forgot ${what}: the agent reads the deploy store as it finds it from its next read ` +
      `(\`layoutd intent status\` shows what it will read)\n`,
  )
  return 0
}

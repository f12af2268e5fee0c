// `layoutd intent migrate|revert [--box LABEL] [--force]` records a layout
// intent in the deploy store; `layoutd intent status [--json]` shows the one
// this box would read (design §7, §8). Both act on the store directly: the
// agent need not run, and it picks a new record up on its next poll.
import { randomBytes } from 'node:crypto'
import os from 'node:os'
import { loadConfig } from '../../config.js'
import { hostError } from '../../domain/hostname.js'
import { INTENT_TIMEOUT_MS, loadLayoutIntent, newIntentId, type IntentRead } from '../../domain/intent.js'
import { validMode, type IntentMode, type Mode } from '../../domain/modes.js'
import type { DeployStore } from '../../domain/ports.js'
import type { IntentRecord } from '../../domain/schemas.js'
import { errorMessage, errors } from '../../errors.js'
import type { OptionsConfig, ParsedArgs } from '../args.js'
import { runGroup, type Cli, type Command, type CommandContext, type CommandGroup, type Signature } from '../command.js'

export const usage = `usage:
  layoutd intent migrate|revert [--box LABEL] [--force]
  layoutd intent status [--json]
`

const RECORD_USAGE = `usage:
  layoutd intent migrate|revert [--box LABEL] [--force]

  migrate     record the nested layout; revert: the flat one
  --box LABEL for one box only; default the whole fleet
  --force     stop awake instances at once instead of giving them their grace
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
}

const RECORD_OPTIONS = { box: { type: 'string' }, force: { type: 'boolean' } } as const

function recordCommand(mode: Mode): Command<typeof RECORD_OPTIONS, IntentIo> {
  return {
    usage: RECORD_USAGE,
    options: RECORD_OPTIONS,
    signature,
    run: ({ values }: ParsedArgs<typeof RECORD_OPTIONS>, io: IntentIo) => recordIntent(io, mode, values.box, values.force === true),
  }
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
  status: statusCommand,
}

export const group: CommandGroup<IntentIo> = {
  usage,
  signature,
  subcommand(name) {
    if (name === undefined) throw errors.usage('a subcommand is required')
    const command = Object.hasOwn(SUBCOMMANDS, name) ? SUBCOMMANDS[name] : undefined
    if (command === undefined) throw errors.usage(`unknown subcommand ${JSON.stringify(name)}`)
    return command
  },
}

/** Runs `intent <argv>` with a store the caller opened (tests, benchmarks). Resolves to the exit status. */
export function intentCommand(argv: readonly string[], io: IntentIo): Promise<number> {
  return runGroup(group, argv, io, (use) => use(io))
}

/** `layoutd intent …` from the command line: opens the deploy store for the command. */
export function main(argv: readonly string[], cli: Cli): Promise<number> {
  return runGroup(group, argv, cli, async (use) => {
    const config = loadConfig(cli.environ)
    const { openDeployStore } = await import('../../infra/deploy-store.js')
    const store = openDeployStore(config)
    try {
      return await use({ config, stdout: cli.stdout, stderr: cli.stderr, store })
    } finally {
      await store.close()
    }
  })
}

async function recordIntent(io: IntentIo, mode: Mode, asked: string | undefined, force: boolean): Promise<number> {
  // Folded as CARLOS_BOX is: hostnames compare without regard to case.
  const box = asked?.toLowerCase()
  if (asked !== undefined && box !== undefined) {
    const why = hostError(box)
    if (why !== null) throw errors.invalidBoxLabel(asked, why)
  }
  const now = (io.now ?? (() => new Date()))()
  // The new id must sort after every recorded one, so the store is read
  // first; a store that cannot be read refuses the record rather than risk
  // an id that sorts before the intent it means to supersede.
  const existing = (await io.store.list(AbortSignal.timeout(INTENT_TIMEOUT_MS))).map((r) => r.id)
  const record: IntentRecord = {
    id: newIntentId(now, existing, () => randomBytes(3).toString('hex')),
    mode,
    force,
    ...(box === undefined ? {} : { box }),
    recordedAt: now.toISOString(),
    by: io.by ?? whoami(),
  }
  await io.store.record(record, AbortSignal.timeout(INTENT_TIMEOUT_MS))
  io.stdout.write(
    `recorded intent ${record.id}: ${mode} ${box === undefined ? 'for the whole fleet' : `for box ${box}`}${force ? ' (forced)' : ''}\n`,
  )
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
    return { intent, mode: 'unreadable', error: `intent ${intent.id}: mode ${JSON.stringify(intent.mode)} is not flat or nested` }
  }
  return { intent, mode: intent.mode }
}

export function formatIntentStatus(box: string, s: IntentStatus): string {
  let out = `box       ${box}\nmode      ${s.mode}\n`
  if (s.intent !== null) {
    const i = s.intent
    out +=
      `intent    ${i.id} (${i.box === undefined ? 'the whole fleet' : `box ${i.box}`})\n` +
      `recorded  ${i.recordedAt} by ${i.by}\n` +
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
  io.stderr.write(`${signature.failures}: intent unreadable: ${s.error}\n`)
  return 1
}

// `layoutd intent migrate|revert [--box LABEL] [--force]` records a layout
// intent in the deploy store; `layoutd intent status [--json]` shows the one
// this box would read (DESIGN §7, §8). Both act on the store directly: the
// agent need not run, and it picks a new record up on its next poll.
import { randomBytes } from 'node:crypto'
import os from 'node:os'
import type { Config } from '../config.js'
import { hostError } from '../domain/hostname.js'
import { INTENT_TIMEOUT_MS, loadLayoutIntent, newIntentId, type IntentRead } from '../domain/intent.js'
import { validMode, type IntentMode, type Mode } from '../domain/modes.js'
import type { DeployStore } from '../domain/ports.js'
import type { IntentRecord } from '../domain/schemas.js'
import { parseCommandArgs, UsageError } from './args.js'

export interface IntentIo {
  config: Config
  stdout: NodeJS.WritableStream
  stderr: NodeJS.WritableStream
  /** The caller opens the store and closes it after the command. */
  store: DeployStore
  now?: () => Date
  /** Who records the intent; default `<user>@<hostname>`. */
  by?: string
}

export const INTENT_USAGE = `usage:
  layoutd intent migrate|revert [--box LABEL] [--force]
  layoutd intent status [--json]
`

export async function intentCommand(argv: string[], io: IntentIo): Promise<number> {
  const [sub, ...rest] = argv
  try {
    if (sub === 'migrate' || sub === 'revert') {
      const { values } = parseCommandArgs(rest, { box: { type: 'string' }, force: { type: 'boolean' } })
      return await recordIntent(io, sub === 'migrate' ? 'nested' : 'flat', values.box, values.force === true)
    }
    if (sub === 'status') {
      const { values } = parseCommandArgs(rest, { json: { type: 'boolean' } })
      return await showStatus(io, values.json === true)
    }
    throw new UsageError(sub === undefined ? 'a subcommand is required' : `unknown subcommand ${JSON.stringify(sub)}`)
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr.write(`layoutd intent: ${err.message}\n${INTENT_USAGE}`)
      return 2
    }
    io.stderr.write(`layoutd intent: ${err instanceof Error ? err.message : String(err)}\n`)
    return 1
  }
}

async function recordIntent(io: IntentIo, mode: Mode, box: string | undefined, force: boolean): Promise<number> {
  if (box !== undefined) {
    const why = hostError(box)
    if (why !== null) {
      io.stderr.write(`layoutd intent: --box ${JSON.stringify(box)} is not a box label: ${why}\n`)
      return 1
    }
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
    return { intent: null, mode: 'unreadable', error: `${store.describe()}: ${err instanceof Error ? err.message : String(err)}` }
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
  io.stderr.write(`layoutd intent: intent unreadable: ${s.error}\n`)
  return 1
}

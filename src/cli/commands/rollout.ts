// `layoutd fleet rollout migrate|revert|status|history|pause|resume|abort|
// retry|skip|promote` (design §7.6, §8): records a staged rollout in the
// etcd deploy store, shows it and its events, and changes it as an
// operator asks, each change with its event in one transaction. The agents
// open the waves themselves, so nothing of the operator's keeps running.
import { randomBytes } from 'node:crypto'
import os from 'node:os'
import { INTENT_TIMEOUT_MS, newIntentId } from '../../domain/intent.js'
import type { DeployStore } from '../../domain/ports.js'
import {
  changeEvent,
  cutWaves,
  DEFAULT_PROGRESS_DEADLINE_MS,
  eventLine,
  isDone,
  isFinal,
  isSkipped,
  newestFirst,
  ON_FAILURE,
  operatorChange,
  parseWaves,
  placeOf,
  progressLine,
  rolloutCounts,
  waveState,
  type BoxProgress,
  type OnFailure,
  type OperatorAction,
  type RolloutPort,
  type RolloutRecord,
  type StoredRollout,
} from '../../domain/rollout.js'
import { howGone } from '../../domain/box-summary.js'
import type { IntentRecord } from '../../domain/schemas.js'
import { errorMessage, errors } from '../../errors.js'
import type { ParsedArgs } from '../args.js'
import type { Command, CommandContext, Signature } from '../command.js'
import { formatTable } from '../table.js'

export const ROLLOUT_USAGE = `usage:
  layoutd fleet rollout migrate|revert --waves 1,10%,pause,50%,100% [--max-parallel N]
                        [--progress-deadline 10m] [--on-failure pause|revert|freeze]
                        [--max-failed-rows N] [--force] [-m MSG]
  layoutd fleet rollout revert --now [-m MSG]
  layoutd fleet rollout status [--json] [--wait [--timeout S]] | history [ID] [--json]
  layoutd fleet rollout pause|resume|abort|promote [-m MSG]
  layoutd fleet rollout retry BOX [-m MSG] | skip BOX -m WHY

  migrate|revert  record a staged rollout toward nested (flat); the boxes are
                  the live ones now, each in its wave for good; the agents
                  open each wave once the one before it passed
  --waves         cumulative: a count of boxes or a percentage; the last is 100%;
                  pause between two items is a manual gate: the rollout waits
                  (state waiting) until promote opens the next wave
  --max-parallel  at most N boxes of a wave move at once (default: the whole wave)
  --progress-deadline  a wave not passed this long after it opened pauses the
                  rollout (default 10m; s, m or h)
  --on-failure    what a failed wave does: pause (default), revert (the boxes
                  that moved go back), freeze (ends where it is)
  --max-failed-rows  rows of a wave's boxes not in the layout a wave may end with (default 0)
  --now           revert only: no waves, every box at once
  status --wait   wait until the rollout is done (exit 0) or stops otherwise (exit 1)
  history         the rollout's events, newest first (the one in play, or ID)
  promote         open the next wave now (past a manual gate, or before the open wave passed)
  retry BOX       the box runs its leg again on the rollout's intent and says its progress anew
  skip BOX -m WHY leave the box out of this rollout's verdicts and lanes, recorded with why
`

export const signature: Signature = { failures: 'layoutd fleet rollout', usageErrors: 'layoutd fleet rollout' }

export interface RolloutIo extends CommandContext {
  store: DeployStore
  at?: () => Date
  by?: string
  /** Between two reads of status --wait; default 1 s. */
  everyMs?: number
  /** A new id's random part; default 3 random bytes in hex. */
  idSuffix?: () => string
}

export const ROLLOUT_OPTIONS = {
  waves: { type: 'string' },
  'max-parallel': { type: 'string' },
  'progress-deadline': { type: 'string' },
  'on-failure': { type: 'string' },
  'max-failed-rows': { type: 'string' },
  force: { type: 'boolean' },
  now: { type: 'boolean' },
  message: { type: 'string', short: 'm' },
  json: { type: 'boolean' },
  wait: { type: 'boolean' },
  timeout: { type: 'string' },
} as const
type Values = ParsedArgs<typeof ROLLOUT_OPTIONS>['values']

/** Any other option is a usage error. */
const TAKES: Record<string, readonly string[]> = {
  migrate: ['waves', 'max-parallel', 'progress-deadline', 'on-failure', 'max-failed-rows', 'force', 'message'],
  revert: ['waves', 'max-parallel', 'progress-deadline', 'on-failure', 'max-failed-rows', 'force', 'message', 'now'],
  status: ['json', 'wait', 'timeout'],
  history: ['json'],
  pause: ['message'],
  resume: ['message'],
  abort: ['message'],
  promote: ['message'],
  retry: ['message'],
  skip: ['message'],
}

/** Actions that name a box, and the one that may name a rollout. */
const ARGUMENT: Record<string, string> = { retry: 'BOX', skip: 'BOX', history: 'ID' }

export const rolloutCommand: Command<typeof ROLLOUT_OPTIONS, RolloutIo> = {
  usage: ROLLOUT_USAGE,
  options: ROLLOUT_OPTIONS,
  positionals: ['ACTION', 'ARG?'],
  signature,
  run: (args, io) => runRollout(args.positionals[0] ?? '', args.positionals[1], args.values, io),
}

/** Checked before anything is read: bad input changes nothing. */
function checkArgs(action: string, arg: string | undefined, v: Values): void {
  const takes = Object.hasOwn(TAKES, action) ? TAKES[action] : undefined
  if (takes === undefined) throw errors.usage(`unknown action ${JSON.stringify(action)}`)
  const given = Object.keys(v).filter((k) => k !== 'help' && v[k as keyof Values] !== undefined)
  const stray = given.find((k) => !takes.includes(k))
  if (stray !== undefined) throw errors.usage(`--${stray} does not go with ${action}`)
  const wants = Object.hasOwn(ARGUMENT, action) ? ARGUMENT[action] : undefined
  if (wants === undefined && arg !== undefined) throw errors.usage(`${action} takes no argument (got ${arg})`)
  if (wants === 'BOX' && arg === undefined) throw errors.usage(`${action} needs the BOX`)
  if (action === 'skip' && (v.message ?? '').trim() === '')
    throw errors.usage('skip needs -m WHY: a box left out of a rollout is recorded with why')
  if (v.message !== undefined && v.message.length > 1000) throw errors.usage('-m: at most 1,000 characters')
}

async function runRollout(action: string, arg: string | undefined, v: Values, io: RolloutIo): Promise<number> {
  checkArgs(action, arg, v)
  // Refused before any option is weighed: on the directory store no rollout can be.
  const port = io.store.rollouts?.()
  if (port === undefined) throw errors.rolloutNeedsEtcd(io.store.describe())
  if (action === 'migrate' || action === 'revert') {
    if (v.now === true) return revertNow(port, v, io)
    return record(port, action === 'migrate' ? 'nested' : 'flat', v, io)
  }
  if (action === 'status') return status(port, v, io)
  if (action === 'history') return history(port, arg, v, io)
  return change(port, action as OperatorAction['kind'], arg, v, io)
}

/** `10m`, `90s`, `1h` in ms. */
export function parseDuration(text: string): number {
  const m = /^([0-9]{1,6})(s|m|h)$/.exec(text)
  if (m === null) throw errors.usage(`--progress-deadline ${JSON.stringify(text)}: a duration like 90s, 10m or 1h`)
  return Number(m[1]) * { s: 1000, m: 60_000, h: 3_600_000 }[m[2] as 's' | 'm' | 'h']
}

function whole(name: string, text: string | undefined, min: number): number | undefined {
  if (text === undefined) return undefined
  if (!/^[0-9]{1,6}$/.test(text) || Number(text) < min)
    throw errors.usage(`--${name} ${JSON.stringify(text)}: a whole number, at least ${min}`)
  return Number(text)
}

/** `user@host` or the caller's `by`, as records and events name it. */
export function recorder(io: { by?: string }): string {
  if (io.by !== undefined) return io.by
  let user: string
  try {
    user = os.userInfo().username
  } catch {
    user = `uid-${process.getuid?.() ?? 'unknown'}`
  }
  return `${user}@${os.hostname()}`
}

function rolloutOptions(v: Values) {
  if (v.waves === undefined) throw errors.usage('--waves is required (like 1,10%,50%,100%), or --now for revert')
  let specs
  try {
    specs = parseWaves(v.waves)
  } catch (err) {
    throw errors.usage(errorMessage(err))
  }
  const onFailure = v['on-failure'] ?? 'pause'
  if (!(ON_FAILURE as readonly string[]).includes(onFailure))
    throw errors.usage(`--on-failure ${JSON.stringify(onFailure)}: pause, revert or freeze`)
  return {
    specs,
    maxParallel: whole('max-parallel', v['max-parallel'], 1),
    deadlineMs: v['progress-deadline'] === undefined ? undefined : parseDuration(v['progress-deadline']),
    onFailure: onFailure as OnFailure,
    maxFailedRows: whole('max-failed-rows', v['max-failed-rows'], 0) ?? 0,
  }
}

/** Refused while one runs or is paused: one rollout at a time. */
async function noneInPlay(port: RolloutPort, signal: AbortSignal) {
  const seen = await port.active(signal)
  const cur = seen.current?.record
  if (cur !== undefined && !isFinal(cur))
    throw errors.rolloutConflict(
      `rollout ${cur.id} is ${cur.state} (wave ${cur.wave + 1}/${cur.waves.length}): ` +
        'let it end, or `layoutd fleet rollout abort` it, before recording another',
    )
  return seen
}

async function newId(io: RolloutIo, port: RolloutPort, signal: AbortSignal): Promise<string> {
  const [records, rollouts] = await Promise.all([io.store.list(signal), port.list(signal)])
  const ids = [...records.map((r) => r.id), ...rollouts.map((r) => r.record.id)]
  return newIntentId(io.at?.() ?? new Date(), ids, io.idSuffix ?? (() => randomBytes(3).toString('hex')))
}

async function record(port: RolloutPort, mode: 'nested' | 'flat', v: Values, io: RolloutIo): Promise<number> {
  const o = rolloutOptions(v)
  const signal = AbortSignal.timeout(INTENT_TIMEOUT_MS)
  const seen = await noneInPlay(port, signal)
  const boxes = [...(await port.liveBoxes(signal))]
  const id = await newId(io, port, signal)
  let waves: string[][]
  let gates: number[]
  try {
    ;({ waves, gates } = cutWaves(id, boxes, o.specs))
  } catch (err) {
    throw errors.rolloutConflict(errorMessage(err))
  }
  const at = (io.at?.() ?? new Date()).toISOString()
  const r: RolloutRecord = {
    id,
    mode,
    force: v.force === true,
    waves,
    maxParallel: o.maxParallel ?? Math.max(...waves.map((w) => w.length)),
    progressDeadlineMs: o.deadlineMs ?? DEFAULT_PROGRESS_DEADLINE_MS,
    onFailure: o.onFailure,
    maxFailedRows: o.maxFailedRows,
    state: 'running',
    wave: 0,
    waveOpenedAt: at,
    reason: '',
    recordedAt: at,
    by: recorder(io),
    message: v.message ?? '',
    ...(gates.length === 0 ? {} : { gates }),
  }
  const event = changeEvent(undefined, r, at, r.by, { message: v.message })
  if (!(await port.create(r, seen, signal, event)))
    throw errors.rolloutConflict('another rollout was recorded meanwhile: see `layoutd fleet rollout status`')
  const gated = gates.length === 0 ? '' : `; waves ${gates.map((g) => g + 1).join(', ')} open on promote`
  io.stdout.write(
    `recorded rollout ${id} toward ${mode}: ${waves.length} waves of ${waves.map((w) => w.length).join(', ')} ` +
      `boxes, at most ${r.maxParallel} moving at once${gated}; the agents open each wave\n`,
  )
  await printLeft(port, id, signal, io)
  return 0
}

/** The state left, counted as the next `status` counts it. */
async function printLeft(port: RolloutPort, id: string, signal: AbortSignal, io: RolloutIo): Promise<void> {
  const s = await port.get(id, signal)
  if (s === undefined) return
  io.stdout.write(`${progressLine(s.record, await port.progress(id, undefined, signal))}\n`)
}

async function revertNow(port: RolloutPort, v: Values, io: RolloutIo): Promise<number> {
  const signal = AbortSignal.timeout(INTENT_TIMEOUT_MS)
  const { current } = await port.active(signal)
  const running = current !== undefined && !isFinal(current.record) ? current : undefined
  const intent: IntentRecord = {
    id: await newId(io, port, signal),
    mode: 'flat',
    force: false,
    recordedAt: (io.at?.() ?? new Date()).toISOString(),
    by: recorder(io),
    ...(v.message === undefined ? {} : { message: v.message }),
  }
  const event =
    running === undefined
      ? undefined
      : changeEvent(
          running.record,
          {
            ...running.record,
            state: 'aborted',
            cause: 'superseded',
            reason: `superseded by intent ${intent.id}`,
          },
          intent.recordedAt,
          intent.by,
          { kind: 'aborted', message: v.message },
        )
  if (!(await port.recordIntentAborting(intent, running, signal, event)))
    throw errors.rolloutConflict('the rollout changed meanwhile; nothing recorded: run the command again')
  const aborted = running === undefined ? '' : `; rollout ${running.record.id} aborted`
  io.stdout.write(`recorded intent ${intent.id}: every box to flat at once${aborted}\n`)
  if (running !== undefined) await printLeft(port, running.record.id, signal, io)
  return 0
}

/** A compare-and-swap with the change's event in one transaction, tried again if an agent changed it first. */
async function change(
  port: RolloutPort,
  kind: OperatorAction['kind'],
  box: string | undefined,
  v: Values,
  io: RolloutIo,
): Promise<number> {
  const signal = AbortSignal.timeout(INTENT_TIMEOUT_MS)
  for (let attempt = 0; attempt < 10; attempt++) {
    const { current } = await port.active(signal)
    if (current === undefined) throw errors.rolloutConflict('no rollout was ever recorded')
    const r = current.record
    let action: OperatorAction
    if (kind === 'retry' || kind === 'skip') {
      const b = box ?? ''
      const started = kind === 'retry' && (await startedIn(port, r, b, signal))
      action = { kind, box: b, started }
    } else action = { kind }
    const at = (io.at?.() ?? new Date()).toISOString()
    const out = operatorChange(r, action, { by: recorder(io), at, message: v.message })
    if ('refused' in out)
      throw out.refused === 'box' ? errors.rolloutUnknownBox(out.why) : errors.rolloutConflict(out.why)
    if (await port.update(current, out.next, signal, undefined, out.event)) {
      await printLeft(port, r.id, signal, io)
      return 0
    }
  }
  throw errors.rolloutConflict('the rollout kept changing under the command; run it again')
}

/** In its own wave; false for a box in none. */
async function startedIn(port: RolloutPort, r: RolloutRecord, box: string, signal: AbortSignal): Promise<boolean> {
  const wave = r.waves.findIndex((w) => w.includes(box))
  return wave >= 0 && port.hasStarted(r.id, box, wave, signal)
}

/** The events of the rollout in play (or of ID), newest first. */
async function history(port: RolloutPort, id: string | undefined, v: Values, io: RolloutIo): Promise<number> {
  const signal = AbortSignal.timeout(INTENT_TIMEOUT_MS)
  const s = id === undefined ? (await port.active(signal)).current : await port.get(id, signal)
  if (s === undefined)
    throw errors.rolloutConflict(id === undefined ? 'no rollout was ever recorded' : `no rollout ${id}`)
  const events = newestFirst(await port.events(s.record.id, signal))
  if (v.json === true) io.stdout.write(`${JSON.stringify({ rollout: s.record.id, events }, null, 2)}\n`)
  else {
    io.stdout.write(`rollout ${s.record.id}: ${events.length} events, newest first\n`)
    for (const e of events) io.stdout.write(`${eventLine(e)}\n`)
  }
  return 0
}

/** undefined when none was ever recorded. */
export async function readRollout(
  port: RolloutPort,
  signal: AbortSignal,
): Promise<{ rollout: StoredRollout; progress: Map<string, BoxProgress> } | undefined> {
  const { current } = await port.active(signal)
  if (current === undefined) return undefined
  return { rollout: current, progress: await port.progress(current.record.id, undefined, signal) }
}

export function formatRollout(r: RolloutRecord, progress: ReadonlyMap<string, BoxProgress>): string {
  const rows = r.waves.map((w, i) => {
    const c = rolloutCounts(r, progress, i)
    return [
      String(i + 1),
      String(w.length),
      String(c.done),
      String(c.moving),
      String(c.failedRows),
      String(c.deferredRows),
      String(c.skipped),
      waveState(r, i),
    ]
  })
  const table = formatTable(
    ['WAVE', 'BOXES', 'DONE', 'MOVING', 'FAILED ROWS', 'DEFERRED ROWS', 'SKIPPED', 'STATE'],
    rows,
  )
  const by = `recorded ${r.recordedAt} by ${r.by}${r.message === '' ? '' : `: ${r.message}`}`
  return `${progressLine(r, progress)}\n${by}\n${table}\n`
}

/** Boxes the rollout still waits on that are gone: each would fail its wave (design §7.6), so `--wait` ends. */
async function goneWaitedOn(
  io: RolloutIo,
  port: RolloutPort,
  read: { rollout: StoredRollout; progress: Map<string, BoxProgress> },
  signal: AbortSignal,
): Promise<string[]> {
  const r = read.rollout.record
  const waited = r.waves
    .slice(r.wave)
    .flat()
    .filter((b) => !isSkipped(r, b) && !isDone(r, b, read.progress.get(b)))
  if (waited.length === 0) return []
  const live = await port.liveBoxes(signal)
  const gone = waited.filter((b) => !live.has(b))
  if (gone.length === 0) return []
  const since = new Map<string, string>()
  if (io.store.listKnownBoxes !== undefined)
    for (const k of await io.store.listKnownBoxes(signal))
      if (k.gone !== undefined) since.set(k.summary.box, ` since ${k.gone.since} (${howGone(k.gone)})`)
  return gone.map(
    (b) =>
      `box ${b} of wave ${(placeOf(r, b)?.wave ?? 0) + 1} is gone${since.get(b) ?? ''}: rollout ${r.id} ` +
      `cannot pass its wave until its agent is back (or \`layoutd fleet rollout skip ${b} -m WHY\`)`,
  )
}

async function status(port: RolloutPort, v: Values, io: RolloutIo): Promise<number> {
  if (v.timeout !== undefined && v.wait !== true) throw errors.usage('--timeout goes with --wait')
  const timeoutS = whole('timeout', v.timeout, 1) ?? 3600
  const deadline = Date.now() + timeoutS * 1000
  const readNow = () => readRollout(port, AbortSignal.timeout(INTENT_TIMEOUT_MS))
  let read = await readNow()
  if (read === undefined) throw errors.rolloutConflict('no rollout was ever recorded')
  const goneNow = (s: NonNullable<typeof read>) =>
    v.wait === true && s.rollout.record.state === 'running'
      ? goneWaitedOn(io, port, s, AbortSignal.timeout(INTENT_TIMEOUT_MS))
      : Promise.resolve([])
  let gone = await goneNow(read)
  let said = ''
  while (v.wait === true && read.rollout.record.state === 'running' && gone.length === 0 && Date.now() < deadline) {
    const line = `waiting: ${progressLine(read.rollout.record, read.progress)}\n`
    if (line !== said) io.stderr.write(line)
    said = line
    await new Promise((r) => setTimeout(r, io.everyMs ?? 1000))
    read = (await readNow()) ?? read
    gone = await goneNow(read)
  }
  const { record: r } = read.rollout
  if (v.json === true)
    io.stdout.write(`${JSON.stringify({ rollout: r, progress: Object.fromEntries(read.progress) }, null, 2)}\n`)
  else io.stdout.write(formatRollout(r, read.progress))
  if (v.wait !== true || r.state === 'done') return 0
  if (gone.length > 0) {
    for (const why of gone) io.stderr.write(`${signature.failures}: ${why}\n`)
    return 1
  }
  // Paused, waiting at a gate, frozen, reverted, aborted, or still running at the timeout: not done.
  const left = r.state === 'running' ? ` after waiting ${timeoutS}s` : ''
  io.stderr.write(
    `${signature.failures}: rollout ${r.id} is ${r.state}${r.reason === '' ? '' : `: ${r.reason}`}${left}\n`,
  )
  return 1
}

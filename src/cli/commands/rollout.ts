// `layoutd fleet rollout migrate|revert|status|pause|resume|abort` (design
// §7.6, §8): records a staged rollout in the etcd deploy store, shows it,
// and pauses, resumes or aborts it. The command only records: the agents
// open the waves themselves, so nothing of the operator's has to keep
// running. `revert --now` skips the waves: one fleet-wide intent, and the
// rollout in play aborted in the same transaction. The directory store,
// serving one box, refuses rollouts.
import { randomBytes } from 'node:crypto'
import os from 'node:os'
import { INTENT_TIMEOUT_MS, newIntentId } from '../../domain/intent.js'
import type { DeployStore } from '../../domain/ports.js'
import {
  assignWaves,
  DEFAULT_PROGRESS_DEADLINE_MS,
  isFinal,
  ON_FAILURE,
  parseWaves,
  progressLine,
  type BoxProgress,
  type OnFailure,
  type RolloutPort,
  type RolloutRecord,
  type StoredRollout,
} from '../../domain/rollout.js'
import type { IntentRecord } from '../../domain/schemas.js'
import { errorMessage, errors } from '../../errors.js'
import type { ParsedArgs } from '../args.js'
import type { Command, CommandContext, Signature } from '../command.js'
import { formatTable } from '../table.js'

export const ROLLOUT_USAGE = `usage:
  layoutd fleet rollout migrate|revert --waves 1,10%,50%,100% [--max-parallel N]
                        [--progress-deadline 10m] [--on-failure pause|revert|freeze]
                        [--max-failed-rows N] [--force] [-m MSG]
  layoutd fleet rollout revert --now [-m MSG]
  layoutd fleet rollout status [--json] [--wait [--timeout S]] | pause | resume | abort [-m MSG]

  migrate|revert  record a staged rollout toward nested (flat); the boxes are
                  the live ones now, each in its wave for good; the agents
                  open each wave once the one before it passed
  --waves         cumulative: a count of boxes or a percentage; the last is 100%
  --max-parallel  at most N boxes of a wave move at once (default: the whole wave)
  --progress-deadline  a wave not passed this long after it opened pauses the
                  rollout (default 10m; s, m or h)
  --on-failure    what a failed wave does: pause (default), revert (the boxes
                  that moved go back), freeze (ends where it is)
  --max-failed-rows  rows of a wave's boxes not in the layout a wave may end with (default 0)
  --now           revert only: no waves, every box at once
  status --wait   wait until the rollout is done (exit 0) or stops otherwise (exit 1)
`

export const signature: Signature = { failures: 'layoutd fleet rollout', usageErrors: 'layoutd fleet rollout' }

export interface RolloutIo extends CommandContext {
  store: DeployStore
  /** The time of a record; default now. */
  at?: () => Date
  by?: string
  /** Between two reads of status --wait; default 1 s. */
  everyMs?: number
  /** The random part of a new id; default 3 random bytes in hex. */
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

/** Which options each action takes; any other is a usage error. */
const TAKES: Record<string, readonly string[]> = {
  migrate: ['waves', 'max-parallel', 'progress-deadline', 'on-failure', 'max-failed-rows', 'force', 'message'],
  revert: ['waves', 'max-parallel', 'progress-deadline', 'on-failure', 'max-failed-rows', 'force', 'message', 'now'],
  status: ['json', 'wait', 'timeout'],
  pause: ['message'],
  resume: ['message'],
  abort: ['message'],
}

export const rolloutCommand: Command<typeof ROLLOUT_OPTIONS, RolloutIo> = {
  usage: ROLLOUT_USAGE,
  options: ROLLOUT_OPTIONS,
  positionals: ['ACTION'],
  signature,
  run: (args, io) => runRollout(args.positionals[0] ?? '', args.values, io),
}

async function runRollout(action: string, v: Values, io: RolloutIo): Promise<number> {
  const takes = Object.hasOwn(TAKES, action) ? TAKES[action] : undefined
  if (takes === undefined) throw errors.usage(`unknown action ${JSON.stringify(action)}`)
  const given = Object.keys(v).filter((k) => k !== 'help' && v[k as keyof Values] !== undefined)
  const stray = given.find((k) => !takes.includes(k))
  if (stray !== undefined) throw errors.usage(`--${stray} does not go with ${action}`)
  // Refused before any option is weighed: on the directory store no rollout can be.
  const port = io.store.rollouts?.()
  if (port === undefined) throw errors.rolloutNeedsEtcd(io.store.describe())
  if (action === 'migrate' || action === 'revert') {
    if (v.now === true) return revertNow(port, v, io)
    return record(port, action === 'migrate' ? 'nested' : 'flat', v, io)
  }
  if (action === 'status') return status(port, v, io)
  return change(port, action as 'pause' | 'resume' | 'abort', v, io)
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

function recorder(io: RolloutIo): string {
  if (io.by !== undefined) return io.by
  let user: string
  try {
    user = os.userInfo().username
  } catch {
    user = `uid-${process.getuid?.() ?? 'unknown'}`
  }
  return `${user}@${os.hostname()}`
}

/** The options of a rollout, checked; bad input changes nothing. */
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

/** The rollout in play, refused when one still runs or is paused: one rollout at a time. */
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
  try {
    waves = assignWaves(id, boxes, o.specs)
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
  }
  if (!(await port.create(r, seen, signal)))
    throw errors.rolloutConflict('another rollout was recorded meanwhile: see `layoutd fleet rollout status`')
  io.stdout.write(
    `recorded rollout ${id} toward ${mode}: ${waves.length} waves of ${waves.map((w) => w.length).join(', ')} ` +
      `boxes, at most ${r.maxParallel} moving at once; the agents open each wave\n`,
  )
  return 0
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
  }
  if (!(await port.recordIntentAborting(intent, running, signal)))
    throw errors.rolloutConflict('the rollout changed meanwhile; nothing recorded: run the command again')
  const aborted = running === undefined ? '' : `; rollout ${running.record.id} aborted`
  io.stdout.write(`recorded intent ${intent.id}: every box to flat at once${aborted}\n`)
  return 0
}

/** pause, resume, abort: a compare-and-swap on the record, tried again when an agent changed it first. */
async function change(port: RolloutPort, action: 'pause' | 'resume' | 'abort', v: Values, io: RolloutIo) {
  const signal = AbortSignal.timeout(INTENT_TIMEOUT_MS)
  for (let attempt = 0; attempt < 10; attempt++) {
    const { current } = await port.active(signal)
    if (current === undefined) throw errors.rolloutConflict('no rollout was ever recorded')
    const next = changed(current, action, v, io)
    if (await port.update(current, next, signal)) {
      io.stdout.write(`${progressLine(next, new Map())}\n`)
      return 0
    }
  }
  throw errors.rolloutConflict('the rollout kept changing under the command; run it again')
}

function changed(s: StoredRollout, action: 'pause' | 'resume' | 'abort', v: Values, io: RolloutIo): RolloutRecord {
  const r = s.record
  const who = `${recorder(io)}${v.message === undefined ? '' : `: ${v.message}`}`
  const refuse = (why: string) => errors.rolloutConflict(`rollout ${r.id} is ${r.state}: ${why}`)
  if (action === 'pause') {
    if (r.state !== 'running') throw refuse('only a running rollout pauses')
    return { ...r, state: 'paused', reason: `paused by ${who}` }
  }
  if (action === 'resume') {
    if (r.state !== 'paused') throw refuse('only a paused rollout resumes')
    // The deadline starts again: a pause is not progress the wave failed to make.
    return { ...r, state: 'running', reason: '', waveOpenedAt: (io.at?.() ?? new Date()).toISOString() }
  }
  if (isFinal(r)) throw refuse('it is over')
  return { ...r, state: 'aborted', reason: `aborted by ${who}` }
}

/** The rollout in play and its progress, or undefined when none was ever recorded. */
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
    const done = w.filter((b) => progress.get(b)?.done === true)
    const failed = done.reduce((n, b) => n + (progress.get(b)?.failedRows ?? 0), 0)
    const moving = w.filter((b) => progress.get(b)?.done === false).length
    const state = i < r.wave || r.state === 'done' ? 'passed' : i === r.wave ? r.state : 'waiting'
    return [String(i + 1), String(w.length), String(done.length), String(moving), String(failed), state]
  })
  const table = formatTable(['WAVE', 'BOXES', 'DONE', 'MOVING', 'FAILED ROWS', 'STATE'], rows)
  const by = `recorded ${r.recordedAt} by ${r.by}${r.message === '' ? '' : `: ${r.message}`}`
  return `${progressLine(r, progress)}\n${by}\n${table}\n`
}

async function status(port: RolloutPort, v: Values, io: RolloutIo): Promise<number> {
  if (v.timeout !== undefined && v.wait !== true) throw errors.usage('--timeout goes with --wait')
  const timeoutS = whole('timeout', v.timeout, 1) ?? 3600
  const deadline = Date.now() + timeoutS * 1000
  let read = await readRollout(port, AbortSignal.timeout(INTENT_TIMEOUT_MS))
  if (read === undefined) throw errors.rolloutConflict('no rollout was ever recorded')
  let said = ''
  while (v.wait === true && read.rollout.record.state === 'running' && Date.now() < deadline) {
    const line = `waiting: ${progressLine(read.rollout.record, read.progress)}\n`
    if (line !== said) io.stderr.write(line)
    said = line
    await new Promise((r) => setTimeout(r, io.everyMs ?? 1000))
    read = (await readRollout(port, AbortSignal.timeout(INTENT_TIMEOUT_MS))) ?? read
  }
  const { record: r } = read.rollout
  if (v.json === true)
    io.stdout.write(`${JSON.stringify({ rollout: r, progress: Object.fromEntries(read.progress) }, null, 2)}\n`)
  else io.stdout.write(formatRollout(r, read.progress))
  if (v.wait !== true || r.state === 'done') return 0
  io.stderr.write(`${signature.failures}: rollout ${r.id} is ${r.state}${r.reason === '' ? '' : `: ${r.reason}`}\n`)
  return 1
}

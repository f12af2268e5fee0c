// `layoutd fleet status [--json] [--wait [--timeout S] | --watch]` and
// `layoutd fleet forget BOX [-m WHY]` (design §7.3, §8): every box's
// summary against the intent addressing it, a gone box kept in view until
// it is back or forgotten; exit 0 only when all have converged and no
// rollout in play is stopped or under way.
import {
  boxWord,
  fleetView,
  howGone,
  rolloutRunning,
  rolloutStopped,
  summaryLine,
  type BoxGone,
  type KeptBox,
} from '../../domain/box-summary.js'
import { hostError } from '../../domain/hostname.js'
import { INTENT_TIMEOUT_MS } from '../../domain/intent.js'
import { fleetRecords, isDone, isFinal, isSkipped } from '../../domain/rollout.js'
import type { DeployStore } from '../../domain/ports.js'
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
import { formatFleet, type FleetRead } from '../fleet-table.js'
import { printable } from '../../domain/printable.js'
import { recorder, ROLLOUT_USAGE, rolloutCommand } from './rollout.js'
import { screenSize } from '../status-view.js'

/** Cut from ROLLOUT_USAGE, so the two never disagree. */
const ROLLOUT_LINES = ROLLOUT_USAGE.slice('usage:\n'.length, ROLLOUT_USAGE.indexOf('\n\n') + 1)

export const usage = `usage:
  layoutd fleet status [--json] [--wait [--timeout S] | --watch]
  layoutd fleet forget BOX [-m WHY]
${ROLLOUT_LINES}`

const STATUS_USAGE = `usage:
  layoutd fleet status [--json] [--wait [--timeout S] | --watch]

  every box, the intent addressing it and its state (converged, converging, running, needs you, no intent,
  unreadable, gone); exit 0 only when every box has converged to it and no rollout in play is stopped or
  under way. A box whose agent is gone stays, with its last summary, until it is back or forgotten
  --json       print {"boxes": [...], "converged", "converging", "held", "gone", "allConverged", "rollout", ...}
  --wait       read again every second until every box has converged; exit 1 at once, naming each box and
               why, when a box is gone or leaves before it converged, when the rollout in play is paused,
               frozen or aborted, or when what remains needs a person (held or refused rows, a kept
               journal, an unreadable record)
  --timeout S  give up waiting after S seconds (default 600), exit 1
  --watch      the table, redrawn every 2 s in place on a terminal (a new copy on each change elsewhere);
               Ctrl-C ends
`

const FORGET_USAGE = `usage:
  layoutd fleet forget BOX [-m WHY]

  forgets a box whose agent is gone (retired, renamed): its last summary leaves the fleet's view.
  Refused while its agent is live, and for a box the store does not know
  -m WHY       why, printed with what was forgotten
`

export const signature: Signature = { failures: 'layoutd fleet', usageErrors: 'layoutd fleet' }

export interface FleetIo extends CommandContext {
  /** Opened and closed by the caller. */
  store: DeployStore
  /** Who runs the command; default `user@host`. */
  by?: string
  now?: () => number
  /** Between reads of --wait (default 1 s) or draws of --watch (2 s). */
  everyMs?: number
  /** Stdout is a terminal: --watch redraws in place. */
  tty?: boolean
  /** --watch fits the table to it. */
  size?: () => { rows: number; columns: number } | undefined
  /** Calls redraw on SIGWINCH; answers how to stop. */
  onResize?: (redraw: () => void) => () => void
  /** Ends --watch (stdout's reader went away). */
  stop?: AbortSignal
}

const STATUS_OPTIONS = {
  json: { type: 'boolean' },
  wait: { type: 'boolean' },
  timeout: { type: 'string' },
  watch: { type: 'boolean' },
} as const

const statusCommand: Command<typeof STATUS_OPTIONS, FleetIo> = {
  usage: STATUS_USAGE,
  options: STATUS_OPTIONS,
  signature,
  run: (args: ParsedArgs<typeof STATUS_OPTIONS>, io: FleetIo) => fleetStatus(io, args.values),
}

const FORGET_OPTIONS = { message: { type: 'string', short: 'm' } } as const

const forgetCommand: Command<typeof FORGET_OPTIONS, FleetIo> = {
  usage: FORGET_USAGE,
  options: FORGET_OPTIONS,
  positionals: ['BOX'],
  signature,
  run: (args: ParsedArgs<typeof FORGET_OPTIONS>, io: FleetIo) =>
    fleetForget(io, args.positionals[0] ?? '', args.values.message),
}

const SUBCOMMANDS: Record<string, Command<OptionsConfig, FleetIo>> = {
  status: statusCommand,
  forget: forgetCommand,
  rollout: rolloutCommand,
}

export const group: CommandGroup<FleetIo> = {
  usage,
  signature,
  subcommand: subcommandIn(SUBCOMMANDS),
}

/** Runs `fleet <argv>` on a store the caller opened (tests, benchmarks). */
export function fleetCommand(argv: readonly string[], io: FleetIo): Promise<number> {
  return runGroup(group, argv, io, (use) => use(io))
}

/** `layoutd fleet …`, with the deploy store opened for it. */
export function main(argv: readonly string[], cli: Cli): Promise<number> {
  const tty = (cli.stdout as { isTTY?: boolean }).isTTY === true
  return runGroup(group, argv, cli, (use) =>
    withDeployStore(cli)((ctx) =>
      use({
        ...ctx,
        tty,
        size: () => screenSize(cli.stdout),
        onResize: (redraw) => {
          process.on('SIGWINCH', redraw)
          return () => process.removeListener('SIGWINCH', redraw)
        },
        stop: cli.readerGone,
      }),
    ),
  )
}

/** Every box the store knows, gone ones with since when. */
async function knownBoxes(store: DeployStore, signal: AbortSignal): Promise<KeptBox[]> {
  if (store.listKnownBoxes !== undefined) return store.listKnownBoxes(signal)
  if (store.listBoxes === undefined) throw new Error(`${store.describe()} keeps no box summaries`)
  return (await store.listBoxes(signal)).map((summary) => ({ summary }))
}

/** An unreadable record is named in the view, not thrown. */
export async function readFleet(store: DeployStore): Promise<FleetRead> {
  const signal = AbortSignal.timeout(INTENT_TIMEOUT_MS)
  const contents = store.inspect?.(signal) ?? store.list(signal).then((records) => ({ records, unreadable: [] }))
  const [{ records, unreadable }, known, rollout] = await Promise.all([
    contents,
    knownBoxes(store, signal),
    rolloutInPlay(store, signal),
  ])
  const gone = new Map<string, BoxGone>()
  for (const b of known) if (b.gone !== undefined) gone.set(b.summary.box, b.gone)
  // A box that started in the rollout in play is on its intent, as its agent reads it (design §7.6).
  const judged = fleetRecords(records, rollout?.record, rollout?.progress ?? new Map())
  const view = fleetView(
    known.map((b) => b.summary),
    judged,
    unreadable,
    gone,
  )
  return { view, records, rollout }
}

/** The rollout in play and its boxes' progress. */
async function rolloutInPlay(store: DeployStore, signal: AbortSignal) {
  const port = store.rollouts?.()
  if (port === undefined) return undefined
  const { current } = await port.active(signal)
  if (current === undefined) return undefined
  return { record: current.record, progress: await port.progress(current.record.id, undefined, signal) }
}

function toJson(read: FleetRead): string {
  const v = read.view
  const boxes = v.rows.map((r) => ({
    ...r.summary,
    wants: r.wants,
    state: r.state,
    word: boxWord(r),
    needs: r.needs,
    gone: r.gone,
  }))
  const { converged, converging, held, gone, allConverged, fleetIntent, unreadable } = v
  const r = read.rollout?.record
  const rollout =
    r === undefined ? null : { id: r.id, state: r.state, reason: r.reason, stopped: rolloutStopped(r, read.records) }
  const out = { boxes, converged, converging, held, gone, allConverged, fleetIntent, unreadable, rollout }
  return `${JSON.stringify(out, null, 2)}\n`
}

/** Why --wait ends before every box converged. */
function waitEnds(read: FleetRead, seen: Map<string, boolean>): string[] {
  const v = read.view
  const listed = new Set(v.rows.map((r) => r.summary.box))
  const why: string[] = []
  for (const r of v.rows)
    if (r.gone !== null)
      why.push(
        `box ${r.summary.box} is gone since ${r.gone.since} (${howGone(r.gone)}): it does not converge ` +
          `until its agent is back (\`layoutd fleet forget ${r.summary.box}\` once it is retired)`,
      )
  for (const [box, done] of seen)
    if (!done && !listed.has(box))
      why.push(`box ${box} left before it converged (its summary is gone: its agent stopped or died)`)
  for (const u of v.unreadable) why.push(`intent record ${u.id} cannot be read (${u.where}: ${u.why})`)
  const stopped = rolloutStopped(read.rollout?.record, read.records)
  if (stopped !== null) why.push(`${stopped} (\`layoutd fleet rollout status\`)`)
  const waiting = v.rows.filter((r) => r.state === 'converging')
  // Only when nothing else moves: a moving box may clear what another waits on.
  if (waiting.length > 0 && waiting.every((r) => r.needs !== null))
    for (const r of waiting) why.push(`box ${r.summary.box} needs a person: ${r.needs}`)
  for (const r of v.rows) seen.set(r.summary.box, (seen.get(r.summary.box) ?? false) || r.state === 'converged')
  return why
}

function arrived(read: FleetRead): boolean {
  const r = read.rollout?.record
  return read.view.allConverged && !rolloutRunning(r, read.records) && rolloutStopped(r, read.records) === null
}

type StatusValues = ParsedArgs<typeof STATUS_OPTIONS>['values']

function refuseMixed(o: StatusValues): void {
  if (o.timeout !== undefined && o.wait !== true) throw errors.usage('--timeout goes with --wait')
  if (o.timeout !== undefined && !/^[0-9]{1,6}$/.test(o.timeout))
    throw errors.usage(`--timeout ${JSON.stringify(o.timeout)}: a whole number of seconds, like 600`)
  if (o.watch === true && (o.wait === true || o.json === true))
    throw errors.usage('--watch goes alone: not with --wait or --json')
}

async function fleetStatus(io: FleetIo, o: StatusValues): Promise<number> {
  refuseMixed(o)
  if (o.watch === true) return fleetWatch(io)
  const now = io.now ?? (() => Date.now())
  const deadline = now() + Number(o.timeout ?? '600') * 1000
  let read = await readFleet(io.store)
  const seen = new Map<string, boolean>()
  let ended = waitEnds(read, seen)
  if (o.wait === true) {
    let said = ''
    while (!arrived(read) && ended.length === 0 && now() < deadline) {
      const line = `waiting: ${summaryLine(read.view)}\n`
      // Progress on stderr, once per change: stdout stays the final answer.
      if (line !== said) io.stderr.write(line)
      said = line
      await new Promise((r) => setTimeout(r, io.everyMs ?? 1000))
      read = await readFleet(io.store)
      ended = waitEnds(read, seen)
    }
  }
  io.stdout.write(o.json === true ? toJson(read) : formatFleet(read, now()))
  if (o.wait === true && ended.length > 0) {
    for (const why of ended) io.stderr.write(`${signature.failures}: ${why}\n`)
    return 1
  }
  if (arrived(read)) return 0
  io.stderr.write(
    `${signature.failures}: ${notThere(read)}${o.wait === true ? ` after waiting ${o.timeout ?? '600'}s` : ''}\n`,
  )
  return 1
}

/** Why exit status 1, without --wait or on a timeout. */
function notThere(read: FleetRead): string {
  const v = read.view
  if (v.rows.length === 0) return 'no box has reported'
  if (!v.allConverged) return `${v.rows.length - v.converged} of ${v.rows.length} boxes have not converged`
  const r = read.rollout?.record
  return rolloutStopped(r, read.records) ?? `rollout ${r?.id ?? ''} is under way`
}

export const WATCH_EVERY_MS = 2_000

/** As `status --watch` (design §8), a silent store said above the last table read. */
async function fleetWatch(io: FleetIo): Promise<number> {
  const stop = new AbortController()
  const end = () => stop.abort()
  process.once('SIGINT', end)
  io.stop?.addEventListener('abort', end, { once: true })
  try {
    await watchLoop(io, io.everyMs ?? WATCH_EVERY_MS, stop.signal)
  } finally {
    process.removeListener('SIGINT', end)
    io.stop?.removeEventListener('abort', end)
  }
  return 0
}

async function watchLoop(io: FleetIo, everyMs: number, signal: AbortSignal): Promise<void> {
  const now = io.now ?? (() => Date.now())
  const tty = io.tty === true
  let read: FleetRead | undefined
  let readAt = 0
  let trouble = ''
  let troubleSince = 0
  let last = ''
  const draw = () => {
    if (signal.aborted) return
    const at = now()
    const dead =
      trouble === ''
        ? ''
        : `the deploy store is not answering since ${new Date(troubleSince).toISOString()}: ${printable(trouble)}\n` +
          (read === undefined ? '' : `the fleet as read at ${new Date(readAt).toISOString()}:\n`)
    const size = tty ? io.size?.() : undefined
    const fit = size === undefined ? undefined : { ...size, rows: size.rows - (dead === '' ? 0 : 2) }
    const page = read === undefined ? '' : formatFleet(read, trouble === '' ? at : readAt, fit)
    // Elsewhere a copy only when what was read changed: ages moving on make none.
    const said = JSON.stringify([trouble, read?.view, read?.rollout?.record, [...(read?.rollout?.progress ?? [])]])
    if (tty) io.stdout.write(`\x1b[H\x1b[2J${dead}${page}(every ${everyMs / 1000}s; Ctrl-C ends)\n`)
    else if (said !== last) io.stdout.write(`--- ${new Date(at).toISOString()}\n${dead}${page}`)
    last = said
  }
  const unhook = io.onResize?.(draw)
  try {
    while (!signal.aborted) {
      try {
        read = await readFleet(io.store)
        readAt = now()
        trouble = ''
      } catch (err) {
        const why = errorMessage(err)
        if (why !== trouble) io.stderr.write(`${signature.failures}: ${printable(why)}\n`)
        if (trouble === '') troubleSince = now()
        trouble = why
      }
      draw()
      await pause(everyMs, signal)
    }
  } finally {
    unhook?.()
  }
}

const pause = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(done, ms)
    function done() {
      clearTimeout(timer)
      signal.removeEventListener('abort', done)
      resolve()
    }
    signal.addEventListener('abort', done, { once: true })
  })

/** The store refuses a live box and an unknown one. */
async function fleetForget(io: FleetIo, given: string, why: string | undefined): Promise<number> {
  const box = given.toLowerCase()
  const bad = hostError(box)
  if (bad !== null) throw errors.invalidBoxLabel(given, bad)
  if (io.store.forgetBox === undefined) throw new Error(`${io.store.describe()} keeps no box summaries`)
  const signal = AbortSignal.timeout(INTENT_TIMEOUT_MS)
  const kept = await io.store.forgetBox(box, signal)
  const gone = kept.gone === undefined ? '' : ` (gone since ${kept.gone.since}, ${howGone(kept.gone)})`
  // Who and why are printed: the store keeps no event of a forget.
  io.stdout.write(
    `forgot box ${box}${gone}; its last summary was from ${kept.summary.at}; by ${recorder(io)}` +
      `${why === undefined || why === '' ? '' : `: ${why}`}\n`,
  )
  const inPlay = await rolloutInPlay(io.store, signal)
  const r = inPlay?.record
  const wave = r === undefined ? -1 : r.waves.findIndex((w) => w.includes(box))
  if (
    r !== undefined &&
    !isFinal(r) &&
    wave >= r.wave &&
    !isSkipped(r, box) &&
    !isDone(r, box, inPlay?.progress.get(box))
  )
    io.stdout.write(
      `box ${box} is in wave ${wave + 1} of rollout ${r.id}, which waits on it: ` +
        `\`layoutd fleet rollout skip ${box} -m WHY\` leaves it out\n`,
    )
  return 0
}

// `layoutd status [HOST] [--watch | --wait-ready [--timeout S]]` (design
// §8): asks the running agent for its report and prints it
// (src/cli/status-view.ts); for one host, reads its journal or hold marker
// when the data root is here.
import fs from 'node:fs/promises'
import path from 'node:path'
import { hostError } from '../../domain/hostname.js'
import { otherMode, secondNameFile } from '../../domain/pass-plan.js'
import { pathsFor, type Dirs } from '../../domain/paths.js'
import { printable } from '../../domain/printable.js'
import { operatorRows } from '../../domain/short-of-intent.js'
import type { LayoutReport } from '../../domain/schemas.js'
import { loadConfig } from '../../config.js'
import { AppError, errorMessage, errors } from '../../errors.js'
import { fillAdvice, type AdviceFacts } from '../advice.js'
import { agentClient, type AgentClient } from '../agent-client.js'
import type { ParsedArgs } from '../args.js'
import { PROGRAM, runCommand, type Cli, type CommandContext, type Scope } from '../command.js'
import {
  ansi,
  formatReport,
  plain,
  relative,
  screenLines,
  span,
  wantsColour,
  whatToDo,
  type Paint,
  screenSize,
} from '../status-view.js'

export const usage = `usage:
  layoutd status [--url URL] [--json]             the report: a summary line, then every row
  layoutd status HOST [--url URL] [--json]        one host: word, reason, note, paths, journal or hold, what to do
  layoutd status --problems [--url URL]           the same, only the rows that are not clean
  layoutd status --check [--problems] [--json]    the report, then exit 1 naming the rows a person must act on
                                                  (held, refused, kept, missing, conflict, foreign); 0 when none
  layoutd status --watch [--problems] [--url URL] the report, redrawn as it changes, fitted to the terminal
                                                  (Ctrl-C ends it)
  layoutd status --wait-ready [--timeout S]       wait until the agent answers ready; exit 1 after S seconds (30)

  --url URL      the agent to ask; default the one D/agent.json names, else http:// + CARLOS_AGENT_LISTEN
  --json         print the report (or the host's row) as JSON
  Colour only on a terminal, and never with NO_COLOR set.
`

export const options = {
  url: { type: 'string' },
  json: { type: 'boolean' },
  problems: { type: 'boolean' },
  check: { type: 'boolean' },
  watch: { type: 'boolean' },
  'wait-ready': { type: 'boolean' },
  timeout: { type: 'string' },
} as const

export const signature = PROGRAM

/** How often --watch asks (a 304 while unchanged) and --wait-ready asks. */
export const WATCH_EVERY_MS = 2_000
export const READY_EVERY_MS = 250
export const READY_TIMEOUT_S = 30

/** The longest one ask of --wait-ready may take. */
const READY_ASK_MS = 2_000

export interface StatusContext extends CommandContext {
  paint: Paint
  /** Stdout is a terminal: --watch redraws in place. */
  tty: boolean
  now: () => number
  /** Aborted when stdout's reader went away: --watch ends. */
  readerGone?: AbortSignal
  /** --watch fits the report to it. */
  size?: () => ScreenSize | undefined
  /** Calls redraw on SIGWINCH; answers how to stop. */
  onResize?: (redraw: () => void) => () => void
}

const pause = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(done, ms)
    function done() {
      clearTimeout(timer)
      signal?.removeEventListener('abort', done)
      resolve()
    }
    signal?.addEventListener('abort', done, { once: true })
  })

function timeoutSeconds(text: string | undefined): number {
  if (text === undefined) return READY_TIMEOUT_S
  const s = Number(text)
  if (!/^[0-9]+(\.[0-9]+)?$/.test(text) || s <= 0)
    throw errors.usage(`--timeout ${JSON.stringify(text)}: a number of seconds above zero, like 30`)
  return s
}

/** Rows `--check` names before `and N more`. */
const CHECK_NAMES = 20

/** Exit 1 when the intent is unreadable or rows need a person. */
function checkRows(report: LayoutReport, stderr: NodeJS.WritableStream): number {
  // An unreadable intent moves nothing until a person acts (design §7.7).
  const unreadable = report.mode === 'unreadable'
  if (unreadable)
    stderr.write('layoutd: the intent is unreadable: nothing moves until an operator acts (see warnings)\n')
  const rows = operatorRows(report)
  if (rows.length === 0) return unreadable ? 1 : 0
  const named = rows.slice(0, CHECK_NAMES).map((r) => `${printable(r.host)} (${r.code})`)
  const more = rows.length > CHECK_NAMES ? `, and ${rows.length - CHECK_NAMES} more` : ''
  const word = rows.length === 1 ? 'row needs' : 'rows need'
  stderr.write(`layoutd: ${rows.length} ${word} an operator: ${named.join(', ')}${more}\n`)
  return 1
}

/** Another data root's agent will not become ours by waiting. */
const WRONG_AGENT: ReadonlySet<string> = new Set(['agent_other_data_root', 'agent_unidentified'])

/** 0 once /ready answers 200, 1 at the timeout. */
export async function waitReady(
  client: AgentClient,
  url: string,
  seconds: number,
  { stdout, stderr }: CommandContext,
  askMs = READY_ASK_MS,
): Promise<number> {
  const deadline = Date.now() + seconds * 1000
  let last = 'no answer yet'
  let answered = false
  for (;;) {
    const left = deadline - Date.now()
    if (left <= 0) break
    // The last ask is given what is left of the wait, however little.
    const untilTheEnd = left <= askMs
    try {
      const r = await client.ready(Math.max(1, Math.min(left, askMs)))
      if (r.ready) {
        stdout.write(`layoutd at ${url} is ready\n`)
        return 0
      }
      last = `layoutd is ${r.phase}`
      answered = true
    } catch (err) {
      if (err instanceof AppError && WRONG_AGENT.has(err.code)) throw err
      // An ask cut short by the wait's own end says nothing: the last answer stands.
      const cutShort = untilTheEnd && ((err as Error).cause as NodeJS.ErrnoException | undefined)?.code === 'ETIMEDOUT'
      if (!(answered && cutShort)) last = errorMessage(err)
    }
    await pause(Math.min(READY_EVERY_MS, Math.max(0, deadline - Date.now())))
  }
  stderr.write(`layoutd: not ready after ${seconds}s: ${last}\n`)
  return 1
}

export interface ScreenSize {
  rows: number
  columns: number
}

/**
 * Asks with the ETag (a 304 costs the agent nothing); a terminal is redrawn every time, elsewhere a copy is
 * printed only on change; a silent agent is said above its last report.
 */
export async function watch(
  client: AgentClient,
  ctx: StatusContext,
  everyMs: number,
  signal: AbortSignal,
  problems = false,
): Promise<number> {
  let etag: string | undefined
  let report: LayoutReport | undefined
  let answeredAt = 0
  let trouble = ''
  let troubleSince = 0
  const draw = (changed: boolean) => {
    if (signal.aborted || (!changed && !ctx.tty)) return
    const now = ctx.now()
    const stamp = new Date(now).toISOString()
    const dead =
      trouble === ''
        ? ''
        : `agent not answering since ${new Date(troubleSince).toISOString()} (${span(now - troubleSince)}): ` +
          `${printable(trouble)}\n` +
          (report === undefined ? '' : `its last report, as it stood at ${new Date(answeredAt).toISOString()}:\n`)
    const size = ctx.tty ? ctx.size?.() : undefined
    const fit = size === undefined ? undefined : { ...size, rows: size.rows - screenLines(dead, size.columns) }
    const page =
      report === undefined ? '' : formatReport(report, trouble === '' ? now : answeredAt, ctx.paint, { problems, fit })
    ctx.stdout.write(
      ctx.tty ? `\x1b[H\x1b[2J${dead}${page}(every ${everyMs / 1000}s; Ctrl-C ends)\n` : `--- ${stamp}\n${dead}${page}`,
    )
  }
  const unhook = ctx.onResize?.(() => draw(true))
  try {
    while (!signal.aborted) {
      let changed = false
      try {
        const got = await client.statusIfChanged(etag)
        if (got !== null) ({ report, etag } = got)
        changed = got !== null || trouble !== ''
        answeredAt = ctx.now()
        trouble = ''
      } catch (err) {
        const why = errorMessage(err)
        if (why !== trouble) ctx.stderr.write(`layoutd: ${printable(why)}\n`)
        changed = trouble === ''
        if (trouble === '') troubleSince = ctx.now()
        trouble = why
      }
      draw(changed)
      await pause(everyMs, signal)
    }
  } finally {
    unhook?.()
  }
  return 0
}

/** A host's journal or hold marker as JSON, when this data root holds one. */
async function layoutFile(
  dataDir: string | undefined,
  host: string,
  suffix: string,
): Promise<Record<string, unknown> | undefined> {
  if (dataDir === undefined || hostError(host) !== null) return undefined
  try {
    return JSON.parse(await fs.readFile(path.join(dataDir, 'layout', host + suffix), 'utf8')) as Record<string, unknown>
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    return { unreadable: errorMessage(err) }
  }
}

const str = (v: unknown): string => (typeof v === 'string' ? v : JSON.stringify(v))

/** The advice's placeholders; a held host's files are at the other end from its `to`. */
function adviceFacts(host: string, dirs: Dirs | undefined, hold: Record<string, unknown> | undefined): AdviceFacts {
  const facts: AdviceFacts = { host, journal: host }
  if (dirs === undefined || hostError(host) !== null) return facts
  facts.dataDir = dirs.dataDir
  const to = hold?.to
  if (to === 'flat' || to === 'nested') facts.dir = pathsFor(dirs, host, otherMode(to)).dir
  if (typeof hold?.reason === 'string') facts.file = secondNameFile(hold.reason)
  return facts
}

/** Its word, reason, note, wake paths, journal or hold, and what to do. */
export async function describeHost(
  client: AgentClient,
  host: string,
  dataDir: string | undefined,
  ctx: StatusContext,
  json: boolean,
): Promise<number> {
  const report = await client.status()
  const row = Object.hasOwn(report.rows, host) ? report.rows[host] : undefined
  if (row === undefined)
    throw errors.notFound(
      `${host} is not a row of ${report.box}'s report ` +
        `(only instance rows are; \`layoutd routes list\` shows every row)`,
    )
  const [wake, journal, hold] = await Promise.all([
    client.wake(host).catch((err: unknown) => ({ granted: false as const, reason: errorMessage(err) })),
    layoutFile(dataDir, host, '.journal'),
    layoutFile(dataDir, host, '.hold'),
  ])
  const todo = fillAdvice(
    whatToDo(row, { journal: journal !== undefined, hold: hold !== undefined }, report.mode),
    adviceFacts(host, dataDir === undefined ? undefined : ctx.config, hold),
  )
  if (json) {
    ctx.stdout.write(
      JSON.stringify({ host, ...row, wake, journal: journal ?? null, hold: hold ?? null, todo }, null, 2) + '\n',
    )
    return 0
  }
  const now = ctx.now()
  const lines: Array<[string, string]> = [
    ['code', row.code || '-'],
    ['reason', row.reason || '-'],
    ['note', row.note || '-'],
  ]
  if (wake.granted)
    lines.push(['paths', `dir ${wake.dir}, socket ${wake.socket}${wake.db === '' ? '' : `, db ${wake.db}`}`])
  else lines.push(['wake', `refused: ${wake.reason}`])
  if (journal !== undefined) {
    const from = (journal.from as { dir?: unknown } | undefined)?.dir
    const dest = (journal.dest as { dir?: unknown } | undefined)?.dir
    lines.push([
      'journal',
      journal.unreadable !== undefined
        ? `unreadable: ${str(journal.unreadable)}`
        : `moving to ${str(journal.to)}, journaled ${relative(str(journal.startedAt), now)}: ` +
          `${str(from)} -> ${str(dest)}`,
    ])
  }
  if (hold !== undefined) {
    lines.push([
      'hold',
      hold.unreadable !== undefined
        ? `unreadable: ${str(hold.unreadable)}`
        : `toward ${str(hold.to)}, held ${relative(str(hold.heldAt), now)}: ${str(hold.reason)}`,
    ])
  }
  lines.push(['to do', todo])
  // Every value may carry outside text: each is shown printable.
  ctx.stdout.write(
    `${printable(host)}  ${ctx.paint(row.layout)}\n` +
      lines.map(([k, v]) => `  ${k.padEnd(8)}${printable(v)}\n`).join(''),
  )
  return 0
}

function refuseMixed(v: ParsedArgs<typeof options>['values'], host: string | undefined): void {
  const modes = [v.watch === true, v['wait-ready'] === true, host !== undefined].filter(Boolean).length
  if (modes > 1) throw errors.usage('HOST, --watch and --wait-ready go one at a time')
  if (v.timeout !== undefined && v['wait-ready'] !== true) throw errors.usage('--timeout goes with --wait-ready')
  if (v.json === true && (v.watch === true || v['wait-ready'] === true))
    throw errors.usage('--json goes with the report or HOST, not --watch or --wait-ready')
  if (v.problems === true && (host !== undefined || v['wait-ready'] === true || v.json === true))
    throw errors.usage('--problems goes with the report or --watch, not HOST, --json or --wait-ready')
  if (v.check === true && (host !== undefined || v.watch === true || v['wait-ready'] === true))
    throw errors.usage('--check goes with the report, not HOST, --watch or --wait-ready')
}

export async function run(args: ParsedArgs<typeof options>, ctx: StatusContext): Promise<number> {
  const v = args.values
  const host = args.positionals[0]
  refuseMixed(v, host)
  const client = agentClient(ctx.config, v.url)
  const url = client.url
  if (v['wait-ready'] === true) return waitReady(client, url, timeoutSeconds(v.timeout), ctx)
  // Journal and hold only from this box's data root: with --url the agent may be another's.
  if (host !== undefined)
    return describeHost(client, host, v.url === undefined ? ctx.config.dataDir : undefined, ctx, v.json === true)
  if (v.watch === true) {
    const stop = new AbortController()
    const end = () => stop.abort()
    process.once('SIGINT', end)
    ctx.readerGone?.addEventListener('abort', end, { once: true })
    try {
      return await watch(client, ctx, WATCH_EVERY_MS, stop.signal, v.problems === true)
    } finally {
      process.removeListener('SIGINT', end)
      ctx.readerGone?.removeEventListener('abort', end)
    }
  }
  const report = await client.status()
  ctx.stdout.write(
    v.json === true
      ? JSON.stringify(report, null, 2) + '\n'
      : formatReport(report, ctx.now(), ctx.paint, { problems: v.problems === true }),
  )
  return v.check === true ? checkRows(report, ctx.stderr) : 0
}

/** The configuration loaded now, colour by the rule. */
export function statusScope(cli: Cli): Scope<StatusContext> {
  const tty = (cli.stdout as { isTTY?: boolean }).isTTY === true
  const paint = wantsColour(cli.stdout as { isTTY?: boolean }, cli.environ) ? ansi : plain
  return (use) =>
    use({
      config: loadConfig(cli.environ),
      stdout: cli.stdout,
      stderr: cli.stderr,
      paint,
      tty,
      now: Date.now,
      readerGone: cli.readerGone,
      size: () => screenSize(cli.stdout),
      onResize: (redraw) => {
        process.on('SIGWINCH', redraw)
        return () => process.removeListener('SIGWINCH', redraw)
      },
    })
}

export function main(argv: readonly string[], cli: Cli): Promise<number> {
  return runCommand({ usage, options, positionals: ['HOST?'], signature, run }, argv, cli, statusScope(cli))
}

// `layoutd converge [--url URL] [--wait]` (design §8): kicks the agent's
// leg; --wait follows the run (and one under way at the kick) and exits 1
// when any host failed, was refused or is held.
import { printable } from '../../domain/printable.js'
import { hostsReached } from '../../domain/leg.js'
import type { LegRun } from '../../domain/schemas.js'
import { AppError } from '../../errors.js'
import { agentClient, type AgentClient } from '../agent-client.js'
import type { ParsedArgs } from '../args.js'
import { PROGRAM, runCommand, withConfig, type Cli, type CommandContext } from '../command.js'
import { summarize } from '../status-view.js'

export const usage = `usage:
  layoutd converge [--url URL] [--wait]           kick the leg; --wait follows the run

  --url URL   the agent to ask; default the one D/agent.json names, else http:// + CARLOS_AGENT_LISTEN
  --wait      show progress until the run ends; exit 1 when a host failed, was refused or is held
`

export const options = { url: { type: 'string' }, wait: { type: 'boolean' } } as const

export const signature = PROGRAM

export const PROGRESS_EVERY_MS = 500

export { summarize }

/** --wait exits 1 on these: the leg will not fix them without an operator. */
export const NEEDS_OPERATOR: ReadonlySet<string> = new Set(['failed', 'refused', 'held'])

type Stdout = CommandContext['stdout']

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

export async function run(args: ParsedArgs<typeof options>, { config, stdout }: CommandContext): Promise<number> {
  const client = agentClient(config, args.values.url)
  if (args.values.wait !== true) {
    const leg = await client.kick()
    stdout.write(
      `converge requested (leg ${leg.running ? 'running' : 'idle'}${leg.pending ? ', another run pending' : ''})\n`,
    )
    return 0
  }
  let done = false
  const runDone = client.waitRun().finally(() => {
    done = true
  })
  await showProgress(client, stdout, runDone, () => done)
  const { run: finished, underWay } = await finishedRun(client, runDone)
  // The run under way at the kick moved the hosts, so both runs are said, that one first.
  if (underWay !== null && underWay.results.length > 0)
    stdout.write(
      `the run under way when asked (started ${underWay.startedAt}): ` +
        `${summarize(underWay.results)}, ${hostsReached(underWay.results)} hosts\n`,
    )
  return reportRun(finished, stdout, underWay !== null)
}

async function showProgress(
  client: AgentClient,
  stdout: Stdout,
  runDone: Promise<unknown>,
  done: () => boolean,
): Promise<void> {
  let shown = ''
  let waitingShown = ''
  let runShown = ''
  while (!done()) {
    await Promise.race([runDone.catch(() => undefined), pause(PROGRESS_EVERY_MS)])
    if (done()) break
    const report = await client.status()
    const leg = report.leg
    const current = leg.running && leg.lastRun !== null && leg.lastRun.finishedAt === null ? leg.lastRun : null
    if (current !== null) {
      if (runShown !== '' && current.startedAt !== runShown)
        stdout.write(`then the run this kick asked for, started ${current.startedAt}\n`)
      runShown = current.startedAt
      const rows = Object.keys(report.rows).length
      const line = `running: ${hostsReached(current.results)} of ${rows} host${rows === 1 ? '' : 's'} done\n`
      if (line !== shown) stdout.write(line)
      shown = line
    }
    // What the run waits on, said on each change: an awake tenant's stop can take a minute.
    const waiting = leg.running ? (leg.waiting ?? '') : ''
    if (waiting !== '' && waiting !== waitingShown) stdout.write(`waiting for ${printable(waiting)}\n`)
    waitingShown = waiting
  }
}

function finishedRun(
  client: AgentClient,
  runDone: Promise<{ run: LegRun; underWay: LegRun | null }>,
): Promise<{ run: LegRun; underWay: LegRun | null }> {
  return runDone.catch(async (err: unknown) => {
    // The agent bounds a wait; this command follows a longer run until the leg is idle.
    if (!(err instanceof AppError && err.code === 'converge_timeout')) throw err
    for (;;) {
      const leg = await client.leg()
      if (!leg.running && !leg.pending && leg.lastRun !== null) return { run: leg.lastRun, underWay: null }
      await pause(PROGRESS_EVERY_MS)
    }
  })
}

function reportRun(finished: LegRun, stdout: Stdout, followUp: boolean): number {
  for (const r of finished.results) {
    // A thousand 'moved' lines would hide the few that need an operator.
    if (r.outcome !== 'unchanged' && r.outcome !== 'moved')
      stdout.write(`${printable(r.host) || '(run)'}: ${r.outcome}${r.reason ? ` -> ${printable(r.reason)}` : ''}\n`)
  }
  stdout.write(`done${followUp ? ' (the run this kick asked for)' : ''}: ${summarize(finished.results)}\n`)
  const stuck = finished.results.filter((r) => NEEDS_OPERATOR.has(r.outcome))
  if (stuck.length === 0) return 0
  stdout.write(
    `${stuck.length} host${stuck.length === 1 ? '' : 's'} failed, refused or held: ` +
      `\`layoutd status HOST\` says what to do (docs/runbook.md#outcomes)\n`,
  )
  return 1
}

export function main(argv: readonly string[], cli: Cli): Promise<number> {
  return runCommand({ usage, options, signature, run }, argv, cli, withConfig(cli))
}

// `layoutd converge [--url URL] [--wait]`: kicks the agent's leg. With
// --wait it follows the run that kick asked for, printing progress as hosts
// finish, and exits 1 when any host failed.
import type { Result } from '../domain/modes.js'
import { AppError } from '../errors.js'
import { AgentClient, agentUrl } from './agent-client.js'
import { parseCommandArgs } from './args.js'
import type { CliIo } from './status.js'

const PROGRESS_EVERY_MS = 500

export function summarize(results: readonly Result[]): string {
  const counts = new Map<string, number>()
  for (const r of results) counts.set(r.outcome, (counts.get(r.outcome) ?? 0) + 1)
  if (counts.size === 0) return 'no host to move'
  return [...counts].map(([o, n]) => `${n} ${o}`).join(', ')
}

export async function convergeCommand(argv: string[], io: CliIo): Promise<number> {
  const { values } = parseCommandArgs(argv, { url: { type: 'string' }, wait: { type: 'boolean' } })
  const client = new AgentClient(agentUrl(io.config, values.url), io.config.token)
  if (values.wait !== true) {
    const leg = await client.kick()
    io.stdout.write(`converge requested (leg ${leg.running ? 'running' : 'idle'}${leg.pending ? ', another run pending' : ''})\n`)
    return 0
  }
  let done = false
  const run = client.waitRun().finally(() => {
    done = true
  })
  let shown = -1
  while (!done) {
    await Promise.race([run.catch(() => undefined), new Promise((r) => setTimeout(r, PROGRESS_EVERY_MS))])
    if (done) break
    const leg = await client.leg()
    const n = leg.running ? (leg.lastRun?.results.length ?? 0) : -1
    if (n >= 0 && n !== shown) {
      io.stdout.write(`running: ${n} host${n === 1 ? '' : 's'} done\n`)
      shown = n
    }
  }
  const finished = await run.catch(async (err: unknown) => {
    // The agent bounds a wait (10 minutes); a longer run goes on, and so
    // does this command, following the leg until it is idle.
    if (!(err instanceof AppError && err.code === 'converge_timeout')) throw err
    for (;;) {
      const leg = await client.leg()
      if (!leg.running && !leg.pending && leg.lastRun !== null) return leg.lastRun
      await new Promise((r) => setTimeout(r, PROGRESS_EVERY_MS))
    }
  })
  for (const r of finished.results) {
    // A thousand 'moved' lines would hide the few that need an operator.
    if (r.outcome !== 'unchanged' && r.outcome !== 'moved') io.stdout.write(`${r.host || '(run)'}: ${r.outcome}${r.reason ? ` -> ${r.reason}` : ''}\n`)
  }
  io.stdout.write(`done: ${summarize(finished.results)}\n`)
  return finished.results.some((r) => r.outcome === 'failed') ? 1 : 0
}

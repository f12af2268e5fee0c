// `layoutd status [--url URL] [--json]` (design §8): the running agent's
// report, as a table an operator reads at a glance, or as JSON for a script.
import type { LayoutReport } from '../../domain/schemas.js'
import { AgentClient, agentUrl } from '../agent-client.js'
import type { ParsedArgs } from '../args.js'
import { PROGRAM, runCommand, withConfig, type Cli, type CommandContext } from '../command.js'
import { formatTable } from '../table.js'

export const usage = `usage:
  layoutd status [--url URL] [--json]             the report, as a table or JSON

  --url URL   the agent to ask; default http:// + CARLOS_AGENT_LISTEN
  --json      print the report as JSON
`

export const options = { url: { type: 'string' }, json: { type: 'boolean' } } as const

export const signature = PROGRAM

export function formatReport(r: LayoutReport): string {
  let out = `box ${r.box}  mode ${r.mode}${r.default ? ' (nested by default)' : ''}\n`
  if (r.defaultBlocked !== '') out += `default: ${r.defaultBlocked}\n`
  const leg = r.leg.running ? 'running' : r.leg.pending ? 'pending' : 'idle'
  out += `leg ${leg}${r.leg.retryAt ? `, retry at ${r.leg.retryAt}` : ''}\n\n`
  const hosts = Object.keys(r.rows).sort()
  out += formatTable(
    ['HOST', 'LAYOUT', 'REASON', 'NOTE'],
    hosts.map((host) => {
      const row = r.rows[host]
      return [host, row?.layout ?? '', row?.reason ?? '', row?.note ?? '']
    }),
  )
  for (const warning of r.warnings) out += `\nwarning: ${warning}`
  return r.warnings.length > 0 ? out + '\n' : out
}

export async function run(args: ParsedArgs<typeof options>, { config, stdout }: CommandContext): Promise<number> {
  const report = await new AgentClient(agentUrl(config, args.values.url), config.token).status()
  stdout.write(args.values.json === true ? JSON.stringify(report, null, 2) + '\n' : formatReport(report))
  return 0
}

export function main(argv: readonly string[], cli: Cli): Promise<number> {
  return runCommand({ usage, options, signature, run }, argv, cli, withConfig(cli))
}

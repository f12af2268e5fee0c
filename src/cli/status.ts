// `layoutd status [--url URL] [--json]`: the running agent's report, as a
// table an operator reads at a glance, or as JSON for a script.
import type { Config } from '../config.js'
import type { LayoutReport } from '../domain/schemas.js'
import { AgentClient, agentUrl } from './agent-client.js'
import { parseCommandArgs } from './args.js'

export interface CliIo {
  config: Config
  stdout: NodeJS.WritableStream
  stderr: NodeJS.WritableStream
}

/** Left-aligned columns, two spaces apart; the last column is not padded. */
export function formatTable(head: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)))
  const line = (r: readonly string[]) =>
    r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i] ?? 0))).join('  ').trimEnd()
  return [line(head), ...rows.map(line)].join('\n') + '\n'
}

export function formatReport(r: LayoutReport): string {
  let out = `box ${r.box}  mode ${r.mode}${r.default ? ' (nested by default)' : ''}\n`
  if (r.defaultBlocked !== '') out += `default: ${r.defaultBlocked}\n`
  const leg = r.leg.running ? 'running' : r.leg.pending ? 'pending' : 'idle'
  out += `leg ${leg}${r.leg.retryAt ? `, retry at ${r.leg.retryAt}` : ''}\n\n`
  const hosts = Object.keys(r.rows).sort()
  out += formatTable(
    ['HOST', 'LAYOUT', 'REASON', 'NOTE'],
    hosts.map((h) => {
      const row = r.rows[h]
      return [h, row?.layout ?? '', row?.reason ?? '', row?.note ?? '']
    }),
  )
  for (const w of r.warnings) out += `\nwarning: ${w}`
  return r.warnings.length > 0 ? out + '\n' : out
}

export async function statusCommand(argv: string[], io: CliIo): Promise<number> {
  const { values } = parseCommandArgs(argv, { url: { type: 'string' }, json: { type: 'boolean' } })
  const client = new AgentClient(agentUrl(io.config, values.url), io.config.token)
  const report = await client.status()
  io.stdout.write(values.json === true ? JSON.stringify(report, null, 2) + '\n' : formatReport(report))
  return 0
}

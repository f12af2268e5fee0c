// `layoutd routes list [--json]` (design §8): the registry's rows, as a
// table, or as a JSON array of {host, kind, socket, dir, db, hibernate}.
import type { ParsedArgs } from '../../args.js'
import type { Signature } from '../../command.js'
import { formatTable } from '../../table.js'
import type { RoutesIo } from './index.js'

export const usage = `usage:
  layoutd routes list [--json]

  --json      print the rows as a JSON array
`

export const options = { json: { type: 'boolean', default: false } } as const

export const signature: Signature = { failures: 'layoutd routes list', usageErrors: 'layoutd routes' }

export function run({ values }: ParsedArgs<typeof options>, io: RoutesIo): Promise<number> {
  const rows = io.registry.list()
  if (values.json) {
    const out = rows.map((r) => ({
      host: r.host,
      kind: r.kind,
      socket: r.socket,
      dir: r.dir,
      db: r.db,
      hibernate: r.hibernate,
    }))
    io.stdout.write(`${JSON.stringify(out, null, 2)}\n`)
    return Promise.resolve(0)
  }
  const cell = (s: string) => (s === '' ? '-' : s)
  io.stdout.write(
    formatTable(
      ['HOST', 'KIND', 'HIBERNATE', 'DIR', 'SOCKET', 'DB'],
      rows.map((r) => [r.host, r.kind, r.hibernate ? 'yes' : 'no', cell(r.dir), cell(r.socket), cell(r.db)]),
    ),
  )
  return Promise.resolve(0)
}

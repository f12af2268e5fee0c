// `layoutd routes rm HOST` (design §8): a row removed from the registry,
// refused while a journal or hold marker names it; its files stay where
// they are.
import path from 'node:path'
import { requireValidHost } from '../../../domain/hostname.js'
import { holdPath, journalPath } from '../../../domain/paths.js'
import { errors } from '../../../errors.js'
import { journalNames, layoutDirectory } from '../../../infra/layout-dir.js'
import type { ParsedArgs } from '../../args.js'
import type { Signature } from '../../command.js'
import type { RoutesIo } from './index.js'

export const usage = `usage:
  layoutd routes rm HOST

  Removes the row only; the host's files, if any, are left where they are.
`

export const options = {} as const

export const positionals = ['HOST'] as const

export const signature: Signature = { failures: 'layoutd routes rm', usageErrors: 'layoutd routes' }

export async function run({ positionals: [host = ''] }: ParsedArgs<typeof options>, io: RoutesIo): Promise<number> {
  requireValidHost(host)
  // Removing a row a journal or hold names would strand its files; an unreadable batch may name it too.
  const layout = layoutDirectory(io.config.dataDir)
  const [journals, holds] = await Promise.all([journalNames(io.config.dataDir), layout.holdHosts()])
  const file = journals.files.get(host)
  if (file !== undefined) throw errors.conflict(`${host} is mid-move (${file}); let the agent recover it first`)
  if (journals.unknown.length > 0)
    throw errors.conflict(
      `${journals.unknown.join(', ')} in ${path.dirname(journalPath(io.config, host))} ` +
        `cannot be read and may name ${host}; an operator decides first`,
    )
  if (holds.includes(host))
    throw errors.conflict(
      `${host} is held down after a refused move (${holdPath(io.config, host)}); clear the hold or revert first`,
    )
  if (!io.registry.remove(host)) throw errors.notFound(`no route for host ${host}`)
  io.stdout.write(`removed ${host} (its files, if any, are left where they are)\n`)
  return 0
}

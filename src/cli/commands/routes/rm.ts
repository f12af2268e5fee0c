// `layoutd routes rm HOST` (design §8): a row removed from the registry,
// refused while a journal or hold marker names it; its files stay where
// they are.
import { requireValidHost } from '../../../domain/hostname.js'
import { holdPath, journalPath } from '../../../domain/paths.js'
import { errors } from '../../../errors.js'
import { layoutDirectory } from '../../../infra/layout-dir.js'
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
  // A journal or hold marker names the row recovery will act on: removing
  // it would strand the files between two directories with nothing to say
  // where they belong.
  const layout = layoutDirectory(io.config.dataDir)
  const [journals, holds] = await Promise.all([layout.journalHosts(), layout.holdHosts()])
  if (journals.includes(host)) throw errors.conflict(`${host} is mid-move (${journalPath(io.config, host)}); let the agent recover it first`)
  if (holds.includes(host)) throw errors.conflict(`${host} is held down after a refused move (${holdPath(io.config, host)}); clear the hold or revert first`)
  if (!io.registry.remove(host)) throw errors.notFound(`no route for host ${host}`)
  io.stdout.write(`removed ${host} (its files, if any, are left where they are)\n`)
  return 0
}

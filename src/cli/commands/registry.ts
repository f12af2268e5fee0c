// `layoutd registry backup|restore FILE` (design §8): SQLite's online backup
// out, and a copy put back as `D/registry.db` (src/infra/registry-copy.ts);
// restore is refused beside a running agent or for a non-registry file.
import path from 'node:path'
import { printable } from '../../domain/printable.js'
import type { OptionsConfig, ParsedArgs } from '../args.js'
import {
  runGroup,
  subcommandIn,
  withConfig,
  type Cli,
  type Command,
  type CommandContext,
  type Signature,
} from '../command.js'

export const usage = `usage:
  layoutd registry backup FILE                    copy D/registry.db to FILE (a new file), as of one moment
  layoutd registry restore FILE                   put the registry FILE in place of D/registry.db (agent stopped)

  backup uses SQLite's online backup: safe while the agent runs and writes, the copy is whole and
  consistent, a single file; it never overwrites FILE. restore checks that FILE is a layoutd registry
  (whole, with a schema this build knows) before anything is touched, and refuses while an agent runs
  on this data root (stop it first); it removes the live registry's -wal and -shm so SQLite cannot
  replay them onto the restored file, and writes durably (a temporary file, fsync, rename). The next
  start checks every row against the disk (docs/runbook.md#restoring-the-registry).
`

export const signature: Signature = { failures: 'layoutd registry', usageErrors: 'layoutd registry' }

const options = {} as const

function counts(facts: { routes: number; wakes: number; version: number }): string {
  return `${facts.routes} rows, ${facts.wakes} wake claims, schema version ${facts.version}`
}

async function backup(args: ParsedArgs<typeof options>, ctx: CommandContext): Promise<number> {
  const { backupRegistry } = await import('../../infra/registry-copy.js')
  const file = path.resolve(args.positionals[0] ?? '')
  const facts = await backupRegistry(ctx.config.dataDir, file)
  ctx.stdout.write(
    `backed up ${path.join(ctx.config.dataDir, 'registry.db')} to ${printable(file)}: ${counts(facts)}\n`,
  )
  return 0
}

async function restore(args: ParsedArgs<typeof options>, ctx: CommandContext): Promise<number> {
  const { restoreRegistry } = await import('../../infra/registry-copy.js')
  const file = path.resolve(args.positionals[0] ?? '')
  const facts = await restoreRegistry(ctx.config.dataDir, file)
  ctx.stdout.write(
    `restored ${path.join(ctx.config.dataDir, 'registry.db')} from ${printable(file)}: ${counts(facts)}\n` +
      'start the agent: its start checks every row against the disk before it grants a wake\n',
  )
  return 0
}

const SUBCOMMANDS: Record<string, Command<OptionsConfig>> = {
  backup: { usage, options, positionals: ['FILE'], signature, run: backup },
  restore: { usage, options, positionals: ['FILE'], signature, run: restore },
}

export function main(argv: readonly string[], cli: Cli): Promise<number> {
  return runGroup({ usage, signature, subcommand: subcommandIn(SUBCOMMANDS) }, argv, cli, withConfig(cli))
}

// `layoutd routes add|list|rm` (DESIGN §8): the registry, edited directly;
// the agent need not run. A hibernating instance added without paths gets
// them minted in the shape the mint rule answers, and its directory made.
import fs from 'node:fs/promises'
import path from 'node:path'
import type { Config } from '../config.js'
import { AppError, errors } from '../errors.js'
import { requireValidHost } from '../domain/hostname.js'
import type { Mode } from '../domain/modes.js'
import { holdPath, journalPath, MAX_SOCKET_PATH, nestedRoot, pathsFor } from '../domain/paths.js'
import type { RouteStore } from '../domain/ports.js'
import { ROUTE_KINDS, type Route, type RouteKind } from '../domain/schemas.js'
import { setDirMode } from '../infra/fsutil.js'
import { NESTED_ROOT_MODE, NESTED_RUN_MODE } from '../infra/mover.js'
import { validateRoute } from '../infra/registry.js'
import { groupId, SOCKETS_GROUP } from '../infra/groups.js'
import { layoutDirectory } from '../infra/layout-dir.js'
import { parseCommandArgs, UsageError } from './args.js'

export const ROUTES_USAGE = `usage:
  layoutd routes add HOST [--kind instance|sidecar|static|service] [--hibernate]
                          [--socket PATH] [--dir PATH] [--db PATH]
  layoutd routes list [--json]
  layoutd routes rm HOST
`

/** The group a nested host's run directory is given so the edge can reach its socket (DESIGN §2). */

export interface RoutesIo {
  config: Config
  stdout: NodeJS.WritableStream
  stderr: NodeJS.WritableStream
  /** Opened (and closed) by the caller. */
  registry: RouteStore
  /** The mint rule: the mode of a new row; rejects with `intent_unreadable` while the intent cannot be read. */
  mint: () => Promise<Mode>
  /** Where groups are looked up; /etc/group unless a test says otherwise. */
  groupFile?: string
}

/**
 * Runs `routes <argv>` (argv is what follows `routes`). Resolves to the
 * exit status: 0 done, 1 refused or failed (the reason on stderr), 2 usage.
 */
export async function routesCommand(argv: string[], io: RoutesIo): Promise<number> {
  const [sub, ...rest] = argv
  try {
    switch (sub) {
      case 'add':
        await add(rest, io)
        return 0
      case 'list':
        list(rest, io)
        return 0
      case 'rm':
        await rm(rest, io)
        return 0
      case undefined:
        throw new UsageError('routes needs a command: add, list or rm')
      default:
        throw new UsageError(`unknown routes command ${JSON.stringify(sub)}`)
    }
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr.write(`layoutd routes: ${err.message}\n${ROUTES_USAGE}`)
      return 2
    }
    io.stderr.write(`layoutd routes ${sub ?? ''}: ${err instanceof Error ? err.message : String(err)}\n`)
    return 1
  }
}

function isKind(k: string): k is RouteKind {
  return (ROUTE_KINDS as readonly string[]).includes(k)
}

/** A path as given, made absolute: every process must read the same directory from the row. */
function absolute(p: string | undefined): string | undefined {
  return p === undefined || p === '' ? undefined : path.resolve(p)
}

async function add(argv: string[], io: RoutesIo): Promise<void> {
  const { values, positionals } = parseCommandArgs(
    argv,
    {
      kind: { type: 'string', default: 'instance' },
      hibernate: { type: 'boolean', default: false },
      socket: { type: 'string' },
      dir: { type: 'string' },
      db: { type: 'string' },
    },
    ['HOST'],
  )
  const [host = ''] = positionals
  const kind = values.kind
  if (!isKind(kind)) throw new UsageError(`--kind ${JSON.stringify(kind)} is not one of ${ROUTE_KINDS.join(', ')}`)
  // Everything that can refuse the row is asked before a directory is
  // made: a refused add changes nothing.
  requireValidHost(host)
  if (io.registry.get(host) !== undefined) throw errors.hostExists(host)

  const dir = absolute(values.dir)
  const socket = absolute(values.socket)
  const db = absolute(values.db) ?? ''
  let mode: Mode | undefined
  let route: Route = { host, kind, hibernate: values.hibernate, dir: dir ?? '', socket: socket ?? '', db }
  // Only a hibernating instance given no paths at all is minted: one path
  // given is the operator placing the row, and half a minted row would
  // match neither shape.
  if (kind === 'instance' && values.hibernate && dir === undefined && socket === undefined) {
    mode = await mintMode(io, host)
    route = { ...route, ...pathsFor(io.config, host, mode), db }
    if (mode === 'nested' && Buffer.byteLength(route.socket) > MAX_SOCKET_PATH) {
      throw errors.badRequest(
        `refused: ${host}'s nested socket ${route.socket} is ${Buffer.byteLength(route.socket)} bytes, over the ${MAX_SOCKET_PATH} a unix socket can bind`,
      )
    }
  }
  validateRoute(route)

  const made: string[] = []
  try {
    if (mode !== undefined) await makeDirs(io, host, mode, made)
    io.registry.add(route)
  } catch (err) {
    await undoDirs(made, io)
    throw err
  }
  const shape = mode === undefined ? '' : ` (minted ${mode})`
  io.stdout.write(`added ${host}${shape}: ${describe(route)}\n`)
}

async function mintMode(io: RoutesIo, host: string): Promise<Mode> {
  try {
    return await io.mint()
  } catch (err) {
    // Minting flat while the intent cannot be read would put a row beside
    // nested ones that the fleet may want nested: refuse, never guess.
    const why = err instanceof Error ? err.message : String(err)
    const code = err instanceof AppError ? err.code : 'mint_failed'
    throw new AppError(code, 503, `refused to mint paths for ${host}: ${why}; give --dir and --socket, or retry once the intent can be read`)
  }
}

/** mkdir -p that records every directory it created, so a failed add can remove exactly those. */
async function mkdirp(dir: string, mode: number, made: string[]): Promise<void> {
  const first = await fs.mkdir(dir, { recursive: true, mode })
  if (first === undefined) return
  for (let d = dir; ; d = path.dirname(d)) {
    made.push(d)
    if (d === first || d === path.dirname(d)) break
  }
}

async function makeDirs(io: RoutesIo, host: string, mode: Mode, made: string[]): Promise<void> {
  const { config } = io
  const paths = pathsFor(config, host, mode)
  if (mode === 'flat') {
    await mkdirp(paths.dir, 0o750, made)
    await mkdirp(config.runDir, 0o755, made)
    return
  }
  const root = nestedRoot(config, host)
  const run = path.dirname(paths.socket)
  // D/nested stays traversable; each host's own root is what is closed.
  await mkdirp(path.dirname(root), 0o755, made)
  await mkdirp(root, NESTED_ROOT_MODE, made)
  await mkdirp(paths.dir, 0o750, made)
  await mkdirp(run, NESTED_RUN_MODE, made)
  // Explicit modes: mkdir's mode passes through the umask, and the umask
  // never lets the setgid bit through. setDirMode does not follow a symlink.
  await setDirMode(root, NESTED_ROOT_MODE)
  await setDirMode(run, NESTED_RUN_MODE, await groupId(SOCKETS_GROUP, io.groupFile))
}

async function undoDirs(made: string[], io: RoutesIo): Promise<void> {
  // Deepest first; rmdir, never rm -r: a directory holding anything is not ours to remove.
  for (const d of [...made].sort((a, b) => b.length - a.length)) {
    try {
      await fs.rmdir(d)
    } catch (err) {
      io.stderr.write(`layoutd routes add: could not remove ${d} after the failed add: ${(err as Error).message}\n`)
    }
  }
}

/**
 * The id of the named group in an /etc/group-style file, or -1 when there
 * is no such group (a dev machine): the directory's group is then left alone.
 */
function describe(r: Route): string {
  const parts = [r.kind, r.hibernate ? 'hibernate' : 'no hibernate']
  if (r.dir !== '') parts.push(`dir ${r.dir}`)
  if (r.socket !== '') parts.push(`socket ${r.socket}`)
  if (r.db !== '') parts.push(`db ${r.db}`)
  return parts.join(', ')
}

function list(argv: string[], io: RoutesIo): void {
  const { values } = parseCommandArgs(argv, { json: { type: 'boolean', default: false } })
  const rows = io.registry.list()
  if (values.json) {
    const out = rows.map((r) => ({ host: r.host, kind: r.kind, socket: r.socket, dir: r.dir, db: r.db, hibernate: r.hibernate }))
    io.stdout.write(`${JSON.stringify(out, null, 2)}\n`)
    return
  }
  const cell = (s: string) => (s === '' ? '-' : s)
  io.stdout.write(
    table(
      ['HOST', 'KIND', 'HIBERNATE', 'DIR', 'SOCKET', 'DB'],
      rows.map((r) => [r.host, r.kind, r.hibernate ? 'yes' : 'no', cell(r.dir), cell(r.socket), cell(r.db)]),
    ),
  )
}

/** Columns padded to their widest cell, two spaces apart, no trailing blanks. */
function table(header: string[], rows: string[][]): string {
  const all = [header, ...rows]
  const widths = header.map((_, i) => Math.max(...all.map((r) => (r[i] ?? '').length)))
  return all.map((r) => r.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  ').trimEnd() + '\n').join('')
}

async function rm(argv: string[], io: RoutesIo): Promise<void> {
  const { positionals } = parseCommandArgs(argv, {}, ['HOST'])
  const [host = ''] = positionals
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
}

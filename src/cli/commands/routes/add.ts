// `layoutd routes add HOST …` (design §8): a row added to the registry; a
// pathless hibernating instance is minted (design §5.5) and its directories
// made (design §2).
import fs from 'node:fs/promises'
import path from 'node:path'
import { requireValidHost } from '../../../domain/hostname.js'
import { mintWhereFilesAre, type HostMint } from '../../../domain/mint.js'
import type { Mode } from '../../../domain/modes.js'
import { MAX_SOCKET_PATH, nestedRoot, pathsFor } from '../../../domain/paths.js'
import { printable } from '../../../domain/printable.js'
import { ROUTE_KINDS, type Route, type RouteKind } from '../../../domain/schemas.js'
import { errorMessage, errors } from '../../../errors.js'
import { setDirMode } from '../../../infra/fsutil.js'
import { groupId, SOCKETS_GROUP } from '../../../infra/groups.js'
import { hostFiles } from '../../../infra/host-files.js'
import { closeToEdge, NESTED_ROOT_MODE, NESTED_RUN_MODE } from '../../../infra/pass/mover.js'
import { refuseClaimedPaths, validateRoute } from '../../../infra/registry.js'
import type { ParsedArgs } from '../../args.js'
import type { Signature } from '../../command.js'
import type { RoutesIo } from './index.js'

export const usage = `usage:
  layoutd routes add HOST [--kind instance|sidecar|static|service] [--hibernate]
                          [--socket PATH] [--dir PATH] [--db PATH]

  --kind KIND     the row's kind; default instance
  --hibernate     the activator manages it (wakes it, lets it sleep)
  --dir, --socket, --db PATH
                  the row's paths; a hibernating instance given neither
                  --dir nor --socket gets them minted: in the shape its
                  files already sit in (D/apps/HOST or D/nested/HOST/data),
                  else nested or flat as the intent or the default says
`

export const options = {
  kind: { type: 'string', default: 'instance' },
  hibernate: { type: 'boolean', default: false },
  socket: { type: 'string' },
  dir: { type: 'string' },
  db: { type: 'string' },
} as const

export const positionals = ['HOST'] as const

export const signature: Signature = { failures: 'layoutd routes add', usageErrors: 'layoutd routes' }

function isKind(k: string): k is RouteKind {
  return (ROUTE_KINDS as readonly string[]).includes(k)
}

/** Absolute: every process must read the same directory from the row. */
function absolute(p: string | undefined): string | undefined {
  return p === undefined || p === '' ? undefined : path.resolve(p)
}

export async function run(
  { values, positionals: [host = ''] }: ParsedArgs<typeof options>,
  io: RoutesIo,
): Promise<number> {
  const kind = values.kind
  if (!isKind(kind)) throw errors.usage(`--kind ${JSON.stringify(kind)} is not one of ${ROUTE_KINDS.join(', ')}`)
  // Everything that can refuse is asked before a directory is made: a refused add changes nothing.
  requireValidHost(host)
  if (io.registry.get(host) !== undefined) throw errors.hostExists(host)

  const dir = absolute(values.dir)
  const socket = absolute(values.socket)
  const db = absolute(values.db) ?? ''
  let minted: HostMint | undefined
  let route: Route = { host, kind, hibernate: values.hibernate, dir: dir ?? '', socket: socket ?? '', db }
  // Only with no paths at all: half a minted row would match neither shape (design §5.5).
  if (kind === 'instance' && values.hibernate && dir === undefined && socket === undefined) {
    minted = mintWhereFilesAre(host, await mintMode(io, host), await hostFiles(io.config, host))
    route = { ...route, ...pathsFor(io.config, host, minted.mode), db }
  }
  const mode = minted?.mode
  validateRoute(route)
  // The instance must be able to bind the socket, whoever chose it.
  if (route.socket !== '' && Buffer.byteLength(route.socket) > MAX_SOCKET_PATH) {
    throw errors.socketTooLong(host, mode === undefined ? 'socket' : `${mode} socket`, route.socket, MAX_SOCKET_PATH)
  }
  // A row claiming another's dir or socket would only be `conflict`: refuse now.
  refuseClaimedPaths(route, io.registry.list())

  const made: string[] = []
  try {
    if (mode !== undefined) await makeDirs(io, host, mode, made)
    io.registry.add(route, { refuseClaimed: true })
  } catch (err) {
    await undoDirs(made, io)
    throw err
  }
  const shape =
    minted === undefined
      ? ''
      : ` (minted ${minted.mode}${minted.found === 'none' ? '' : ', where its files already are'})`
  io.stdout.write(`added ${host}${shape}: ${printable(describe(route))}\n`)
  await io.kick?.()
  return 0
}

async function mintMode(io: RoutesIo, host: string): Promise<Mode> {
  try {
    return await io.mint()
  } catch (err) {
    // Minting flat on an unreadable intent could put a row beside nested ones the fleet wants: never guess.
    throw errors.mintRefused(host, err)
  }
}

/** Records every directory it created, so a failed add removes exactly those. */
async function mkdirp(dir: string, mode: number, made: string[]): Promise<void> {
  const first = await fs.mkdir(dir, { recursive: true, mode })
  if (first === undefined) return
  for (let d = dir; ; d = path.dirname(d)) {
    made.push(d)
    if (d === first || d === path.dirname(d)) break
  }
}

/** Looked up once per command: a lookup starts a process (getent). */
const socketsGids = new WeakMap<RoutesIo, Promise<number>>()

function socketsGid(io: RoutesIo): Promise<number> {
  let gid = socketsGids.get(io)
  if (gid === undefined) {
    const warn = (_fields: unknown, msg: string) => io.stderr.write(`${signature.failures}: ${msg}\n`)
    socketsGids.set(io, (gid = groupId(SOCKETS_GROUP, { getent: io.getent, logger: { warn } })))
  }
  return gid
}

export async function makeDirs(io: RoutesIo, host: string, mode: Mode, made: string[]): Promise<void> {
  const { config } = io
  const paths = pathsFor(config, host, mode)
  if (mode === 'flat') {
    await mkdirp(paths.dir, 0o750, made)
    await mkdirp(config.runDir, 0o755, made)
    return
  }
  const root = nestedRoot(config, host)
  const runDir = path.dirname(paths.socket)
  // D/nested stays traversable; each host's own root is what is closed.
  await mkdirp(path.dirname(root), 0o755, made)
  await mkdirp(root, NESTED_ROOT_MODE, made)
  await mkdirp(paths.dir, 0o750, made)
  await mkdirp(runDir, NESTED_RUN_MODE, made)
  // Explicit modes, as the umask would strip setgid; only the root and run/ get the sockets group (design §2).
  const gid = await socketsGid(io)
  await setDirMode(root, NESTED_ROOT_MODE, gid)
  await setDirMode(runDir, NESTED_RUN_MODE, gid)
  closeToEdge(paths.dir, gid)
}

export async function undoDirs(made: string[], io: RoutesIo): Promise<void> {
  // Deepest first; rmdir, never rm -r: a directory holding anything is not ours to remove.
  for (const d of [...made].sort((a, b) => b.length - a.length)) {
    try {
      await fs.rmdir(d)
    } catch (err) {
      io.stderr.write(`${signature.failures}: could not remove ${d} after the failed add: ${errorMessage(err)}\n`)
    }
  }
}

function describe(r: Route): string {
  const parts = [r.kind, r.hibernate ? 'hibernate' : 'no hibernate']
  if (r.dir !== '') parts.push(`dir ${r.dir}`)
  if (r.socket !== '') parts.push(`socket ${r.socket}`)
  if (r.db !== '') parts.push(`db ${r.db}`)
  return parts.join(', ')
}

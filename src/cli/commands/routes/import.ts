// `layoutd routes import FILE|-` (design §8): many rows from JSON Lines.
// One bad line refuses the whole file, naming every bad line; the rest go
// in one transaction, pathless rows minted as `routes add` mints them.
import fs from 'node:fs/promises'
import path from 'node:path'
import { Compile, Type } from '../../../domain/typebox.js'
import type { Static } from 'typebox'
import { classifyWith, PathClaims } from '../../../domain/classify.js'
import { mintWhereFilesAre, type HostFiles } from '../../../domain/mint.js'
import type { Mode } from '../../../domain/modes.js'
import { hasShape, MAX_SOCKET_PATH, pathsFor, type Dirs } from '../../../domain/paths.js'
import { printable } from '../../../domain/printable.js'
import { ROUTE_KINDS, type Route } from '../../../domain/schemas.js'
import { AppError, errorMessage, errors } from '../../../errors.js'
import { hostFilesOf } from '../../../infra/host-files.js'
import { mapLimit } from '../../../infra/fsutil.js'
import { validateRoute } from '../../../infra/registry.js'
import { schemaErrors } from '../../../infra/schema-errors.js'
import type { ParsedArgs } from '../../args.js'
import type { Signature } from '../../command.js'
import { makeDirs, undoDirs } from './add.js'
import type { RoutesIo } from './index.js'

export const usage = `usage:
  layoutd routes import FILE|- [--skip-existing]

  FILE            JSON Lines, one row per line:
                  {"host":"a.example.com","kind":"instance","hibernate":true,
                   "dir":"/srv/a","socket":"/run/a.sock","db":"/srv/a/app.db"}
                  dir, socket and db are optional (absolute paths); a
                  hibernating instance given neither dir nor socket gets
                  them minted as routes add does: in the shape its files
                  already sit in, else nested or flat as the intent says
  -               read the lines from standard input
  --skip-existing a host already in the registry is left as it is, not refused
`

export const options = { 'skip-existing': { type: 'boolean', default: false } } as const

export const positionals = ['FILE'] as const

export const signature: Signature = { failures: 'layoutd routes import', usageErrors: 'layoutd routes' }

const ImportLine = Type.Object(
  {
    host: Type.String(),
    kind: Type.Union(ROUTE_KINDS.map((k) => Type.Literal(k))),
    hibernate: Type.Boolean(),
    dir: Type.Optional(Type.String()),
    socket: Type.Optional(Type.String()),
    db: Type.Optional(Type.String()),
  },
  { additionalProperties: false },
)
type ImportLine = Static<typeof ImportLine>
// Compiled once: interpreting the schema per line would dominate a large import.
const importLine = Compile(ImportLine)

interface Bad {
  line: number
  why: string
}

async function readAll(file: string, io: RoutesIo): Promise<string> {
  try {
    if (file !== '-') return await fs.readFile(path.resolve(file), 'utf8')
    const chunks: Buffer[] = []
    for await (const chunk of io.stdin ?? process.stdin)
      chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk)))
    return Buffer.concat(chunks).toString('utf8')
  } catch (err) {
    throw errors.importUnreadable(file === '-' ? 'standard input' : file, err)
  }
}

function parseLine(text: string): Route | string {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (err) {
    return `not JSON: ${errorMessage(err)}`
  }
  if (!importLine.Check(value)) return schemaErrors(ImportLine, value)
  const v: ImportLine = value
  const route: Route = {
    host: v.host,
    kind: v.kind,
    hibernate: v.hibernate,
    dir: v.dir ?? '',
    socket: v.socket ?? '',
    db: v.db ?? '',
  }
  try {
    validateRoute(route)
  } catch (err) {
    return errorMessage(err)
  }
  if (route.kind === 'instance' && route.hibernate && (route.dir === '') !== (route.socket === '')) {
    return `${route.host}: a hibernating instance names both its dir and socket, or neither (then they are minted)`
  }
  if (route.socket !== '' && Buffer.byteLength(route.socket) > MAX_SOCKET_PATH) {
    return (
      `${route.host}: socket ${route.socket} is ${Buffer.byteLength(route.socket)} bytes, ` +
      `over the ${MAX_SOCKET_PATH} a unix socket can bind`
    )
  }
  return route
}

/** `routes add`'s rules, plus a host twice or already stored, a dir or socket claimed. */
export function checkLines(
  text: string,
  stored: readonly Route[],
  mint: Minted = { mode: undefined, config: undefined, files: undefined },
  skipExisting = false,
): { routes: Route[]; bad: Bad[]; skipped: number } {
  let skipped = 0
  const bad: Bad[] = []
  const rows: Array<{ line: number; route: Route }> = []
  const firstLine = new Map<string, number>()
  const storedHosts = new Set(stored.map((r) => r.host))
  const lines = text.split('\n')
  for (let i = 0; i < lines.length; i++) {
    const raw = (lines[i] ?? '').replace(/\r$/, '')
    if (raw.trim() === '') continue
    const line = i + 1
    const parsed = minted(parseLine(raw), mint)
    if (typeof parsed === 'string') {
      bad.push({ line, why: parsed })
      continue
    }
    const earlier = firstLine.get(parsed.host)
    if (earlier !== undefined) bad.push({ line, why: `host ${parsed.host} is already on line ${earlier}` })
    else if (storedHosts.has(parsed.host) && skipExisting) skipped++
    else if (storedHosts.has(parsed.host)) bad.push({ line, why: `host ${parsed.host} is already in the registry` })
    else {
      firstLine.set(parsed.host, line)
      rows.push({ line, route: parsed })
    }
  }
  const claims = new PathClaims([...stored, ...rows.map((r) => r.route)])
  for (const { line, route } of rows) {
    const claimant =
      (route.dir !== '' ? claims.dirClaimant(route.dir, route.host) : undefined) ??
      (route.socket !== '' ? claims.socketClaimant(route.socket, route.host) : undefined)
    if (claimant !== undefined) bad.push({ line, why: `${route.host}'s ${claimant.reason}` })
  }
  bad.sort((a, b) => a.line - b.line)
  return { routes: rows.map((r) => r.route), bad, skipped }
}

export interface Minted {
  mode: Mode | undefined
  config: Dirs | undefined
  /** Each pathless host's flat and nested dir (an Error: not lookable); absent: not looked. */
  files: ReadonlyMap<string, HostFiles | Error> | undefined
}

/** A pathless hibernating instance gets the minted paths, checked again. */
function minted(parsed: Route | string, mint: Minted): Route | string {
  if (typeof parsed === 'string' || !needsMint(parsed) || mint.mode === undefined || mint.config === undefined)
    return parsed
  const mode = modeAtFiles(parsed.host, mint.mode, mint.files?.get(parsed.host))
  if (typeof mode === 'object') return mode.why
  const route = { ...parsed, ...pathsFor(mint.config, parsed.host, mode), db: parsed.db }
  if (Buffer.byteLength(route.socket) > MAX_SOCKET_PATH)
    return (
      `${route.host}: minted ${mode} socket ${route.socket} is ${Buffer.byteLength(route.socket)} bytes, ` +
      `over the ${MAX_SOCKET_PATH} a unix socket can bind`
    )
  return route
}

/** Minted where its files sit (design §5.5), or why it cannot be. */
function modeAtFiles(host: string, mode: Mode, files: HostFiles | Error | undefined): Mode | { why: string } {
  if (files === undefined) return mode
  if (files instanceof Error) return { why: `${host}: ${errorMessage(files)}` }
  try {
    return mintWhereFilesAre(host, mode, files).mode
  } catch (err) {
    // The line names the refusal's code: the runbook's table has what to do.
    return { why: err instanceof AppError ? `${err.message} (${err.code})` : errorMessage(err) }
  }
}

function needsMint(r: Route): boolean {
  return r.kind === 'instance' && r.hibernate && r.dir === '' && r.socket === ''
}

function hostsToMint(text: string): string[] {
  const hosts: string[] = []
  for (const raw of text.split('\n')) {
    if (raw.trim() === '') continue
    const parsed = parseLine(raw.replace(/\r$/, ''))
    if (typeof parsed !== 'string' && needsMint(parsed)) hosts.push(parsed.host)
  }
  return hosts
}

/** Rows that will read `foreign`: the activator wakes them as they are, the pass never moves them. */
function foreignWarnings(routes: readonly Route[], stored: readonly Route[], dirs: Dirs): string[] {
  const claims = new PathClaims([...stored, ...routes])
  const out: string[] = []
  for (const route of routes) {
    if (route.kind !== 'instance') continue
    const c = classifyWith(route, claims, { dirs, fenced: () => undefined })
    if (c.layout === 'foreign') out.push(`${route.host} will read foreign: ${c.reason}`)
  }
  return out
}

export async function run(
  { values, positionals: [file = ''] }: ParsedArgs<typeof options>,
  io: RoutesIo,
): Promise<number> {
  if (file === '') throw errors.usage('routes import needs a FILE, or - for standard input')
  const from = file === '-' ? 'standard input' : file
  const text = await readAll(file, io)
  const stored = io.registry.list()
  // One mint question for the whole file; an unreadable intent refuses it, as it refuses `routes add`.
  const bare = hostsToMint(text)
  const mode = bare.length > 0 ? await mintFor(io, from) : undefined
  const files = mode === undefined ? undefined : await hostFilesOf(io.config, bare)
  const { routes, bad, skipped } = checkLines(text, stored, { mode, config: io.config, files }, values['skip-existing'])
  if (bad.length > 0) throw errors.importRefused(from, bad)
  const mintedRows = routes.filter((r) => files?.has(r.host) === true)
  const made: string[] = []
  try {
    await makeMintedDirs(io, mintedRows, made)
    // Checked again inside the transaction: another writer may have added a row since.
    io.registry.addMany(routes)
  } catch (err) {
    await undoDirs(made, io)
    throw err
  }
  for (const warning of foreignWarnings(routes, stored, io.config))
    io.stderr.write(`${signature.failures}: warning: ${printable(warning)}\n`)
  const skip = skipped === 0 ? '' : `; ${skipped} already in the registry left as they are`
  io.stdout.write(
    `imported ${routes.length} row${routes.length === 1 ? '' : 's'}${mintedSummary(io, mintedRows, files)} ` +
      `from ${from}${skip}\n`,
  )
  await io.kick?.()
  return 0
}

const MAKE_CONCURRENCY = 16

async function makeMintedDirs(io: RoutesIo, rows: readonly Route[], made: string[]): Promise<void> {
  // The first of each shape makes the shared parents alone: no two mkdirs race, each dir is recorded once.
  const firsts = new Map<Mode, Route>()
  for (const r of rows) if (!firsts.has(mintedMode(io, r))) firsts.set(mintedMode(io, r), r)
  for (const [mode, r] of firsts) await makeDirs(io, r.host, mode, made)
  const rest = rows.filter((r) => firsts.get(mintedMode(io, r)) !== r)
  await mapLimit(rest, MAKE_CONCURRENCY, (r) => makeDirs(io, r.host, mintedMode(io, r), made))
}

function mintedMode(io: RoutesIo, route: Route): Mode {
  return hasShape(io.config, route, 'nested') ? 'nested' : 'flat'
}

/** ` (3 minted flat, 2 minted nested, 3 of them where their files already were)`, or ''. */
function mintedSummary(
  io: RoutesIo,
  rows: readonly Route[],
  files: ReadonlyMap<string, HostFiles | Error> | undefined,
): string {
  if (rows.length === 0) return ''
  const counts = { flat: 0, nested: 0 }
  let atFiles = 0
  for (const r of rows) {
    counts[mintedMode(io, r)]++
    const f = files?.get(r.host)
    if (f !== undefined && !(f instanceof Error) && (f.flat !== null || f.nested !== null)) atFiles++
  }
  const shapes = (['flat', 'nested'] as const).filter((m) => counts[m] > 0).map((m) => `${counts[m]} minted ${m}`)
  const at = atFiles === 0 ? '' : `, ${atFiles} of them where their files already were`
  return ` (${shapes.join(', ')}${at})`
}

async function mintFor(io: RoutesIo, from: string): Promise<Mode> {
  try {
    return await io.mint()
  } catch (err) {
    throw errors.mintRefused(`the rows of ${from} without paths`, err)
  }
}

// `layoutd routes import FILE|-` (design §8): many rows at once, from JSON
// Lines (one row per line). Every line is checked before anything is
// written, as `routes add` checks one row, and against the rows stored and
// the other lines of the file; one bad line refuses the whole file, naming
// every bad line by number; the rest go in in one transaction. `-` reads
// standard input. A hibernating instance given neither dir nor socket is
// minted as `routes add` mints it (one mint question for the file, its
// directories made); a row that will read `foreign` is warned of;
// --skip-existing leaves the hosts already stored as they are. The running
// agent is then asked for a run, so the rows are acted on without a restart.
import fs from 'node:fs/promises'
import path from 'node:path'
import { Compile, Type } from '../../../domain/typebox.js'
import type { Static } from 'typebox'
import { classifyWith, PathClaims } from '../../../domain/classify.js'
import type { Mode } from '../../../domain/modes.js'
import { MAX_SOCKET_PATH, pathsFor, type Dirs } from '../../../domain/paths.js'
import { printable } from '../../../domain/printable.js'
import { ROUTE_KINDS, type Route } from '../../../domain/schemas.js'
import { errorMessage, errors } from '../../../errors.js'
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
                  them minted (nested or flat), as routes add does
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
// Compiled once: 10,000 lines checked by an interpreter of the schema take
// a good part of the time the whole import may take.
const importLine = Compile(ImportLine)

interface Bad {
  line: number
  why: string
}

/** The file's text, or standard input's. */
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

/** One line as a row, or why it is not one. */
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

/**
 * Every line checked: its shape, the rules of `routes add`, a host twice
 * in the file or already stored, a dir or socket another row claims.
 */
export function checkLines(
  text: string,
  stored: readonly Route[],
  mint: Minted = { mode: undefined, config: undefined },
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

/** The mint's answer for the file's pathless rows, and the paths it is built under. */
export interface Minted {
  mode: Mode | undefined
  config: Dirs | undefined
}

/** A hibernating instance without paths, given the minted ones (and checked again); anything else as it is. */
function minted(parsed: Route | string, mint: Minted): Route | string {
  if (typeof parsed === 'string' || !needsMint(parsed) || mint.mode === undefined || mint.config === undefined)
    return parsed
  const route = { ...parsed, ...pathsFor(mint.config, parsed.host, mint.mode), db: parsed.db }
  if (Buffer.byteLength(route.socket) > MAX_SOCKET_PATH)
    return (
      `${route.host}: minted ${mint.mode} socket ${route.socket} is ${Buffer.byteLength(route.socket)} bytes, ` +
      `over the ${MAX_SOCKET_PATH} a unix socket can bind`
    )
  return route
}

function needsMint(r: Route): boolean {
  return r.kind === 'instance' && r.hibernate && r.dir === '' && r.socket === ''
}

/** Whether any line of the file is a hibernating instance without paths: only then is the mint asked. */
function anyNeedsMint(text: string): boolean {
  for (const raw of text.split('\n')) {
    if (raw.trim() === '') continue
    const parsed = parseLine(raw.replace(/\r$/, ''))
    if (typeof parsed !== 'string' && needsMint(parsed)) return true
  }
  return false
}

/** The instance rows that will read `foreign` (the activator wakes them as they are; the pass never moves them). */
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
  // One mint question for the whole file, asked only when a row needs it;
  // an unreadable intent refuses the file, as it refuses `routes add`.
  const mode = anyNeedsMint(text) ? await mintFor(io, from) : undefined
  const { routes, bad, skipped } = checkLines(text, stored, { mode, config: io.config }, values['skip-existing'])
  if (bad.length > 0) throw errors.importRefused(from, bad)
  const made: string[] = []
  const mintedRows =
    mode === undefined ? [] : routes.filter((r) => r.kind === 'instance' && r.hibernate && isMintedShape(io, r, mode))
  try {
    if (mode !== undefined) await makeMintedDirs(io, mintedRows, mode, made)
    // The registry checks the claims again inside its transaction: another
    // writer may have added a row since the lines were read.
    io.registry.addMany(routes)
  } catch (err) {
    await undoDirs(made, io)
    throw err
  }
  for (const warning of foreignWarnings(routes, stored, io.config))
    io.stderr.write(`${signature.failures}: warning: ${printable(warning)}\n`)
  const shape = mintedRows.length === 0 || mode === undefined ? '' : ` (${mintedRows.length} minted ${mode})`
  const skip = skipped === 0 ? '' : `; ${skipped} already in the registry left as they are`
  io.stdout.write(`imported ${routes.length} row${routes.length === 1 ? '' : 's'}${shape} from ${from}${skip}\n`)
  await io.kick?.()
  return 0
}

/** How many hosts' minted directories are made at once. */
const MAKE_CONCURRENCY = 16

/** The minted rows' directories: the first row alone, then the rest a few hosts at a time. */
async function makeMintedDirs(io: RoutesIo, rows: readonly Route[], mode: Mode, made: string[]): Promise<void> {
  const [first, ...rest] = rows
  if (first === undefined) return
  // The first makes the parents every row shares (D/apps and the run dir,
  // or D/nested), so no two mkdirs in flight race for a parent and every
  // dir made is recorded once, for the undo.
  await makeDirs(io, first.host, mode, made)
  await mapLimit(rest, MAKE_CONCURRENCY, (r) => makeDirs(io, r.host, mode, made))
}

/** Whether a row's paths are the ones the mint made for it (so its directories are this import's to make). */
function isMintedShape(io: RoutesIo, route: Route, mode: Mode): boolean {
  const p = pathsFor(io.config, route.host, mode)
  return route.dir === p.dir && route.socket === p.socket
}

async function mintFor(io: RoutesIo, from: string): Promise<Mode> {
  try {
    return await io.mint()
  } catch (err) {
    throw errors.mintRefused(`the rows of ${from} without paths`, err)
  }
}

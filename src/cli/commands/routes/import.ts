// `layoutd routes import FILE|-` (design §8): many rows at once, from JSON
// Lines (one row per line). Every line is checked before anything is
// written, as `routes add` checks one row, and against the rows stored and
// the other lines of the file; one bad line refuses the whole file, naming
// every bad line by number; the rest go in in one transaction. `-` reads
// standard input. Nothing is minted and no directory made: each
// hibernating instance names its own dir and socket.
import fs from 'node:fs/promises'
import path from 'node:path'
import { Compile, Type } from '../../../domain/typebox.js'
import type { Static } from 'typebox'
import { PathClaims } from '../../../domain/classify.js'
import { MAX_SOCKET_PATH } from '../../../domain/paths.js'
import { ROUTE_KINDS, type Route } from '../../../domain/schemas.js'
import { errorMessage, errors } from '../../../errors.js'
import { validateRoute } from '../../../infra/registry.js'
import { schemaErrors } from '../../../infra/schema-errors.js'
import type { ParsedArgs } from '../../args.js'
import type { Signature } from '../../command.js'
import type { RoutesIo } from './index.js'

export const usage = `usage:
  layoutd routes import FILE|-

  FILE            JSON Lines, one row per line:
                  {"host":"a.example.com","kind":"instance","hibernate":true,
                   "dir":"/srv/a","socket":"/run/a.sock","db":"/srv/a/app.db"}
                  dir, socket and db are optional (absolute paths); a
                  hibernating instance names its dir and socket
  -               read the lines from standard input
`

export const options = {} as const

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
  if (route.kind === 'instance' && route.hibernate && (route.dir === '' || route.socket === '')) {
    return `${route.host}: a hibernating instance names its dir and socket (routes add mints them, one row at a time)`
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
export function checkLines(text: string, stored: readonly Route[]): { routes: Route[]; bad: Bad[] } {
  const bad: Bad[] = []
  const rows: Array<{ line: number; route: Route }> = []
  const firstLine = new Map<string, number>()
  const storedHosts = new Set(stored.map((r) => r.host))
  const lines = text.split('\n')
  for (let i = 0; i < lines.length; i++) {
    const raw = (lines[i] ?? '').replace(/\r$/, '')
    if (raw.trim() === '') continue
    const line = i + 1
    const parsed = parseLine(raw)
    if (typeof parsed === 'string') {
      bad.push({ line, why: parsed })
      continue
    }
    const earlier = firstLine.get(parsed.host)
    if (earlier !== undefined) bad.push({ line, why: `host ${parsed.host} is already on line ${earlier}` })
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
  return { routes: rows.map((r) => r.route), bad }
}

export async function run({ positionals: [file = ''] }: ParsedArgs<typeof options>, io: RoutesIo): Promise<number> {
  if (file === '') throw errors.usage('routes import needs a FILE, or - for standard input')
  const text = await readAll(file, io)
  const { routes, bad } = checkLines(text, io.registry.list())
  if (bad.length > 0) throw errors.importRefused(file === '-' ? 'standard input' : file, bad)
  // The registry checks the claims again inside its transaction: another
  // writer may have added a row since the lines were read.
  io.registry.addMany(routes)
  io.stdout.write(
    `imported ${routes.length} row${routes.length === 1 ? '' : 's'} from ${file === '-' ? 'standard input' : file}\n`,
  )
  return 0
}

// A batch's journal, `<data>/layout/_batch-<generation>.journal` (design
// §3.3): every move of one group commit in one file. One bad move keeps the
// whole file, its hosts fenced.
import { Type, Value } from '../../domain/typebox.js'
import type { Static } from 'typebox'
import { validHost } from '../../domain/hostname.js'
import type { Dirs } from '../../domain/paths.js'
import { RowPaths } from '../../domain/schemas.js'
import {
  checkJournal,
  ensureLayoutDir,
  hostJournalName,
  readJsonSync,
  writeManySliced,
  type Journal,
} from './journal.js'
import { defaultSlicer, type Slicer } from '../../domain/loop-turns.js'

/** A v1 journal without what the batch holds once for all. */
const BatchMove = Type.Object(
  {
    host: Type.String({ description: 'The host being moved.' }),
    to: Type.Union([Type.Literal('flat'), Type.Literal('nested')], { description: 'The layout the move goes to.' }),
    from: RowPaths,
    dest: RowPaths,
  },
  { additionalProperties: false },
)

export const BatchJournal = Type.Object(
  {
    v: Type.Literal(2, { description: 'Format version: a batch of moves.' }),
    generation: Type.Integer({ minimum: 0, description: 'The fence generation every move of the batch runs under.' }),
    startedAt: Type.String({ description: 'When the batch was journaled (RFC 3339).' }),
    moves: Type.Array(Type.Unknown(), {
      minItems: 1,
      description: 'Each move, checked one by one as a v1 journal is.',
    }),
  },
  { additionalProperties: false },
)
export type BatchJournal = Static<typeof BatchJournal>

/** Writes a batch's journal whole (design §3); if it throws, the file may be on disk with no move begun. */
export async function writeBatchJournal(
  dirs: Dirs,
  name: string,
  journals: readonly Journal[],
  slicer: Slicer = defaultSlicer,
): Promise<void> {
  const first = journals[0]
  if (first === undefined) return
  const batch = {
    v: 2,
    generation: first.generation,
    startedAt: first.startedAt,
    moves: journals.map((j) => ({ host: j.host, to: j.to, from: j.from, dest: j.dest })),
  }
  const dir = await ensureLayoutDir(dirs)
  await writeManySliced(dir, [{ name, data: `${JSON.stringify(batch)}\n` }], slicer)
}

/** Every move as a v1 journal, or why the file cannot be acted on, with the valid hosts it names (kept fenced). */
export type BatchRead = { ok: true; journals: Journal[] } | { ok: false; reason: string; hosts: string[] }

/** The valid hosts a batch names, however bad the rest of it. */
export function namedHosts(raw: unknown): string[] {
  const moves = (raw as { moves?: unknown } | null)?.moves
  if (!Array.isArray(moves)) return []
  const hosts = moves
    .map((m) => (m as { host?: unknown } | null)?.host)
    .filter((h): h is string => typeof h === 'string' && validHost(h))
  return [...new Set(hosts)]
}

export function checkBatch(raw: unknown, dirs: Dirs): BatchRead {
  const hosts = namedHosts(raw)
  if (!Value.Check(BatchJournal, raw)) {
    const first = Value.Errors(BatchJournal, raw)[0]
    const where = first?.instancePath === '' || first === undefined ? '' : `${first.instancePath}: `
    return {
      ok: false,
      reason: `not a batch journal: ${where}${first?.message ?? 'does not match the batch journal format'}`,
      hosts,
    }
  }
  const journals: Journal[] = []
  const seen = new Set<string>()
  for (const [i, move] of raw.moves.entries()) {
    if (!Value.Check(BatchMove, move)) return { ok: false, reason: `move ${i} is not a move of a batch`, hosts }
    if (!validHost(move.host))
      return { ok: false, reason: `move ${i} names ${JSON.stringify(move.host)}, not a valid host`, hosts }
    if (seen.has(move.host)) return { ok: false, reason: `move ${i} names ${move.host} a second time`, hosts }
    seen.add(move.host)
    const checked = checkJournal(
      { v: 1, ...move, generation: raw.generation, startedAt: raw.startedAt },
      move.host,
      dirs,
    )
    if (!checked.ok) return { ok: false, reason: `move ${i} (${move.host}) ${checked.reason}`, hosts }
    journals.push(checked.journal)
  }
  return { ok: true, journals }
}

export function readBatchSync(dirs: Dirs, name: string): BatchRead {
  const read = readJsonSync(dirs, name)
  return read.ok ? checkBatch(read.raw, dirs) : { ...read, hosts: [] }
}

/** A host's own journal, as a batch of one; a missing file throws (ENOENT). */
export function readJournalSync(dirs: Dirs, host: string): BatchRead {
  const read = readJsonSync(dirs, hostJournalName(host))
  const checked = read.ok ? checkJournal(read.raw, host, dirs) : read
  return checked.ok ? { ok: true, journals: [checked.journal] } : { ok: false, reason: checked.reason, hosts: [host] }
}

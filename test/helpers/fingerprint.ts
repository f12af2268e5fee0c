// A fingerprint of a box's state, for the hostile suite's "nothing
// changed": every entry under the data root (its relative path as bytes,
// type, mode, size, a hash of a file's content or a symlink's target; never
// atime, never a directory's size, which is the filesystem's business) and
// every row of the registry's tables (SELECT * ordered). Never follows a
// symlink, and reads names as bytes, so a name that is not UTF-8 is seen as
// it is. Compare two with assertUnchanged, or diff them to assert exactly
// the change a case expects. The one thing left out is the isolation gate's
// self-check scratch, which the agent makes and removes on its own.
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import Database from 'better-sqlite3'

/**
 * The isolation gate's self-check scratch, `D/nested/.selfcheck-<pid>-<rand>`:
 * made and removed by the agent before every run of its leg (design §5.4),
 * so a background run can be caught half-way through it.
 */
const SELFCHECK_SCRATCH = /^nested\/\.selfcheck-[^/ ]+(\/| )/

/** The registry's files: their bytes are SQLite's business, their rows are fingerprinted apart. */
const REGISTRY_FILES = new Set(['registry.db', 'registry.db-wal', 'registry.db-shm', 'registry.db-journal'])

export interface Fingerprint {
  /** One line per entry: `<path> <type> <mode> <size> <content>`, sorted. */
  tree: string[]
  /** One line per registry row: `<table> <row as JSON>`, in table then key order. */
  rows: string[]
  /** One hash of both. */
  hash: string
}

export interface FingerprintOptions {
  /** More trees to include, each under its own name (an outside dir a hostile row points at, the deploy dir). */
  also?: Record<string, string>
  /** Leaves the registry's `meta` table out (its fence generation counter). */
  withoutMeta?: boolean
}

function typeOf(st: fs.Stats): string {
  if (st.isSymbolicLink()) return 'link'
  if (st.isDirectory()) return 'dir'
  if (st.isFile()) return 'file'
  if (st.isFIFO()) return 'fifo'
  if (st.isSocket()) return 'socket'
  if (st.isCharacterDevice()) return 'chardev'
  if (st.isBlockDevice()) return 'blockdev'
  return 'other'
}

/** A path's bytes, readable where they are printable ASCII and escaped where not. */
function shown(rel: Buffer): string {
  let out = ''
  for (const b of rel)
    out += b >= 0x21 && b <= 0x7e && b !== 0x5c ? String.fromCharCode(b) : `\\x${b.toString(16).padStart(2, '0')}`
  return out
}

function sha(data: Buffer | string): string {
  return createHash('sha256').update(data).digest('hex')
}

/** Every entry under root as sorted lines; root itself is `.`. Absent root: one line saying so. */
export function treeLines(root: string, opts: { skipRegistry?: boolean; label?: string } = {}): string[] {
  const label = opts.label ?? ''
  const lines: string[] = []
  const walk = (abs: Buffer, rel: Buffer, top: boolean): void => {
    let st: fs.Stats
    try {
      st = fs.lstatSync(abs)
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT' && top) {
        lines.push(`${label}. absent`)
        return
      }
      throw err
    }
    const type = typeOf(st)
    const mode = (st.mode & 0o7777).toString(8)
    const name = `${label}${rel.length === 0 ? '.' : shown(rel)}`
    if (type === 'link') {
      const target = fs.readlinkSync(abs, { encoding: 'buffer' })
      lines.push(`${name} link ${mode} ${target.length} ${shown(target)}`)
    } else if (type === 'file') {
      lines.push(`${name} file ${mode} ${st.size} ${sha(fs.readFileSync(abs))}`)
    } else if (type === 'dir') {
      lines.push(`${name} dir ${mode} - -`)
      for (const child of fs.readdirSync(abs, { encoding: 'buffer' })) {
        if (top && opts.skipRegistry === true && REGISTRY_FILES.has(child.toString('latin1'))) continue
        const childRel = rel.length === 0 ? child : Buffer.concat([rel, Buffer.from('/'), child])
        walk(Buffer.concat([abs, Buffer.from('/'), child]), childRel, false)
      }
    } else {
      lines.push(`${name} ${type} ${mode} ${st.size} -`)
    }
  }
  walk(Buffer.from(root), Buffer.alloc(0), true)
  return lines.sort()
}

/** Every row of the registry's tables, read on a connection of its own (read-only). */
export function registryRows(dataDir: string, opts: { withoutMeta?: boolean } = {}): string[] {
  const file = path.join(dataDir, 'registry.db')
  if (!fs.existsSync(file)) return ['registry absent']
  const db = new Database(file, { readonly: true, fileMustExist: true })
  try {
    const tables = db
      .prepare<[], { name: string }>("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
      .all()
      .map((t) => t.name)
      .filter((t) => !(opts.withoutMeta === true && t === 'meta'))
    const lines: string[] = []
    for (const t of tables) {
      const quoted = `"${t.replaceAll('"', '""')}"`
      // Ordered by every column: a table's rows in a stable order whatever its key.
      const cols = db
        .prepare(`SELECT * FROM ${quoted} LIMIT 0`)
        .columns()
        .map((c) => `"${c.name.replaceAll('"', '""')}"`)
      const rows = db.prepare<[], Record<string, unknown>>(`SELECT * FROM ${quoted} ORDER BY ${cols.join(', ')}`).all()
      for (const r of rows) lines.push(`${t} ${JSON.stringify(r)}`)
    }
    return lines
  } finally {
    db.close()
  }
}

/** The fingerprint of the data root (the registry's files apart) and the registry's rows. */
export function fingerprint(dataDir: string, opts: FingerprintOptions = {}): Fingerprint {
  const tree = treeLines(dataDir, { skipRegistry: true }).filter((l) => !SELFCHECK_SCRATCH.test(l))
  for (const [name, dir] of Object.entries(opts.also ?? {})) tree.push(...treeLines(dir, { label: `<${name}>/` }))
  const rows = registryRows(dataDir, { withoutMeta: opts.withoutMeta })
  return { tree, rows, hash: sha(`${tree.join('\n')}\n--\n${rows.join('\n')}`) }
}

export interface FingerprintDiff {
  /** Lines in after and not in before. */
  added: string[]
  /** Lines in before and not in after. */
  removed: string[]
}

/** What changed from before to after, as lines of each side (tree and rows together). */
export function diffFingerprints(before: Fingerprint, after: Fingerprint): FingerprintDiff {
  const a = new Set([...before.tree, ...before.rows])
  const b = new Set([...after.tree, ...after.rows])
  return { added: [...b].filter((l) => !a.has(l)), removed: [...a].filter((l) => !b.has(l)) }
}

/** Fails, showing the lines that differ, unless the two fingerprints are the same. */
export function assertUnchanged(
  before: Fingerprint,
  after: Fingerprint,
  what = 'the data root and the registry',
): void {
  if (before.hash === after.hash) return
  const d = diffFingerprints(before, after)
  assert.fail(`${what} changed:\n+ ${d.added.join('\n+ ')}\n- ${d.removed.join('\n- ')}`)
}

// The weak persistence model of the power-loss explorer (design §3.5), pure:
// a filesystem image as inodes, the operations a trace lowers to, which of
// them a crash at a given point must keep (made durable by a barrier) and
// which it may keep or lose (in flight), the crash states that follow, and
// the replay of a chosen set of operations onto the image before the trace.
// No I/O here: record.ts reads the disk and the trace, explore.ts writes the
// states out and runs the agent on them.
import { createHash } from 'node:crypto'

export type Ino = number

/** A name in a directory: its bytes as a latin1 string (one char per byte, design §2: a name is bytes). */
export type Name = string

export type FsNode =
  | { kind: 'file'; mode: number; data: Buffer }
  | { kind: 'dir'; mode: number; entries: Map<Name, Ino> }
  | { kind: 'symlink'; mode: number; target: Buffer }

/** A filesystem as inodes: the data root is `root`; an inode no entry reaches is an orphan (lost at a crash). */
export interface FsImage {
  root: Ino
  nodes: Map<Ino, FsNode>
}

/** What an operation of the trace does, at the level of inodes (paths resolved when recorded). */
export type OpBody =
  /** A new inode and its first entry (open O_CREAT, mkdir, symlink). */
  | { op: 'create'; dir: Ino; name: Name; ino: Ino; node: 'file' | 'dir' | 'symlink'; mode: number; target?: Buffer }
  | { op: 'link'; dir: Ino; name: Name; ino: Ino }
  /** unlink or rmdir: the entry goes. */
  | { op: 'unlink'; dir: Ino; name: Name; ino: Ino }
  | { op: 'rename'; fromDir: Ino; fromName: Name; toDir: Ino; toName: Name; ino: Ino }
  | { op: 'write'; ino: Ino; offset: number; data: Buffer }
  | { op: 'truncate'; ino: Ino; length: number }
  | { op: 'chmod'; ino: Ino; mode: number }
  /** fsync or fdatasync of an inode: the barrier. */
  | { op: 'fsync'; ino: Ino }

export type Op = OpBody & {
  /** The syscall as the trace shows it, paths decoded: names the op in a report. */
  what: string
  /** Seconds since the epoch (strace -ttt). */
  t: number
}

/**
 * Which barrier makes an op durable (design §3.5, the weak model):
 * - an entry (create, link, unlink, rename) only once its directory is
 *   fsynced after it; a rename across two directories once both are, and
 *   until then it persists whole or not at all;
 * - a file's data, length and mode only once that file is fsynced after it;
 * - nothing else: no fsync of a file makes its name durable, no fsync of a
 *   directory makes a file's data durable (ext4 data=ordered would give
 *   both, in part; the model relies on neither).
 */
export function barrierInos(o: OpBody): Ino[] {
  switch (o.op) {
    case 'create':
    case 'link':
    case 'unlink':
      return [o.dir]
    case 'rename':
      return o.fromDir === o.toDir ? [o.fromDir] : [o.fromDir, o.toDir]
    case 'write':
    case 'truncate':
    case 'chmod':
      return [o.ino]
    case 'fsync':
      return []
  }
}

/**
 * For each op, the index of the op after which it is durable (the last of
 * the fsyncs it needs), or Infinity when the trace never makes it durable.
 * A barrier itself is durable at once.
 */
export function durableAt(ops: readonly OpBody[]): number[] {
  const out: number[] = []
  // For each inode, the indices of its fsyncs, in order.
  const syncs = new Map<Ino, number[]>()
  ops.forEach((o, i) => {
    if (o.op === 'fsync') syncs.set(o.ino, [...(syncs.get(o.ino) ?? []), i])
  })
  const firstSyncAfter = (ino: Ino, i: number): number => syncs.get(ino)?.find((s) => s > i) ?? Infinity
  ops.forEach((o, i) => {
    if (o.op === 'fsync') out.push(i)
    else out.push(Math.max(...barrierInos(o).map((ino) => firstSyncAfter(ino, i))))
  })
  return out
}

/** One crash state: the crash lands just before op `at` (ops.length: after the last); `kept` are the in-flight ops it keeps. */
export interface CrashState {
  at: number
  /** Indices of every op the state holds: the durable ones and the kept in-flight ones, in trace order. */
  persisted: number[]
  /** In-flight ops at this point, and the ones this state keeps (indices into ops). */
  inFlight: number[]
  kept: number[]
  /** How the kept set was chosen. */
  how: 'all' | 'none' | 'prefix' | 'all-but-one' | 'only-one' | 'every-subset' | 'sampled'
}

export interface EnumerateOptions {
  /** Ops never left in flight: their effect is as of their inode's last fsync (the registry's files). */
  asOfLastFsync?: (o: OpBody) => boolean
  /** At most this many subsets of one window enumerated exhaustively (2^n ≤ it), else sampled. */
  exhaustiveUpTo?: number
  /** Random subsets per crash point when sampling. */
  samplesPerPoint?: number
  random: () => number
}

export interface Enumeration {
  states: CrashState[]
  /** Crash points: one before each barrier, and one at the end. */
  points: number
  /** Every state the model allows: sum over points of 2^|in flight| (a decimal string: it overflows a double). */
  possible: string
}

/**
 * The crash states of a trace (design §3.5): a crash point before every
 * barrier and at the end (a crash anywhere inside a window between two
 * barriers leaves a subset of what a crash at the window's end may leave),
 * and at each point the durable ops plus a subset of the in-flight ones:
 * all subsets when few, else none, all, each prefix, all but one, only
 * one, and seeded random subsets.
 */
export function enumerate(ops: readonly OpBody[], opts: EnumerateOptions): Enumeration {
  const dur = durableAt(ops)
  const asOf = opts.asOfLastFsync ?? (() => false)
  const exhaustive = opts.exhaustiveUpTo ?? 64
  const samples = opts.samplesPerPoint ?? 16
  const points = [...ops.keys()].filter((i) => ops[i]?.op === 'fsync').concat([ops.length])
  const states: CrashState[] = []
  let possible = 0n
  for (const at of points) {
    const durable: number[] = []
    const inFlight: number[] = []
    for (let i = 0; i < at; i++) {
      const d = dur[i] ?? Infinity
      if (d < at) durable.push(i)
      else if (!asOf(ops[i] as OpBody)) inFlight.push(i)
    }
    possible += 1n << BigInt(inFlight.length)
    const seen = new Set<string>()
    const add = (kept: number[], how: CrashState['how']): void => {
      const key = kept.join(',')
      if (seen.has(key)) return
      seen.add(key)
      const persisted = [...durable, ...kept].sort((a, b) => a - b)
      states.push({ at, persisted, inFlight, kept, how })
    }
    if (2 ** inFlight.length <= exhaustive) {
      for (let mask = 0; mask < 2 ** inFlight.length; mask++)
        add(
          inFlight.filter((_, k) => (mask & (1 << k)) !== 0),
          'every-subset',
        )
      continue
    }
    add([], 'none')
    add(inFlight, 'all')
    for (let k = 1; k < inFlight.length; k++) add(inFlight.slice(0, k), 'prefix')
    for (const drop of inFlight)
      add(
        inFlight.filter((i) => i !== drop),
        'all-but-one',
      )
    for (const only of inFlight) add([only], 'only-one')
    for (let s = 0; s < samples; s++)
      add(
        inFlight.filter(() => opts.random() < 0.5),
        'sampled',
      )
  }
  return { states, points: points.length, possible: possible.toString() }
}

// ---- images ----------------------------------------------------------------

/** A copy that shares nodes until replay changes one (replay replaces, never mutates, a node). */
export function cloneImage(img: FsImage): FsImage {
  return { root: img.root, nodes: new Map(img.nodes) }
}

/** The inode a create op makes, empty. */
function made(o: Extract<OpBody, { op: 'create' }>): FsNode {
  return o.node === 'dir'
    ? { kind: 'dir', mode: o.mode, entries: new Map() }
    : o.node === 'symlink'
      ? { kind: 'symlink', mode: o.mode, target: o.target ?? Buffer.alloc(0) }
      : { kind: 'file', mode: o.mode, data: Buffer.alloc(0) }
}

/**
 * Each inode the ops create, as its create made it. An inode's mode is
 * its own from its creation, not its entry's: a crash that loses the
 * create's entry and keeps a later write, chmod or link of the inode
 * keeps an inode of that mode (an O_EXCL 0600 file never comes back 0644).
 */
export function births(ops: readonly OpBody[]): Map<Ino, FsNode> {
  const out = new Map<Ino, FsNode>()
  for (const o of ops) if (o.op === 'create' && !out.has(o.ino)) out.set(o.ino, made(o))
  return out
}

const NO_BIRTHS: ReadonlyMap<Ino, FsNode> = new Map()

/** The node img holds for ino; one it lacks is made as born (else as fallback). */
function nodeFor(img: FsImage, ino: Ino, fallback: FsNode, born: ReadonlyMap<Ino, FsNode>): FsNode {
  const n = img.nodes.get(ino)
  if (n !== undefined) return n
  const b = born.get(ino) ?? fallback
  img.nodes.set(ino, b)
  return b
}

function editDir(
  img: FsImage,
  dir: Ino,
  edit: (entries: Map<Name, Ino>) => void,
  born: ReadonlyMap<Ino, FsNode>,
): void {
  const d = nodeFor(img, dir, { kind: 'dir', mode: 0o755, entries: new Map() }, born)
  if (d.kind !== 'dir') throw new Error(`inode ${dir} is a ${d.kind}, not a directory`)
  const entries = new Map(d.entries)
  edit(entries)
  img.nodes.set(dir, { ...d, entries })
}

function editFile(img: FsImage, ino: Ino, edit: (data: Buffer) => Buffer, born: ReadonlyMap<Ino, FsNode>): void {
  const f = nodeFor(img, ino, { kind: 'file', mode: 0o644, data: Buffer.alloc(0) }, born)
  if (f.kind !== 'file') throw new Error(`inode ${ino} is a ${f.kind}, not a file`)
  img.nodes.set(ino, { ...f, data: edit(f.data) })
}

/**
 * Applies one op to img (in place; nodes are replaced, not mutated). An op
 * whose predecessors a crash dropped still means what it says about its
 * inode: a write to a file whose create was lost lands in an orphan, born
 * as its create made it (`born`, from births()); a link or rename of it
 * brings that inode back under the new name; a rename removes the old name
 * only if it still named that inode.
 */
export function apply(img: FsImage, o: OpBody, born: ReadonlyMap<Ino, FsNode> = NO_BIRTHS): void {
  /** The inode an entry is made for, as born when the image lacks it. */
  const entryFor = (ino: Ino): Ino => {
    const b = img.nodes.has(ino) ? undefined : born.get(ino)
    if (b !== undefined) img.nodes.set(ino, b)
    return ino
  }
  switch (o.op) {
    case 'create':
      nodeFor(img, o.ino, made(o), born)
      editDir(img, o.dir, (e) => e.set(o.name, o.ino), born)
      return
    case 'link':
      editDir(img, o.dir, (e) => e.set(o.name, entryFor(o.ino)), born)
      return
    case 'unlink':
      editDir(
        img,
        o.dir,
        (e) => {
          if (e.get(o.name) === o.ino) e.delete(o.name)
        },
        born,
      )
      return
    case 'rename':
      editDir(
        img,
        o.fromDir,
        (e) => {
          if (e.get(o.fromName) === o.ino) e.delete(o.fromName)
        },
        born,
      )
      editDir(img, o.toDir, (e) => e.set(o.toName, entryFor(o.ino)), born)
      return
    case 'write':
      editFile(
        img,
        o.ino,
        (data) => {
          const end = o.offset + o.data.length
          const out = Buffer.alloc(Math.max(data.length, end))
          data.copy(out)
          o.data.copy(out, o.offset)
          return out
        },
        born,
      )
      return
    case 'truncate':
      editFile(
        img,
        o.ino,
        (data) => {
          const out = Buffer.alloc(o.length)
          data.copy(out, 0, 0, Math.min(o.length, data.length))
          return out
        },
        born,
      )
      return
    case 'chmod': {
      const n = img.nodes.get(o.ino) ?? born.get(o.ino)
      if (n !== undefined) img.nodes.set(o.ino, { ...n, mode: o.mode })
      return
    }
    case 'fsync':
      return
  }
}

/**
 * The image a crash state leaves: the image before the trace, with the
 * persisted ops replayed in trace order, each inode born as the trace's
 * create made it even when that create is not among them.
 */
export function replay(initial: FsImage, ops: readonly OpBody[], persisted: readonly number[]): FsImage {
  const img = cloneImage(initial)
  const born = births(ops)
  for (const i of persisted) apply(img, ops[i] as OpBody, born)
  return img
}

/** A hash of what is reachable from the root (names, kinds, modes, contents): equal images hash equal. */
export function imageHash(img: FsImage): string {
  const h = createHash('sha256')
  const walk = (ino: Ino, rel: string, depth: number): void => {
    const n = img.nodes.get(ino)
    if (n === undefined || depth > 64) return
    h.update(`${rel}\0${n.kind}\0${n.mode}\0`)
    if (n.kind === 'file') h.update(createHash('sha256').update(n.data).digest('hex'))
    else if (n.kind === 'symlink') h.update(n.target)
    else for (const name of [...n.entries.keys()].sort()) walk(n.entries.get(name) as Ino, `${rel}/${name}`, depth + 1)
    h.update('\n')
  }
  walk(img.root, '', 0)
  return h.digest('hex')
}

/** Resolves a path relative to the root (components as latin1 names) to its inode, without following symlinks. */
export function lookup(img: FsImage, parts: readonly Name[]): Ino | undefined {
  let cur: Ino = img.root
  for (const p of parts) {
    const n = img.nodes.get(cur)
    if (n?.kind !== 'dir') return undefined
    const next = n.entries.get(p)
    if (next === undefined) return undefined
    cur = next
  }
  return cur
}

// The power-loss audit (design §3.5), pure: reads a recorded trace, lowered
// to inode operations (trace.ts), and checks that the order of the agent's
// calls keeps the move protocol's rules under the weak persistence model
// (model.ts `durableAt`), per host, whatever the batching: a journal, an
// fsync or a registry commit shared by several hosts counts for each.
//
// A move is found from its journal: a file of `D/layout` given a name
// ending `.journal`, whose data names the host, where its files are and
// where they go (one host a file today; a file naming several, a batch's
// journal, counts for each). Then, for each host it names:
//   journal-before-rename    the journal's data and every entry of its path
//                            (its name, `D/layout`'s) are durable before the
//                            rename of the host's files;
//   destination-before-rename  every entry on the way down to the
//                            destination's parent that the trace made
//                            (`D/nested`, `D/nested/<host>`, `D/apps`) is
//                            durable before that rename;
//   parents-before-commit    both parents of the rename are fsynced after
//                            it and before the registry's commit that
//                            points at the new place (the first WAL write
//                            after the rename that holds the new directory);
//   run-before-commit        the socket's directory (`run/`): its entry and
//                            its mode, as the trace made them, durable
//                            before that commit;
//   commit-before-journal-removal  the commit's WAL frame fsynced before
//                            the journal is unlinked;
//   journal-removal-durable  the unlink durable before the host's next
//                            journal takes its name, or by the end of the
//                            trace.
// No I/O: the test records (record.ts) and hands the ops in.
import path from 'node:path'
import { apply, cloneImage, durableAt, lookup, type FsImage, type Ino, type Name, type Op } from './model.js'

export const AUDIT_RULES = [
  'journal-before-rename',
  'destination-before-rename',
  'parents-before-commit',
  'run-before-commit',
  'commit-before-journal-removal',
  'journal-removal-durable',
] as const

export type AuditRule = (typeof AUDIT_RULES)[number]

export interface AuditViolation {
  rule: AuditRule
  host: string
  message: string
}

/** One move the audit followed, by op index (-1: not in the trace). */
export interface AuditedMove {
  host: string
  to: string
  journal: number
  rename: number
  commit: number
  unlink: number
}

export interface AuditReport {
  moves: AuditedMove[]
  violations: AuditViolation[]
}

interface JournalSeen {
  host: string
  to: string
  fromDir: string
  destDir: string
  destSocket: string
  /** The journal file's inode, the ops that wrote it, and its name in `D/layout`. */
  ino: Ino
  writes: number[]
  name: Name
}

interface MoveRecord {
  host: string
  to: string
  from: { dir: string }
  dest: { dir: string; socket: string }
}

/** Every record of a move in a journal's JSON, wherever it sits (the journal itself, or an array or field of a batch's). */
function moveRecords(text: string): MoveRecord[] {
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return []
  }
  const out: MoveRecord[] = []
  const walk = (v: unknown, depth: number): void => {
    if (typeof v !== 'object' || v === null || depth > 4) return
    const r = v as Partial<MoveRecord>
    if (
      typeof r.host === 'string' &&
      typeof r.to === 'string' &&
      typeof r.from?.dir === 'string' &&
      typeof r.dest?.dir === 'string' &&
      typeof r.dest.socket === 'string'
    ) {
      out.push(r as MoveRecord)
      return
    }
    for (const x of Array.isArray(v) ? v : Object.values(v)) walk(x, depth + 1)
  }
  walk(parsed, 0)
  return out
}

/**
 * Audits ops (lowered from a trace of the agent under root, the data
 * root's path as the agent was given it) recorded from initial.
 */
export function audit(ops: readonly Op[], initial: FsImage, root: string): AuditReport {
  const dur = durableAt(ops)
  const live = cloneImage(initial)
  /** The op that last set each entry (`dirIno/name`): create, link or rename. */
  const setBy = new Map<string, number>()
  const key = (dir: Ino, name: Name): string => `${dir}/${name}`
  const rel = (p: string): Name[] => {
    const r = path.posix.relative(root, p)
    if (r.startsWith('..') || path.posix.isAbsolute(r)) throw new Error(`${p} is not under the data root ${root}`)
    return r === '' ? [] : r.split('/').map((n) => Buffer.from(n).toString('latin1'))
  }
  /** The ops of the trace that made each entry of p (each component's name in its parent), with the path so far. */
  const madeOnPath = (p: string): Array<{ at: number; shown: string }> => {
    const parts = rel(p)
    const out: Array<{ at: number; shown: string }> = []
    let dir = live.root
    for (const [k, name] of parts.entries()) {
      const at = setBy.get(key(dir, name))
      if (at !== undefined) out.push({ at, shown: path.posix.join(root, ...parts.slice(0, k + 1)) })
      const next = lookup(live, parts.slice(0, k + 1))
      if (next === undefined) break
      dir = next
    }
    return out
  }
  /** When op i became durable, in words: never, or at the barrier that made it. */
  const shownDur = (i: number): string =>
    dur[i] === Infinity
      ? 'it is never made durable'
      : `it is durable only at #${dur[i]} (${ops[dur[i] as number]?.what})`
  const opName = (i: number): string => `#${i} (${ops[i]?.what})`
  const layoutIno = (): Ino | undefined => lookup(live, ['layout'])
  const walIno = (): Ino | undefined => lookup(live, ['registry.db-wal'])

  /** The files made in `D/layout` and the writes to each: a journal is one of them given a `.journal` name. */
  const layoutFiles = new Map<Ino, number[]>()
  /** Moves under way: journaled, waiting for their rename, commit, unlink. */
  const open = new Map<string, { j: JournalSeen; move: AuditedMove }>()
  const moves: AuditedMove[] = []
  const violations: AuditViolation[] = []
  const fail = (rule: AuditRule, host: string, message: string): void => {
    violations.push({ rule, host, message })
  }
  /** Unlinks of a host's journal waiting for its next journal (or the end) to judge their durability. */
  const unlinked = new Map<string, number>()
  const judgeUnlink = (host: string, before: number): void => {
    const u = unlinked.get(host)
    if (u === undefined) return
    unlinked.delete(host)
    if ((dur[u] ?? Infinity) >= before) {
      const when =
        before === ops.length
          ? 'by the end of the trace'
          : `before the host's next journal took its name at ${opName(before)}`
      fail(
        'journal-removal-durable',
        host,
        `${host}: the journal's unlink ${opName(u)} is not durable ${when} (${shownDur(u)}): a power cut brings back a finished move's journal`,
      )
    }
  }

  for (const [i, o] of ops.entries()) {
    // Before the op is applied: what it finds.
    if (o.op === 'create' && o.node === 'file' && o.dir === layoutIno()) layoutFiles.set(o.ino, [])
    if (o.op === 'write') layoutFiles.get(o.ino)?.push(i)
    if (
      o.op === 'rename' &&
      o.fromDir === o.toDir &&
      o.toDir === layoutIno() &&
      layoutFiles.has(o.ino) &&
      o.toName.endsWith('.journal')
    ) {
      const node = live.nodes.get(o.ino)
      const records = node?.kind === 'file' ? moveRecords(node.data.toString('utf8')) : []
      for (const r of records) {
        judgeUnlink(r.host, i)
        const j: JournalSeen = {
          host: r.host,
          to: r.to,
          fromDir: r.from.dir,
          destDir: r.dest.dir,
          destSocket: r.dest.socket,
          ino: o.ino,
          writes: layoutFiles.get(o.ino) ?? [],
          name: o.toName,
        }
        const move: AuditedMove = { host: j.host, to: j.to, journal: i, rename: -1, commit: -1, unlink: -1 }
        moves.push(move)
        open.set(j.host, { j, move })
      }
    }
    if (o.op === 'rename') {
      for (const { j, move } of open.values()) {
        if (move.rename >= 0) continue
        const fromParts = rel(j.fromDir)
        const destParts = rel(j.destDir)
        if (
          lookup(live, fromParts) !== o.ino ||
          o.toDir !== lookup(live, destParts.slice(0, -1)) ||
          o.toName !== destParts[destParts.length - 1]
        )
          continue
        move.rename = i
        // The journal: its data, and every entry of its path, durable before the files move.
        for (const w of j.writes)
          if ((dur[w] ?? Infinity) >= i)
            fail(
              'journal-before-rename',
              j.host,
              `${j.host}: the journal's data ${opName(w)} is not durable before the rename of its files ${opName(i)} (${shownDur(w)}): a power cut may keep the rename and an empty journal`,
            )
        for (const m of madeOnPath(path.posix.join(root, 'layout', Buffer.from(j.name, 'latin1').toString()))) {
          if ((dur[m.at] ?? Infinity) >= i)
            fail(
              'journal-before-rename',
              j.host,
              `${j.host}: the entry ${m.shown} made at ${opName(m.at)} is not durable before the rename of its files ${opName(i)} (${shownDur(m.at)}): a power cut may keep the rename and lose the journal`,
            )
        }
        for (const m of madeOnPath(path.posix.dirname(j.destDir))) {
          if ((dur[m.at] ?? Infinity) >= i)
            fail(
              'destination-before-rename',
              j.host,
              `${j.host}: the entry ${m.shown} made at ${opName(m.at)} is not durable before the rename into it ${opName(i)} (${shownDur(m.at)}): a power cut may keep the rename and lose the directory, the tree in neither place`,
            )
        }
      }
    }
    if (o.op === 'write' && o.ino === walIno()) {
      for (const { j, move } of open.values()) {
        if (move.rename < 0 || move.commit >= 0 || !o.data.includes(Buffer.from(j.destDir))) continue
        move.commit = i
        const r = ops[move.rename]
        if (r?.op !== 'rename') continue
        for (const [side, dir] of [
          ['source', r.fromDir],
          ['destination', r.toDir],
        ] as const) {
          if (!ops.slice(move.rename + 1, i).some((f) => f.op === 'fsync' && f.ino === dir)) {
            fail(
              'parents-before-commit',
              j.host,
              `${j.host}: the rename's ${side} parent is not fsynced between the rename ${opName(move.rename)} and the registry commit that points at ${j.destDir} ${opName(i)}: the row may outlive a rename a power cut undid`,
            )
          }
        }
        const runDir = path.posix.dirname(j.destSocket)
        const made = madeOnPath(runDir)
        const runIno = lookup(live, rel(runDir))
        const modes = ops
          .slice(move.journal, i)
          .flatMap((c, k) => (c.op === 'chmod' && c.ino === runIno ? [move.journal + k] : []))
        for (const at of [...made.map((m) => m.at), ...modes]) {
          if ((dur[at] ?? Infinity) >= i)
            fail(
              'run-before-commit',
              j.host,
              `${j.host}: ${opName(at)}, on the way to the socket's directory ${runDir}, is not durable before the registry commit ${opName(i)} (${shownDur(at)}): a power cut may leave the row pointing at a run/ the edge cannot reach`,
            )
        }
      }
    }
    if (o.op === 'unlink' && o.dir === layoutIno()) {
      for (const [host, m] of [...open.entries()].filter(([, x]) => x.j.ino === o.ino && x.j.name === o.name)) {
        m.move.unlink = i
        open.delete(host)
        if (m.move.commit >= 0 && (dur[m.move.commit] ?? Infinity) >= i) {
          fail(
            'commit-before-journal-removal',
            host,
            `${host}: the registry commit ${opName(m.move.commit)} is not durable before the journal's unlink ${opName(i)} (${shownDur(m.move.commit)}): a power cut may keep the unlink and lose the row, and nothing names the move`,
          )
        }
        if (m.move.commit >= 0) unlinked.set(host, i)
      }
    }
    // Then the op, and who set the entry it makes.
    apply(live, o)
    if (o.op === 'create' || o.op === 'link') setBy.set(key(o.dir, o.name), i)
    if (o.op === 'rename') setBy.set(key(o.toDir, o.toName), i)
  }
  for (const host of [...unlinked.keys()]) judgeUnlink(host, ops.length)
  return { moves, violations }
}

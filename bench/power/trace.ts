// Reading an strace of the agent (`strace -f -y -qq -xx -ttt -s 65536`)
// into the model's operations (model.ts): every line is parsed (threads'
// `<unfinished ...>` halves joined), then each call that succeeded on a path
// under the data root is lowered to inodes against a live image that
// follows the trace, so an fd, a rename of a whole tree and a file written
// after its name changed all name the right inode.
import fs from 'node:fs'
import path from 'node:path'
import { apply, lookup, type FsImage, type FsNode, type Ino, type Name, type Op, type OpBody } from './model.js'

/** One system call as strace printed it. */
export interface Call {
  pid: number
  t: number
  name: string
  args: string[]
  /** The return value's text (`0`, `18<\x2f...>`, `-1 ENOENT (...)`). */
  ret: string
}

const LINE = /^(\d+)\s+(\d+\.\d+)\s+(.*)$/
const UNFINISHED = ' <unfinished ...>'
const RESUMED = /^<\.\.\. (\w+) resumed>(.*)$/

/** Splits `a, b, [c, d], {e, f}` at its top-level commas (strings are all `\xNN` with -xx, so no comma hides in one). */
function splitArgs(s: string): string[] {
  const out: string[] = []
  let depth = 0
  let cur = ''
  for (const ch of s) {
    if (ch === '[' || ch === '{' || ch === '(' || ch === '<') depth++
    else if (ch === ']' || ch === '}' || ch === ')' || ch === '>') depth--
    if (ch === ',' && depth === 0) {
      out.push(cur.trim())
      cur = ''
    } else cur += ch
  }
  if (cur.trim() !== '') out.push(cur.trim())
  return out
}

function parseCall(pid: number, t: number, text: string): Call | undefined {
  const open = text.indexOf('(')
  const eq = text.lastIndexOf(') = ')
  if (open < 0 || eq < open) return undefined
  return {
    pid,
    t,
    name: text.slice(0, open),
    args: splitArgs(text.slice(open + 1, eq)),
    ret: text.slice(eq + 4).trim(),
  }
}

/** Every completed call of a trace, in the order they completed. */
export function parseTrace(text: string): Call[] {
  const calls: Call[] = []
  const pending = new Map<number, string>()
  for (const line of text.split('\n')) {
    const m = LINE.exec(line)
    if (m === null) continue
    const pid = Number(m[1])
    const t = Number(m[2])
    let body = m[3] ?? ''
    if (body.endsWith(UNFINISHED)) {
      pending.set(pid, body.slice(0, -UNFINISHED.length))
      continue
    }
    const r = RESUMED.exec(body)
    if (r !== null) {
      body = (pending.get(pid) ?? `${r[1]}(`) + (r[2] ?? '')
      pending.delete(pid)
    }
    const c = parseCall(pid, t, body)
    if (c !== undefined) calls.push(c)
  }
  return calls
}

/** `"\x2f\x74"` (and a `...` after it when strace cut it short) as bytes. */
export function decodeString(arg: string): { bytes: Buffer; cut: boolean } {
  const m = /^"((?:\\x[0-9a-f]{2})*)"(\.\.\.)?$/.exec(arg)
  if (m === null) throw new Error(`not an strace string: ${arg.slice(0, 80)}`)
  return { bytes: Buffer.from((m[1] ?? '').replaceAll('\\x', ''), 'hex'), cut: m[2] !== undefined }
}

/** `18<\x2f...>` → fd 18 and its path (latin1), or the number alone. */
function fdOf(arg: string): { fd: number; path: string | undefined } {
  const m = /^(-?\d+|AT_FDCWD)(?:<(.*)>)?$/.exec(arg)
  if (m === null) return { fd: NaN, path: undefined }
  const fd = m[1] === 'AT_FDCWD' ? -100 : Number(m[1])
  return {
    fd,
    path: m[2] === undefined ? undefined : Buffer.from(m[2].replaceAll('\\x', ''), 'hex').toString('latin1'),
  }
}

function ok(c: Call): boolean {
  return !c.ret.startsWith('-1') && !c.ret.startsWith('?')
}

export interface Lowered {
  ops: Op[]
  /** Calls under the data root that could not be lowered (a path the live image does not know), with why. */
  skipped: string[]
  /** Writes whose data strace cut (more than -s bytes): their data is unknown. */
  cutWrites: number
  /** Calls read from the trace in all, and those on paths under the data root. */
  calls: number
  callsUnderRoot: number
}

interface OpenFile {
  ino: Ino
  offset: number
  append: boolean
}

/**
 * Lowers the calls to inode operations on paths under root (the data
 * root, a path as the trace shows it), starting from initial (the image of
 * root before the trace), and following the trace's own effects.
 */
export function lower(calls: readonly Call[], root: string, initial: FsImage, nextIno: Ino): Lowered {
  const live: FsImage = { root: initial.root, nodes: new Map(initial.nodes) }
  const rootL = Buffer.from(root).toString('latin1')
  const ops: Op[] = []
  const skipped: string[] = []
  const fds = new Map<string, OpenFile>()
  let cutWrites = 0
  let underRoot = 0
  const shown = (p: string): string => Buffer.from(p, 'latin1').toString('utf8')
  /** The components of p below the root, or undefined when p is not under it. */
  const rel = (p: string): Name[] | undefined => {
    const n = path.posix.normalize(p)
    if (n === rootL) return []
    if (!n.startsWith(`${rootL}/`)) return undefined
    return n
      .slice(rootL.length + 1)
      .split('/')
      .filter((x) => x !== '')
  }
  /** An absolute path from a dirfd argument and a path argument. */
  const abs = (dirfdArg: string | undefined, pathArg: string): string => {
    const p = decodeString(pathArg).bytes.toString('latin1')
    if (p.startsWith('/')) return p
    const base = dirfdArg === undefined ? undefined : fdOf(dirfdArg).path
    return path.posix.join(base ?? '/', p)
  }
  const emit = (c: Call, body: OpBody, what: string): void => {
    const op = { ...body, what, t: c.t }
    apply(live, op)
    ops.push(op)
  }
  const fdKey = (c: Call, fd: number): string => `${c.pid}:${fd}`
  // Threads share one fd table: key fds by the process (tgid) when known.
  const tgid = new Map<number, number>()
  const fileOf = (c: Call, arg: string | undefined): OpenFile | undefined => {
    if (arg === undefined) return undefined
    const { fd, path: p } = fdOf(arg)
    const f = fds.get(fdKey({ ...c, pid: tgid.get(c.pid) ?? c.pid }, fd))
    if (f !== undefined) return f
    if (p === undefined) return undefined
    const r = rel(p)
    const ino = r === undefined ? undefined : lookup(live, r)
    return ino === undefined ? undefined : { ino, offset: 0, append: false }
  }
  const parentOf = (p: string): { dir: Ino; name: Name } | undefined => {
    const r = rel(p)
    if (r === undefined || r.length === 0) return undefined
    const dir = lookup(live, r.slice(0, -1))
    const name = r[r.length - 1] as Name
    return dir === undefined ? undefined : { dir, name }
  }
  const skip = (c: Call, why: string): void => {
    skipped.push(`${c.name}(${c.args.join(', ').slice(0, 200)}): ${why}`)
  }
  const firstPid = calls[0]?.pid
  for (const c of calls) {
    // One process: every thread shares the first pid's fd table.
    if (firstPid !== undefined) tgid.set(c.pid, firstPid)
    if (!ok(c)) continue
    const touches = (p: string | undefined): boolean => p !== undefined && rel(p) !== undefined
    const a = c.args
    try {
      switch (c.name) {
        case 'openat':
        case 'open': {
          const [dirfd, pathArg, flags = '', modeArg] =
            c.name === 'open' ? [undefined, a[0], a[1], a[2]] : [a[0], a[1], a[2], a[3]]
          if (pathArg === undefined) break
          const p = abs(dirfd, pathArg)
          if (!touches(p)) break
          underRoot++
          const r = rel(p) ?? []
          let ino = lookup(live, r)
          if (ino === undefined) {
            if (!flags.includes('O_CREAT')) {
              skip(c, 'opened a path the image does not have')
              break
            }
            const par = parentOf(p)
            if (par === undefined) {
              skip(c, 'created under a directory the image does not have')
              break
            }
            ino = nextIno++
            emit(
              c,
              {
                op: 'create',
                dir: par.dir,
                name: par.name,
                ino,
                node: 'file',
                mode: Number.parseInt(modeArg ?? '0644', 8) & 0o7777 & ~0o022,
              },
              `create ${shown(p)}`,
            )
          } else if (flags.includes('O_TRUNC') && live.nodes.get(ino)?.kind === 'file') {
            emit(c, { op: 'truncate', ino, length: 0 }, `truncate ${shown(p)} (O_TRUNC)`)
          }
          const fd = fdOf(c.ret).fd
          fds.set(fdKey({ ...c, pid: firstPid ?? c.pid }, fd), { ino, offset: 0, append: flags.includes('O_APPEND') })
          break
        }
        case 'close': {
          const { fd } = fdOf(a[0] ?? '')
          fds.delete(fdKey({ ...c, pid: firstPid ?? c.pid }, fd))
          break
        }
        case 'write':
        case 'pwrite64': {
          const f = fileOf(c, a[0])
          if (f === undefined) break
          underRoot++
          const s = decodeString(a[1] ?? '""')
          const n = Number(c.ret)
          if (s.cut && s.bytes.length < n) cutWrites++
          const data = s.bytes.subarray(0, n)
          const node = live.nodes.get(f.ino)
          const offset =
            c.name === 'pwrite64' ? Number(a[3]) : f.append && node?.kind === 'file' ? node.data.length : f.offset
          if (c.name === 'write') f.offset = offset + n
          emit(
            c,
            { op: 'write', ino: f.ino, offset, data },
            `${c.name} ${n} B at ${offset} to ${shown(fdOf(a[0] ?? '').path ?? '?')}`,
          )
          break
        }
        case 'lseek': {
          const f = fileOf(c, a[0])
          if (f !== undefined) f.offset = Number(c.ret)
          break
        }
        case 'ftruncate': {
          const f = fileOf(c, a[0])
          if (f === undefined) break
          underRoot++
          emit(
            c,
            { op: 'truncate', ino: f.ino, length: Number(a[1]) },
            `ftruncate ${shown(fdOf(a[0] ?? '').path ?? '?')} to ${a[1]}`,
          )
          break
        }
        case 'fsync':
        case 'fdatasync': {
          const f = fileOf(c, a[0])
          if (f === undefined) break
          underRoot++
          emit(c, { op: 'fsync', ino: f.ino }, `${c.name} ${shown(fdOf(a[0] ?? '').path ?? '?')}`)
          break
        }
        case 'fchmod': {
          const f = fileOf(c, a[0])
          if (f === undefined) break
          emit(
            c,
            { op: 'chmod', ino: f.ino, mode: Number.parseInt(a[1] ?? '0', 8) },
            `fchmod ${shown(fdOf(a[0] ?? '').path ?? '?')} ${a[1]}`,
          )
          break
        }
        case 'chmod':
        case 'fchmodat': {
          const p = c.name === 'chmod' ? abs(undefined, a[0] ?? '""') : abs(a[0], a[1] ?? '""')
          if (!touches(p)) break
          const ino = lookup(live, rel(p) ?? [])
          if (ino === undefined) break
          emit(
            c,
            { op: 'chmod', ino, mode: Number.parseInt((c.name === 'chmod' ? a[1] : a[2]) ?? '0', 8) },
            `chmod ${shown(p)}`,
          )
          break
        }
        case 'mkdir':
        case 'mkdirat':
        case 'symlink':
        case 'symlinkat': {
          const isDir = c.name.startsWith('mkdir')
          const p =
            c.name === 'mkdir'
              ? abs(undefined, a[0] ?? '""')
              : c.name === 'mkdirat'
                ? abs(a[0], a[1] ?? '""')
                : c.name === 'symlink'
                  ? abs(undefined, a[1] ?? '""')
                  : abs(a[1], a[2] ?? '""')
          if (!touches(p)) break
          underRoot++
          const par = parentOf(p)
          if (par === undefined) {
            skip(c, 'made under a directory the image does not have')
            break
          }
          const modeArg = c.name === 'mkdir' ? a[1] : a[2]
          const ino = nextIno++
          if (isDir)
            emit(
              c,
              {
                op: 'create',
                dir: par.dir,
                name: par.name,
                ino,
                node: 'dir',
                mode: Number.parseInt(modeArg ?? '0755', 8) & 0o7777 & ~0o022,
              },
              `mkdir ${shown(p)}`,
            )
          else
            emit(
              c,
              {
                op: 'create',
                dir: par.dir,
                name: par.name,
                ino,
                node: 'symlink',
                mode: 0o777,
                target: decodeString(a[0] ?? '""').bytes,
              },
              `symlink ${shown(p)}`,
            )
          break
        }
        case 'link':
        case 'linkat': {
          const [from, to] =
            c.name === 'link'
              ? [abs(undefined, a[0] ?? '""'), abs(undefined, a[1] ?? '""')]
              : [abs(a[0], a[1] ?? '""'), abs(a[2], a[3] ?? '""')]
          if (!touches(to)) break
          underRoot++
          const ino = lookup(live, rel(from) ?? [])
          const par = parentOf(to)
          if (ino === undefined || par === undefined) {
            skip(c, 'linked a path the image does not have')
            break
          }
          emit(c, { op: 'link', dir: par.dir, name: par.name, ino }, `link ${shown(from)} -> ${shown(to)}`)
          break
        }
        case 'unlink':
        case 'unlinkat':
        case 'rmdir': {
          const p = c.name === 'unlinkat' ? abs(a[0], a[1] ?? '""') : abs(undefined, a[0] ?? '""')
          if (!touches(p)) break
          underRoot++
          const par = parentOf(p)
          const ino = lookup(live, rel(p) ?? [])
          if (par === undefined || ino === undefined) {
            skip(c, 'removed a path the image does not have')
            break
          }
          emit(c, { op: 'unlink', dir: par.dir, name: par.name, ino }, `${c.name} ${shown(p)}`)
          break
        }
        case 'rename':
        case 'renameat':
        case 'renameat2': {
          const [from, to] =
            c.name === 'rename'
              ? [abs(undefined, a[0] ?? '""'), abs(undefined, a[1] ?? '""')]
              : [abs(a[0], a[1] ?? '""'), abs(a[2], a[3] ?? '""')]
          if (!touches(from) && !touches(to)) break
          underRoot++
          const src = parentOf(from)
          const dst = parentOf(to)
          const ino = lookup(live, rel(from) ?? [])
          if (src === undefined || dst === undefined || ino === undefined) {
            skip(c, 'renamed across the data root or a path the image does not have')
            break
          }
          emit(
            c,
            { op: 'rename', fromDir: src.dir, fromName: src.name, toDir: dst.dir, toName: dst.name, ino },
            `rename ${shown(from)} -> ${shown(to)}`,
          )
          break
        }
        default:
          break
      }
    } catch (err) {
      skip(c, err instanceof Error ? err.message : String(err))
    }
  }
  return { ops, skipped, cutWrites, calls: calls.length, callsUnderRoot: underRoot }
}

/** The image of dir as it is on disk now (names as bytes, symlinks not followed); answers the image and the next free inode number. */
export function loadImage(dir: string): { image: FsImage; nextIno: Ino } {
  const nodes = new Map<Ino, FsNode>()
  // A file of several names (a tenant's hard link) is one inode of the image, as it is on disk.
  const linked = new Map<number, Ino>()
  let next = 1
  const walk = (abs: Buffer): Ino => {
    const st = fs.lstatSync(abs)
    if (st.isFile() && st.nlink > 1 && linked.has(st.ino)) return linked.get(st.ino) as Ino
    const ino = next++
    if (st.isFile() && st.nlink > 1) linked.set(st.ino, ino)
    const mode = st.mode & 0o7777
    if (st.isDirectory()) {
      const entries = new Map<Name, Ino>()
      for (const name of fs.readdirSync(abs, { encoding: 'buffer' }))
        entries.set(name.toString('latin1'), walk(Buffer.concat([abs, Buffer.from('/'), name])))
      nodes.set(ino, { kind: 'dir', mode, entries })
    } else if (st.isSymbolicLink())
      nodes.set(ino, { kind: 'symlink', mode, target: fs.readlinkSync(abs, { encoding: 'buffer' }) })
    else if (st.isFile()) nodes.set(ino, { kind: 'file', mode, data: fs.readFileSync(abs) })
    // A socket or FIFO is not kept: a crash keeps neither's contents, and the agent makes its own.
    else next--
    return ino
  }
  const root = walk(Buffer.from(dir))
  return { image: { root, nodes }, nextIno: next }
}

/** Writes the part of img reachable from its root out as a real tree at dir (which must not exist). */
export function materialise(img: FsImage, dir: string): void {
  const dirModes: Array<[Buffer, number]> = []
  // A file the image reaches by several names is written once and linked under the others.
  const written = new Map<Ino, Buffer>()
  const walk = (ino: Ino, abs: Buffer, depth: number): void => {
    const n = img.nodes.get(ino)
    if (n === undefined || depth > 64) return
    const first = written.get(ino)
    if (n.kind === 'file' && first !== undefined) {
      fs.linkSync(first, abs)
      return
    }
    if (n.kind === 'dir') {
      fs.mkdirSync(abs)
      for (const [name, child] of n.entries)
        walk(child, Buffer.concat([abs, Buffer.from('/'), Buffer.from(name, 'latin1')]), depth + 1)
      dirModes.push([abs, n.mode])
    } else if (n.kind === 'symlink') fs.symlinkSync(n.target, abs)
    else {
      fs.writeFileSync(abs, n.data)
      fs.chmodSync(abs, n.mode)
      written.set(ino, abs)
    }
  }
  walk(img.root, Buffer.from(dir), 0)
  // Modes last, deepest first: a 0500 directory would refuse its own entries.
  for (const [p, mode] of dirModes) fs.chmodSync(p, mode)
}

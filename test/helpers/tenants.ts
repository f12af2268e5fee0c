// Tenant trees for the pass's tests: varied enough to catch a move that
// loses, renames or re-modes anything (nested dirs, odd names, symlinks,
// modes, a database file), and a hash of a tree that sees all of that
// without following a single symlink.
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'

/** The odd names every tree carries: spaces, unicode, leading dashes, dots. */
export const ODD_NAMES = [
  'a file with spaces.txt',
  'ünïcödé-名前.txt',
  '-leading-dash',
  '--',
  '.hidden',
  'tab\there',
  'new\nline',
]

/** A small deterministic byte source, so a tree is the same for the same seed. */
function bytes(seed: number, n: number): Buffer {
  const out = Buffer.alloc(n)
  let x = (seed * 2654435761) >>> 0 || 1
  for (let i = 0; i < n; i++) {
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    out[i] = x & 0xff
  }
  return out
}

/**
 * Builds a tenant's tree at dir (which must not exist) and answers the path
 * of its database file. seed varies sizes and contents between tenants.
 */
export function makeTenantTree(dir: string, seed = 1): { db: string } {
  fs.mkdirSync(dir, { recursive: true, mode: 0o750 })
  fs.chmodSync(dir, 0o750)
  const w = (rel: string, data: Buffer | string, mode = 0o640): void => {
    const p = path.join(dir, rel)
    fs.mkdirSync(path.dirname(p), { recursive: true })
    fs.writeFileSync(p, data)
    fs.chmodSync(p, mode)
  }
  w('index.html', `<h1>tenant ${seed}</h1>\n`)
  for (const [i, name] of ODD_NAMES.entries()) w(name, bytes(seed + i, 17 + ((seed * 7 + i) % 300)))
  w('sub/dir/deep/blob.bin', bytes(seed, 4096 + (seed % 5000)))
  w('sub/dir/run.sh', '#!/bin/sh\necho hi\n', 0o755)
  w('sub/ünï dir/-x', bytes(seed + 99, 64), 0o600)
  w('empty', '')
  fs.mkdirSync(path.join(dir, 'empty-dir'))
  fs.mkdirSync(path.join(dir, 'private'), { mode: 0o700 })
  fs.chmodSync(path.join(dir, 'private'), 0o700)
  fs.symlinkSync('index.html', path.join(dir, 'link-to-index'))
  fs.symlinkSync('../../nowhere/at/all', path.join(dir, 'sub', 'dangling'))
  const db = path.join(dir, 'data', 'app.db')
  w('data/app.db', Buffer.concat([Buffer.from('SQLite format 3\0'), bytes(seed * 3, 8192)]), 0o600)
  return { db }
}

/** A name as a line shows it: JSON for valid UTF-8, else its bytes in hex (a name is bytes, design §2). */
function shownName(name: Buffer): string {
  const text = name.toString('utf8')
  return Buffer.from(text, 'utf8').equals(name) ? JSON.stringify(text) : `bytes:${name.toString('hex')}`
}

/** The temporary name the agent mints a tenant's instance key under (src/infra/instance-keys.ts). */
const KEY_TEMP_NAME = '.instance.env.tmp'

/**
 * The tree at dir as sorted lines `relpath type mode content`, where content
 * is a sha256 of a file's bytes or a symlink's target. Never follows a
 * symlink. The root's own mode is included. Names are read as bytes, so a
 * name that is not UTF-8 is seen as it is, not as its lossy decoding.
 */
export function treeLines(dir: string): string[] {
  const lines: string[] = []
  const walk = (abs: Buffer, rel: string): void => {
    const st = fs.lstatSync(abs, { throwIfNoEntry: rel !== KEY_TEMP_NAME })
    // The agent's instance key being minted: renamed to its final name between the listing and the look.
    if (st === undefined) return
    const mode = (st.mode & 0o7777).toString(8)
    if (st.isSymbolicLink()) {
      lines.push(`${rel} link ${mode} ${fs.readlinkSync(abs, { encoding: 'buffer' }).toString('hex')}`)
    } else if (st.isDirectory()) {
      lines.push(`${rel} dir ${mode} -`)
      for (const name of fs.readdirSync(abs, { encoding: 'buffer' })) {
        walk(Buffer.concat([abs, Buffer.from('/'), name]), rel === '' ? shownName(name) : `${rel}/${shownName(name)}`)
      }
    } else if (st.isFile()) {
      lines.push(`${rel} file ${mode} ${createHash('sha256').update(fs.readFileSync(abs)).digest('hex')}`)
    } else {
      lines.push(`${rel} other ${mode} -`)
    }
  }
  walk(Buffer.from(dir), '')
  return lines.sort()
}

/** One hash for the whole tree (treeLines). */
export function hashTree(dir: string): string {
  return createHash('sha256').update(treeLines(dir).join('\n')).digest('hex')
}

/** Names the kernel allows that are not valid UTF-8 (design §2: a name is bytes). */
export const BYTE_NAMES = {
  file: Buffer.from([0x66, 0xff, 0x6f]),
  dir: Buffer.from([0xc3, 0x28, 0x64]),
  inner: Buffer.from([0xfe, 0xfe]),
  link: Buffer.from([0x80, 0x6c]),
}

/** The path of bytes of names (text or bytes) under dir. */
export function under(dir: string, ...names: Array<string | Buffer>): Buffer {
  return Buffer.concat([Buffer.from(dir), ...names.flatMap((n) => [Buffer.from('/'), Buffer.from(n)])])
}

/** Adds to dir a file, a directory (with a file inside) and a symlink whose names are not UTF-8; answers the inner file's path. */
export function addByteNamedEntries(dir: string, seed = 1): Buffer {
  fs.writeFileSync(under(dir, BYTE_NAMES.file), bytes(seed + 500, 333))
  fs.mkdirSync(under(dir, BYTE_NAMES.dir))
  const inner = under(dir, BYTE_NAMES.dir, BYTE_NAMES.inner)
  fs.writeFileSync(inner, bytes(seed + 501, 77))
  fs.symlinkSync(Buffer.concat([BYTE_NAMES.dir, Buffer.from('/'), BYTE_NAMES.inner]), under(dir, BYTE_NAMES.link))
  return inner
}

/** Makes a chain of directories under dir deeper than PATH_MAX (4096 bytes), each mkdir relative to the last. */
export function deepTree(dir: string): void {
  // A child descends by relative names (chdir, then mkdir), so no path it hands the kernel is long;
  // a shell's cd would build the whole path and fail at PATH_MAX itself.
  const script = `const fs = require('node:fs'); fs.mkdirSync(process.argv[1], { recursive: true });
    process.chdir(process.argv[1]);
    for (let i = 0; i < 25; i++) { fs.mkdirSync('${'d'.repeat(200)}'); process.chdir('${'d'.repeat(200)}') }
    fs.writeFileSync('leaf', 'x')`
  execFileSync(process.execPath, ['-e', script, dir], { timeout: 60_000, killSignal: 'SIGKILL' })
}

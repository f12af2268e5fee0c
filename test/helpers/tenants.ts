// Tenant trees for the pass's tests: varied enough to catch a move that
// loses, renames or re-modes anything (nested dirs, odd names, symlinks,
// modes, a database file), and a hash of a tree that sees all of that
// without following a single symlink.
import { createHash } from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'

/** The odd names every tree carries: spaces, unicode, leading dashes, dots. */
export const ODD_NAMES = ['a file with spaces.txt', 'ünïcödé-名前.txt', '-leading-dash', '--', '.hidden', 'tab\there', 'new\nline']

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

/**
 * The tree at dir as sorted lines `relpath type mode content`, where content
 * is a sha256 of a file's bytes or a symlink's target. Never follows a
 * symlink. The root's own mode is included.
 */
export function treeLines(dir: string): string[] {
  const lines: string[] = []
  const walk = (abs: string, rel: string): void => {
    const st = fs.lstatSync(abs)
    const mode = (st.mode & 0o7777).toString(8)
    if (st.isSymbolicLink()) {
      lines.push(`${JSON.stringify(rel)} link ${mode} ${fs.readlinkSync(abs)}`)
    } else if (st.isDirectory()) {
      lines.push(`${JSON.stringify(rel)} dir ${mode} -`)
      for (const name of fs.readdirSync(abs)) walk(path.join(abs, name), rel === '' ? name : `${rel}/${name}`)
    } else if (st.isFile()) {
      lines.push(`${JSON.stringify(rel)} file ${mode} ${createHash('sha256').update(fs.readFileSync(abs)).digest('hex')}`)
    } else {
      lines.push(`${JSON.stringify(rel)} other ${mode} -`)
    }
  }
  walk(dir, '')
  return lines.sort()
}

/** One hash for the whole tree (treeLines). */
export function hashTree(dir: string): string {
  return createHash('sha256').update(treeLines(dir).join('\n')).digest('hex')
}

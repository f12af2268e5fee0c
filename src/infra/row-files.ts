// A look at a row's files for a wake (design §6.1): two lstats, never following a symlink;
// src/domain/row-files.ts judges them.
import fs from 'node:fs'
import type { FilesLook, FilesTarget, Found } from '../domain/row-files.js'
import { Slicer } from '../domain/loop-turns.js'

interface Seen {
  found: Found
  error: string
}

function kindOf(st: fs.Stats): Found {
  return st.isSymbolicLink() ? 'symlink' : st.isDirectory() ? 'dir' : 'not_dir'
}

function failed(err: unknown): Seen {
  const code = (err as NodeJS.ErrnoException).code ?? 'error'
  // ENOTDIR: a file in the path, so nothing is there.
  if (code === 'ENOENT' || code === 'ENOTDIR') return { found: 'absent', error: '' }
  return { found: 'error', error: code }
}

function foundNow(p: string): Seen {
  try {
    const st = fs.lstatSync(p, { throwIfNoEntry: false })
    return st === undefined ? { found: 'absent', error: '' } : { found: kindOf(st), error: '' }
  } catch (err) {
    return failed(err)
  }
}

function lookOf(target: FilesTarget, at: Seen, elsewhere: Seen): FilesLook {
  return {
    dir: target.dir,
    other: target.other,
    at: at.found,
    elsewhere: elsewhere.found,
    error: at.error !== '' ? at.error : elsewhere.error,
  }
}

/**
 * One row's look, a wake's: made on the loop, since on libuv's pool it would queue behind a converge's
 * fsyncs, and two lstats of cached directories cost less than the pool's round trip.
 */
export function lookAtFiles(target: FilesTarget): FilesLook {
  return lookOf(target, foundNow(target.dir), foundNow(target.other))
}

/**
 * Every row's look, made synchronously in the pass's short slices (design §3.3): on cached directories two
 * lstats cost less than their pool round trips, and an absent path costs no exception.
 */
export async function lookAtAll(targets: readonly FilesTarget[], slicer = new Slicer()): Promise<FilesLook[]> {
  const out = new Array<FilesLook>(targets.length)
  for (const [i, target] of targets.entries()) {
    out[i] = lookOf(target, foundNow(target.dir), foundNow(target.other))
    await slicer.pause()
  }
  return out
}

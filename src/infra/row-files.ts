// A look at a row's files for a wake (design §6.1): two lstats on libuv's pool, never following a symlink;
// src/domain/row-files.ts judges them.
import fs from 'node:fs/promises'
import type { FilesLook, FilesTarget, Found } from '../domain/row-files.js'

async function found(p: string): Promise<{ found: Found; error: string }> {
  try {
    const st = await fs.lstat(p)
    return { found: st.isSymbolicLink() ? 'symlink' : st.isDirectory() ? 'dir' : 'not_dir', error: '' }
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error'
    // ENOTDIR: a file in the path, so nothing is there.
    if (code === 'ENOENT' || code === 'ENOTDIR') return { found: 'absent', error: '' }
    return { found: 'error', error: code }
  }
}

export async function lookAtFiles(target: FilesTarget): Promise<FilesLook> {
  const [at, elsewhere] = await Promise.all([found(target.dir), found(target.other)])
  return {
    dir: target.dir,
    other: target.other,
    at: at.found,
    elsewhere: elsewhere.found,
    error: at.error !== '' ? at.error : elsewhere.error,
  }
}

/** A look that throws is a look that failed. */
export async function lookAtAll(targets: readonly FilesTarget[], limit = 32): Promise<FilesLook[]> {
  const out = new Array<FilesLook>(targets.length)
  let next = 0
  const worker = async (): Promise<void> => {
    for (let i = next++; i < targets.length; i = next++) out[i] = await lookAtFiles(targets[i] as FilesTarget)
  }
  await Promise.all(Array.from({ length: Math.min(limit, targets.length) }, worker))
  return out
}

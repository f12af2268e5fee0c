// Where a row's files are, as a wake needs them (design §6.1): a flat or
// nested row wakes only while its dir is there, is a real directory, and
// the other shape's dir is absent. No I/O: the agent looks (two lstats,
// src/infra/row-files.ts) and hands in what it found.
import { flatPaths, isFlat, isNested, nestedPaths, type Dirs } from './paths.js'
import { why, type Why } from './reason-codes.js'
import type { Route } from './schemas.js'

/**
 * What an lstat found at a path, not following a symlink: a directory,
 * nothing, a symlink, something else, or an error.
 */
export type Found = 'dir' | 'absent' | 'symlink' | 'not_dir' | 'error'

/** The two paths a wake is checked at: the row's dir, and the dir of the other shape. */
export interface FilesTarget {
  dir: string
  other: string
}

/** What a look at a target found. */
export interface FilesLook extends FilesTarget {
  at: Found
  elsewhere: Found
  /** The errno's code of a look that failed (`EACCES`); empty otherwise. */
  error: string
}

/** Where a wake of route is checked; null for a row of neither shape (foreign: it wakes as it is, never moved). */
export function filesTarget(d: Dirs, route: Route): FilesTarget | null {
  if (isNested(d, route)) return { dir: route.dir, other: flatPaths(d, route.host).dir }
  if (isFlat(d, route)) return { dir: route.dir, other: nestedPaths(d, route.host).dir }
  return null
}

/** Whether look was taken at target's paths (a row rewritten since has other paths). */
export function lookFits(look: FilesTarget, target: FilesTarget): boolean {
  return look.dir === target.dir && look.other === target.other
}

/**
 * Why a row whose files look as found may not wake, or null when they are
 * where the row says: its dir a real directory, and nothing at the other
 * shape's, so a tenant never starts on a directory that is not its own
 * (a registry older than the files, a removed journal, a deleted dir).
 */
export function filesWhy(look: FilesLook): Why | null {
  if (look.at === 'error' || look.elsewhere === 'error')
    return why('files_unknown', `files unknown: cannot look at ${look.dir} and ${look.other} (${look.error})`)
  if (look.at === 'absent')
    return look.elsewhere === 'absent'
      ? why('files_missing', `files missing: neither ${look.dir} nor ${look.other} exists`)
      : why(
          'files_elsewhere',
          `files elsewhere: ${look.dir} does not exist, and ${look.other} does; the row names the other shape`,
        )
  if (look.at !== 'dir')
    return why(
      'files_not_directory',
      `${look.dir} is ${look.at === 'symlink' ? 'a symlink' : 'not a directory'}: a wake needs the directory itself`,
    )
  if (look.elsewhere !== 'absent')
    return why(
      'files_elsewhere',
      `files in two places: ${look.other} exists beside ${look.dir}; an operator decides which the row names`,
    )
  return null
}

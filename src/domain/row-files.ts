// Where a row's files are, as a wake needs them (design §6.1). No I/O:
// src/infra/row-files.ts looks and hands in what it found.
import { flatPaths, isFlat, isNested, nestedPaths, type Dirs } from './paths.js'
import { why, type Why } from './reason-codes.js'
import type { Route } from './schemas.js'

export type Found = 'dir' | 'absent' | 'symlink' | 'not_dir' | 'error'

export interface FilesTarget {
  dir: string
  other: string
}

export interface FilesLook extends FilesTarget {
  at: Found
  elsewhere: Found
  /** errno code, or ''. */
  error: string
}

/** null for a foreign row: it wakes as it is. */
export function filesTarget(d: Dirs, route: Route): FilesTarget | null {
  if (isNested(d, route)) return { dir: route.dir, other: flatPaths(d, route.host).dir }
  if (isFlat(d, route)) return { dir: route.dir, other: nestedPaths(d, route.host).dir }
  return null
}

export function lookFits(look: FilesTarget, target: FilesTarget): boolean {
  return look.dir === target.dir && look.other === target.other
}

/** Its own real directory, nothing at the other shape's: a tenant never starts on a dir not its own. */
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

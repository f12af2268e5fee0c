// The C walk of a source (native/walk.c, built by node-gyp): preflight.ts's
// walk on libuv's pool rather than the loop's thread (design §3.3). Without
// it the agent walks in JavaScript, in slices, and says so at start.
import { createRequire } from 'node:module'
import { errorMessage } from '../../errors.js'

export type CFound =
  | { kind: 'ok'; dev: bigint; ino: bigint }
  | { kind: 'second_name'; path: Buffer; links: number }
  | { kind: 'too_long'; path: Buffer }

/** Walks a directory (not through a symlink) on the pool; rejects with an errno's error. */
export type CWalk = (path: string | Buffer) => Promise<CFound>

export const C_WALK_PATH = new URL('../../../../build/Release/walk.node', import.meta.url).pathname

function load(): { walk: CWalk } | { missing: string } {
  try {
    const mod = createRequire(import.meta.url)(C_WALK_PATH) as { walk?: unknown }
    if (typeof mod.walk !== 'function') return { missing: `${C_WALK_PATH} has no walk function` }
    return { walk: mod.walk as CWalk }
  } catch (err) {
    return { missing: errorMessage(err) }
  }
}

const loaded = load()

export const cWalk: CWalk | undefined = 'walk' in loaded ? loaded.walk : undefined

export const cWalkMissing: string | undefined = 'missing' in loaded ? loaded.missing : undefined

// The C walk of a source (native/walk.c), loaded where the build made it
// (build/Release/walk.node, by node-gyp): the same walk as preflight.ts's,
// made on libuv's thread pool rather than on the loop's thread (design
// §3.3). An agent whose build could not compile it walks in JavaScript on
// the loop's thread, in slices, and says so at start (cWalkMissing).
import { createRequire } from 'node:module'
import { errorMessage } from '../../errors.js'

/** What the C walk answers of a source it walked to its end, or to its first finding. */
export type CFound =
  | { kind: 'ok'; dev: bigint; ino: bigint }
  | { kind: 'second_name'; path: Buffer; links: number }
  | { kind: 'too_long'; path: Buffer }

/**
 * Walks the directory at a path (not through a symlink) on libuv's pool; rejects with an errno's error (its
 * `code`) on a failed call, and throws at once for an argument that is no path.
 */
export type CWalk = (path: string | Buffer) => Promise<CFound>

/** Where the build puts the addon: build/Release/ at the repository's root, from dist/src/infra/pass/. */
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

/** The C walk, or undefined when it was not built (or does not load here). */
export const cWalk: CWalk | undefined = 'walk' in loaded ? loaded.walk : undefined

/** Why the C walk is not there, or undefined when it is. */
export const cWalkMissing: string | undefined = 'missing' in loaded ? loaded.missing : undefined

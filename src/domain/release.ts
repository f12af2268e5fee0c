// Release numbers, and the layout floor the nested default checks the
// running build against (design §5.2).

/**
 * The first platform release on which nested instances wake. A box whose
 * build is placed below it never takes the nested default: its activator
 * could not wake what the pass would make.
 */
export const LAYOUT_FLOOR = 'v0.25.0'

/** A release number: `v0.24.9` or `0.24.9`, optionally `-rc.1` and/or `+meta`. */
export interface Release {
  major: number
  minor: number
  patch: number
  /** The pre-release suffix without its `-` (`rc.1`), or ''. */
  pre: string
}

/** One number of a release, captured: 0, or digits without a leading zero. */
const NUMBER = '(0|[1-9][0-9]*)'
/** Dot-separated identifiers, as a pre-release or build metadata is: `rc.1`, `meta`. */
const IDENTIFIERS = String.raw`[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*`
/** major.minor.patch, then the pre-release (captured, without its `-`) and the build metadata (not captured). */
const RELEASE = new RegExp(String.raw`^v?${NUMBER}\.${NUMBER}\.${NUMBER}(?:-(${IDENTIFIERS}))?(?:\+${IDENTIFIERS})?$`)

/** The release s names, or null when it cannot be placed (empty, a commit id, `dev`, `v0.25`). */
export function parseRelease(s: string): Release | null {
  const m = RELEASE.exec(s.trim())
  if (m === null) return null
  const [major, minor, patch] = [m[1], m[2], m[3]].map(Number)
  if (major === undefined || minor === undefined || patch === undefined) return null
  // A component too large to compare exactly cannot be placed either.
  if (![major, minor, patch].every(Number.isSafeInteger)) return null
  return { major, minor, patch, pre: m[4] ?? '' }
}

/**
 * Whether the floor can place build (design §5.2): unset, a release number,
 * a commit id (7 to 40 lower-case hex digits, as git abbreviates it) or
 * `dev` are the forms a deployment stamps. Anything else (`v0.25`,
 * `2024.06.01`, `release-0.25`) passes the floor as any build it cannot
 * place does, and is worth a warning: it may be a release mis-tagged.
 */
export function placeableBuild(build: string): boolean {
  return build === '' || build === 'dev' || parseRelease(build) !== null || /^[0-9a-f]{7,40}$/.test(build)
}

/** Orders two releases by major.minor.patch; pre-release and build metadata are not compared. */
export function compareCore(a: Release, b: Release): number {
  return Math.sign(a.major - b.major) || Math.sign(a.minor - b.minor) || Math.sign(a.patch - b.patch)
}

/**
 * Whether build is a release number below floor. A build that cannot be
 * placed passes: a build that evaluates this rule carries the pass by
 * construction, so only a release that says it is older is held back
 * (a mis-tagged release).
 *
 * Pre-releases are compared by their version alone: `v0.25.0-rc.1` is AT
 * the floor `v0.25.0`, `v0.24.9-rc.1` is below it. Strict semver would put
 * the candidate below its release, but a candidate of the floor release is
 * that release's code, and holding back the one build a canary box runs to
 * try the nested default would defeat the canary. Build metadata (`+meta`)
 * never orders, as in semver.
 *
 * Throws when floor itself cannot be placed: that is a programming error,
 * and a floor that silently passed everything would be no floor.
 */
export function belowFloor(build: string, floor: string = LAYOUT_FLOOR): boolean {
  const f = parseRelease(floor)
  if (f === null) throw new Error(`layout floor ${JSON.stringify(floor)} is not a release number`)
  const b = parseRelease(build)
  if (b === null) return false
  return compareCore(b, f) < 0
}

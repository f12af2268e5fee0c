// Release numbers, and the layout floor the nested default checks the
// running build against (design §5.2).

/** The first release that wakes nested instances. */
export const LAYOUT_FLOOR = 'v0.25.0'

/** `v0.24.9` or `0.24.9`, `-rc.1` and `+meta` optional. */
export interface Release {
  major: number
  minor: number
  patch: number
  pre: string
}

const NUMBER = '(0|[1-9][0-9]*)'
const IDENTIFIERS = String.raw`[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*`
const RELEASE = new RegExp(String.raw`^v?${NUMBER}\.${NUMBER}\.${NUMBER}(?:-(${IDENTIFIERS}))?(?:\+${IDENTIFIERS})?$`)

/** null when s cannot be placed (`dev`, `v0.25`). */
export function parseRelease(s: string): Release | null {
  const m = RELEASE.exec(s.trim())
  if (m === null) return null
  const [major, minor, patch] = [m[1], m[2], m[3]].map(Number)
  if (major === undefined || minor === undefined || patch === undefined) return null
  // A component too large to compare exactly cannot be placed either.
  if (![major, minor, patch].every(Number.isSafeInteger)) return null
  return { major, minor, patch, pre: m[4] ?? '' }
}

/** The forms a deployment stamps; any other passes the floor but warns: a release mis-tagged? */
export function placeableBuild(build: string): boolean {
  return build === '' || build === 'dev' || parseRelease(build) !== null || /^[0-9a-f]{7,40}$/.test(build)
}

/** Pre-release and build metadata do not order. */
export function compareCore(a: Release, b: Release): number {
  return Math.sign(a.major - b.major) || Math.sign(a.minor - b.minor) || Math.sign(a.patch - b.patch)
}

/**
 * An unplaceable build passes: any build running this rule has the pass. Unlike semver, `v0.25.0-rc.1` is
 * at the floor `v0.25.0`: it is that release's code, for a canary to try. Throws on an unplaceable floor.
 */
export function belowFloor(build: string, floor: string = LAYOUT_FLOOR): boolean {
  const f = parseRelease(floor)
  if (f === null) throw new Error(`layout floor ${JSON.stringify(floor)} is not a release number`)
  const b = parseRelease(build)
  if (b === null) return false
  return compareCore(b, f) < 0
}

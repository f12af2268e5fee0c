// Durations as layoutd writes them, in the environment and in the API's
// `wait` alike (design §8): a whole number and one unit, `500ms`, `5s`,
// `10m`, `1h`. One rule, so a form the configuration takes is never
// refused by a query, nor the reverse; each caller names its own bounds.

const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const
const DURATION = /^([0-9]+)(ms|s|m|h)$/

/**
 * The milliseconds a duration's text says, or null when it is not one.
 * Zero and values beyond a safe integer are returned as they are: the
 * caller's bounds refuse them, naming those bounds.
 */
export function durationMs(text: string): number | null {
  const m = DURATION.exec(text)
  if (m === null) return null
  return Number(m[1]) * UNIT_MS[m[2] as keyof typeof UNIT_MS]
}

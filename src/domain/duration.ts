// Durations as layoutd writes them, in the environment and the API's `wait`
// alike (design §8): a whole number and one unit, `500ms`, `5s`, `10m`, `1h`.

const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const
const DURATION = /^([0-9]+)(ms|s|m|h)$/

/** Zero and huge values pass, for the caller's bounds to refuse. */
export function durationMs(text: string): number | null {
  const m = DURATION.exec(text)
  if (m === null) return null
  return Number(m[1]) * UNIT_MS[m[2] as keyof typeof UNIT_MS]
}

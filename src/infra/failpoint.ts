// Crash points for the crash suite (tests only): CARLOS_FAILPOINT names a
// step of a move (`after-rename`, reached once per batch), or one host's
// rename inside a batch (`after-rename:a.example.com`), optionally its nth
// arrival (`after-journal@2`); several are separated by commas. When the pass reaches a named one, the process
// is killed with SIGKILL, the nearest a test can come to a power cut: no
// exit handler, no flush, no finally block runs.

/** The steps the pass reports, in the order a move reaches them. */
export const FAILPOINT_STEPS = [
  'after-fence',
  'after-stop',
  'after-aside',
  'after-journal',
  'after-preflight',
  'after-hold',
  'after-prepare',
  'after-rename',
  'after-row',
  'after-journal-remove',
  'after-lift',
] as const

interface Point {
  name: string
  nth: number
  seen: number
}

function parse(spec: string): Point[] {
  return spec
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((s) => {
      const m = /^(.*)@([1-9][0-9]*)$/.exec(s)
      return m === null ? { name: s, nth: 1, seen: 0 } : { name: m[1] ?? '', nth: Number(m[2]), seen: 0 }
    })
}

/**
 * The pass's failpoint hook from config.failpoint, or undefined when none is
 * set. kill is what happens at the point (default: SIGKILL this process).
 */
export function failpointFrom(
  spec: string,
  kill: (step: string) => void = () => process.kill(process.pid, 'SIGKILL'),
): ((step: string) => void) | undefined {
  const points = parse(spec)
  if (points.length === 0) return undefined
  return (step) => {
    for (const p of points) {
      if (p.name === step && ++p.seen === p.nth) kill(step)
    }
  }
}

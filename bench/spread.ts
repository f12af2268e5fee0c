// The targets of `npm run bench` (issue 47) read off several runs made back
// to back, each run's figure beside its target, and their spread: a target
// is met only when every run meets it, since one good run of five proves
// nothing on a shared machine.

/** One figure of a run of bench/all.ts, and whether it meets its target. */
interface Reading {
  value: number
  met: boolean
}

interface Target {
  what: string
  /** The figure of one run, or undefined when the run did not measure it (a `--converge-only` run). */
  read: (run: RunDoc) => Reading | undefined
}

/** The parts of bench/all.ts's document the targets read. */
export interface RunDoc {
  startUp?: { rows: { seconds: number }; journals: { seconds: number } }
  routesImport?: { seconds: number }
  afterConverge?: { rssMB: number; idle: { rssMB: number } }
  readyHostDuringConverge?: { p99Ms: number; machineFloor: { p99Ms: number } }
  convergeVsFloor?: { ratio: number }
  lagDuringConverge?: { p99Ms: number }
}

/** The activator's p99 through the converge may be this many times the bare server's beside it. */
export const P99_TIMES_BARE = 3
/** Where the bare server's p99 is under this, the machine is quiet enough for the absolute aim. */
export const QUIET_BARE_P99_MS = 3
export const READY_P99_AIM_MS = 10

const at = (value: number, met: boolean): Reading => ({ value, met })

export const TARGETS: Record<string, Target> = {
  rssAfterConvergeMB: {
    what: 'RSS once quiet after the converge, under 150 MB',
    read: (r) => r.afterConverge && at(r.afterConverge.rssMB, r.afterConverge.rssMB < 150),
  },
  rssIdleMB: {
    what: 'RSS after the idle wait, under 100 MB',
    read: (r) => r.afterConverge && at(r.afterConverge.idle.rssMB, r.afterConverge.idle.rssMB < 100),
  },
  readyP99TimesBare: {
    what: `GET /ready/:host p99 through the converge over the bare server's beside it, at most ${P99_TIMES_BARE}×`,
    read: (r) => {
      const s = r.readyHostDuringConverge
      if (s === undefined) return undefined
      const times = s.p99Ms / Math.max(s.machineFloor.p99Ms, Number.EPSILON)
      return at(Math.round(times * 100) / 100, times <= P99_TIMES_BARE)
    },
  },
  readyP99Ms: {
    what: `GET /ready/:host p99 through the converge, at most ${READY_P99_AIM_MS} ms where the bare p99 is under ${QUIET_BARE_P99_MS} ms`,
    read: (r) => {
      const s = r.readyHostDuringConverge
      if (s === undefined) return undefined
      const aimApplies = s.machineFloor.p99Ms < QUIET_BARE_P99_MS
      return at(Math.round(s.p99Ms * 100) / 100, !aimApplies || s.p99Ms <= READY_P99_AIM_MS)
    },
  },
  bareP99Ms: {
    what: 'the bare server p99 beside it (the machine, not a target: always met)',
    read: (r) =>
      r.readyHostDuringConverge && at(Math.round(r.readyHostDuringConverge.machineFloor.p99Ms * 100) / 100, true),
  },
  convergeVsFloor: {
    what: "the converge's ratio to its floor, at least 0.6",
    read: (r) => r.convergeVsFloor && at(r.convergeVsFloor.ratio, r.convergeVsFloor.ratio >= 0.6),
  },
  startToReadySeconds: {
    what: 'spawn to /ready 200 on every row, under 1 s',
    read: (r) => r.startUp && at(r.startUp.rows.seconds, r.startUp.rows.seconds < 1),
  },
  startWithJournalsSeconds: {
    what: 'spawn to /ready 200 with 1,000 journals to recover, under 3 s',
    read: (r) => r.startUp && at(r.startUp.journals.seconds, r.startUp.journals.seconds < 3),
  },
  routesImportSeconds: {
    what: 'layoutd routes import of every row, under 2 s',
    read: (r) => r.routesImport && at(r.routesImport.seconds, r.routesImport.seconds < 2),
  },
  loopLagP99Ms: {
    what: "the loop's lag p99 through the converge, under 50 ms",
    read: (r) =>
      r.lagDuringConverge && at(Math.round(r.lagDuringConverge.p99Ms * 100) / 100, r.lagDuringConverge.p99Ms < 50),
  },
}

export interface Spread {
  what: string
  values: number[]
  min: number
  median: number
  max: number
  /** Runs that met the target, of the runs that measured it. */
  met: string
  metInEvery: boolean
}

function median(sorted: number[]): number {
  const mid = sorted.length >> 1
  return sorted.length % 2 === 1 ? (sorted[mid] ?? NaN) : ((sorted[mid - 1] ?? NaN) + (sorted[mid] ?? NaN)) / 2
}

/** Every target's figure in each run, their spread, and how many runs met it. */
export function spreadOf(runs: RunDoc[]): Record<string, Spread> {
  const out: Record<string, Spread> = {}
  for (const [name, target] of Object.entries(TARGETS)) {
    const readings = runs.map(target.read).filter((x): x is Reading => x !== undefined)
    if (readings.length === 0) continue
    const values = readings.map((x) => x.value)
    const sorted = [...values].sort((a, b) => a - b)
    const met = readings.filter((x) => x.met).length
    out[name] = {
      what: target.what,
      values,
      min: sorted[0] ?? NaN,
      median: median(sorted),
      max: sorted.at(-1) ?? NaN,
      met: `${met} of ${readings.length}`,
      metInEvery: met === readings.length,
    }
  }
  return out
}

// Many seeds of the rollout simulation over worker threads (one seed is
// one thread's work from start to end; seeds share nothing), and the tally
// of what they found: steps, outcomes, and for each property broken how
// many seeds broke it and the first few, each with the command that
// replays it step by step.
import os from 'node:os'
import { Worker } from 'node:worker_threads'
import { runSeed, type SimResult } from './world.js'

export interface SeedRange {
  from: number
  seeds: number
  boxes: number
}

export interface Tally {
  seeds: number
  steps: number
  virtualMs: number
  outcomes: Record<string, number>
  /** Seeds that broke each property. */
  violations: Record<string, number>
  /** The first few seeds of each property broken, with what broke. */
  examples: Record<string, Array<{ seed: number; detail: string }>>
}

const EXAMPLES = 5

export function emptyTally(): Tally {
  return { seeds: 0, steps: 0, virtualMs: 0, outcomes: {}, violations: {}, examples: {} }
}

export function addResult(t: Tally, r: SimResult): void {
  t.seeds++
  t.steps += r.steps
  t.virtualMs += r.virtualMs
  t.outcomes[r.outcome] = (t.outcomes[r.outcome] ?? 0) + 1
  const seen = new Set<string>()
  for (const v of r.violations) {
    if (seen.has(v.property)) continue
    seen.add(v.property)
    t.violations[v.property] = (t.violations[v.property] ?? 0) + 1
    const ex = (t.examples[v.property] ??= [])
    if (ex.length < EXAMPLES) ex.push({ seed: r.seed, detail: v.detail })
  }
}

function merge(a: Tally, b: Tally): void {
  a.seeds += b.seeds
  a.steps += b.steps
  a.virtualMs += b.virtualMs
  for (const [k, n] of Object.entries(b.outcomes)) a.outcomes[k] = (a.outcomes[k] ?? 0) + n
  for (const [k, n] of Object.entries(b.violations)) a.violations[k] = (a.violations[k] ?? 0) + n
  for (const [k, xs] of Object.entries(b.examples)) {
    const ex = (a.examples[k] ??= [])
    for (const x of xs) if (ex.length < EXAMPLES) ex.push(x)
  }
  for (const ex of Object.values(a.examples)) ex.sort((x, y) => x.seed - y.seed).splice(EXAMPLES)
}

/** The seeds of range, one after another, in this thread. */
export async function runRange(range: SeedRange): Promise<Tally> {
  const t = emptyTally()
  for (let seed = range.from; seed < range.from + range.seeds; seed++)
    addResult(t, await runSeed({ seed, boxes: range.boxes }))
  return t
}

/** The seeds split over workers threads (default: one per core); the same tally whatever the split. */
export async function runSeeds(range: SeedRange, workers = os.availableParallelism()): Promise<Tally> {
  const n = Math.max(1, Math.min(workers, range.seeds))
  const per = Math.ceil(range.seeds / n)
  const parts: SeedRange[] = []
  for (let i = 0; i < n; i++) {
    const from = range.from + i * per
    const seeds = Math.min(per, range.from + range.seeds - from)
    if (seeds > 0) parts.push({ from, seeds, boxes: range.boxes })
  }
  const tallies = await Promise.all(
    parts.map(
      (part) =>
        new Promise<Tally>((resolve, reject) => {
          const w = new Worker(new URL('./pool-worker.js', import.meta.url), { workerData: part })
          w.once('message', (t: Tally) => resolve(t))
          w.once('error', reject)
          w.once('exit', (code) => {
            if (code !== 0) reject(new Error(`a simulation worker exited with ${code}`))
          })
        }),
    ),
  )
  const total = emptyTally()
  for (const t of tallies) merge(total, t)
  return total
}

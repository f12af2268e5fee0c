// `npm run sim -- --seeds N --boxes B [--from S] [--workers W]`: the
// deterministic simulation of the rollout protocol (test/sim/world.ts), one
// seed after another, spread over worker threads; prints a JSON summary
// (seeds, steps, violations by property, seeds/s) and, for each failing
// seed, the command that replays it. `--seed S --replay` runs one seed and
// prints each step, each request and each change etcd made, as it went.
import os from 'node:os'
import { parseArgs } from 'node:util'
import { runSeeds } from '../test/sim/pool.js'
import { runSeed } from '../test/sim/world.js'

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      seeds: { type: 'string' },
      boxes: { type: 'string' },
      from: { type: 'string' },
      seed: { type: 'string' },
      replay: { type: 'boolean' },
      workers: { type: 'string' },
    },
  })
  const boxes = Number(values.boxes ?? '5')
  if (values.seed !== undefined) {
    const seed = Number(values.seed)
    const trace = values.replay === true ? (line: string) => process.stdout.write(`${line}\n`) : undefined
    const r = await runSeed({ seed, boxes, trace })
    const replay = `npm run sim -- --seed ${seed} --boxes ${boxes} --replay`
    process.stdout.write(`${JSON.stringify({ ...r, replay }, null, 2)}\n`)
    return r.violations.length === 0 ? 0 : 1
  }
  const seeds = Number(values.seeds ?? '1000')
  const from = Number(values.from ?? '1')
  const workers = Number(values.workers ?? os.availableParallelism())
  const started = performance.now()
  const cpu = process.cpuUsage()
  const total = await runSeeds({ from, seeds, boxes }, workers)
  const seconds = (performance.now() - started) / 1000
  const used = process.cpuUsage(cpu)
  // The process's CPU time, every worker thread's included: what a run costs on a machine others share.
  const cpuSeconds = (used.user + used.system) / 1e6
  const replay = Object.fromEntries(
    Object.entries(total.examples).map(([k, xs]) => [
      k,
      xs.map((x) => ({ ...x, replay: `npm run sim -- --seed ${x.seed} --boxes ${boxes} --replay` })),
    ]),
  )
  const out = {
    seeds: total.seeds,
    boxes,
    from,
    workers: Math.min(workers, seeds),
    steps: total.steps,
    virtualHours: Math.round(total.virtualMs / 36_000) / 100,
    outcomes: total.outcomes,
    violations: total.violations,
    failingSeeds: replay,
    seconds: Math.round(seconds * 10) / 10,
    seedsPerSecond: Math.round((total.seeds / seconds) * 10) / 10,
    stepsPerSecond: Math.round(total.steps / seconds),
    cpuSeconds: Math.round(cpuSeconds * 10) / 10,
    seedsPerCpuSecond: Math.round((total.seeds / cpuSeconds) * 10) / 10,
  }
  process.stdout.write(`${JSON.stringify(out, null, 2)}\n`)
  return Object.keys(total.violations).length === 0 ? 0 : 1
}

process.exitCode = await main()

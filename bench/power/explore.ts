// The power-loss explorer (design §3.5): records the agent's system calls
// while it migrates and reverts a few tenants (record.ts), builds the crash
// states the weak persistence model allows (model.ts), writes each distinct
// one out as a real data root, starts the real agent on it (start-up
// recovery, in checkers of their own mount namespace, check-worker.ts) and
// checks the invariants of design §3–§4 before, during and after it:
// every tree byte-identical in exactly one place, the row agreeing or a
// journal naming the move, no journal the crash left outliving recovery,
// no marker nothing explains, and every host a journal names reported
// `fenced` (so not wakeable) until recovery ends.
//
//   npm run crash:power -- --hosts 6 --seed 1 [--max-checks N] [--workers N] [--agent in-process|process] [--keep] [--drop-barrier REGEX]
// Prints a JSON summary; exits 1 when a crash state broke an invariant.
import { spawn, type ChildProcess } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import type { Mode } from '../../src/domain/modes.js'
import { rng } from '../crash.js'
import type { AgentHow } from './check.js'
import type { JobDone, StateJob, WorkerSetup } from './check-worker.js'
import {
  durableAt,
  enumerate,
  imageHash,
  replay,
  type CrashState,
  type FsImage,
  type Op,
  type OpBody,
} from './model.js'
import { record, type Recording } from './record.js'
import { materialise } from './trace.js'

const WORKER_JS = fileURLToPath(new URL('./check-worker.js', import.meta.url))

/** The registry's files: SQLite's own protocol makes them durable, so each is taken as of its last fsync (design §3.5). */
const REGISTRY_FILE = /\/registry\.db(-wal|-shm|-journal)?$|\/agent\.lock(-wal|-shm|-journal)?$/

export interface Violation {
  state: string
  problems: string[]
}

export interface PowerSummary {
  hosts: number
  seed: number
  /** The scenario: every host migrated and reverted, one held, one with a file set aside. */
  held: string | null
  setAside: string | null
  syscalls: number
  syscallsUnderDataRoot: number
  operations: number
  barriers: number
  /** Fsyncs --drop-barrier took out (0 on a real run). */
  barriersDropped: number
  crashPoints: number
  statesPossible: string
  statesEnumerated: number
  statesDistinct: number
  statesChecked: number
  /** Checked states that held a journal (a move the crash cut), and wakes asked for their hosts before recovery ended. */
  statesWithJournal: number
  wakeProbes: number
  /** Checked states by the intent their agent started under. */
  checkedByIntent: Record<Mode, number>
  /** The agent's start-up (spawn to /ready) over the checked states, median and slowest. */
  readyMsMedian: number
  readyMsMax: number
  workers: number
  /** Where each state's agent ran: composed in the checker as `serve` composes it, or a process of its own. */
  agent: AgentHow
  violations: Violation[]
  skippedCalls: string[]
  cutWrites: number
  seconds: number
}

/** A state in words: where the crash lands and what of the in-flight ops it keeps. */
function describe(ops: readonly Op[], s: CrashState): string {
  const at = s.at < ops.length ? `before op ${s.at} (${ops[s.at]?.what})` : 'after the last op'
  const lost = s.inFlight.filter((i) => !s.kept.includes(i))
  const name = (i: number): string => `#${i} ${ops[i]?.what}`
  return (
    `crash ${at}; ${s.how}: kept ${s.kept.length} of ${s.inFlight.length} in flight` +
    (lost.length > 0 && lost.length <= 12 ? `; lost: ${lost.map(name).join('; ')}` : '') +
    (s.kept.length > 0 && s.kept.length <= 6 ? `; kept: ${s.kept.map(name).join('; ')}` : '')
  )
}

/** Whether an op writes one of the registry's files (found in the data root before the trace, or created by it). */
function registryOp(initial: FsImage, ops: readonly Op[]): (o: OpBody) => boolean {
  const registryInos = new Set<number>()
  const root = initial.nodes.get(initial.root)
  if (root?.kind === 'dir')
    for (const [name, ino] of root.entries) if (REGISTRY_FILE.test(`/${name}`)) registryInos.add(ino)
  for (const o of ops) {
    const m = /^create (.*)$/.exec(o.what)
    if (o.op === 'create' && m !== null && REGISTRY_FILE.test(m[1] ?? '')) registryInos.add(o.ino)
  }
  return (o) => (o.op === 'write' || o.op === 'truncate' || o.op === 'chmod') && registryInos.has(o.ino)
}

/**
 * Starts a checker: `unshare --mount` binds a directory of its own over the
 * recorded sandbox (so the recorded data root's path is its own), then runs
 * check-worker.js with an IPC channel.
 */
function startChecker(rec: Recording, root: string, k: number, setupFile: string): ChildProcess {
  const own = path.join(root, `checker-${k}`)
  fs.mkdirSync(own, { recursive: true })
  const script = 'mount --bind "$1" "$2" && exec "$3" "$4" "$5"'
  return spawn(
    'unshare',
    [
      '--mount',
      '--propagation',
      'private',
      'sh',
      '-c',
      script,
      'sh',
      own,
      rec.world.sb.root,
      process.execPath,
      WORKER_JS,
      setupFile,
    ],
    {
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    },
  )
}

/** Runs the jobs on n checkers, each state materialised just before it is handed out; answers every verdict. */
async function runCheckers(
  rec: Recording,
  root: string,
  n: number,
  agent: AgentHow,
  jobs: Array<() => StateJob>,
  onDone: (job: StateJob, d: JobDone) => void,
): Promise<void> {
  const setupFile = path.join(root, 'checker-setup.json')
  const setup: WorkerSetup = {
    world: rec.world,
    held: rec.held,
    stray: rec.stray === undefined ? undefined : { ...rec.stray, data: rec.stray.data.toString('base64') },
    deploy: rec.deploy,
    agent,
  }
  fs.writeFileSync(setupFile, JSON.stringify(setup))
  let next = 0
  const running = Array.from({ length: Math.min(n, jobs.length) }, (_, k) => {
    const child = startChecker(rec, root, k, setupFile)
    let current: StateJob | undefined
    return new Promise<void>((resolve, reject) => {
      const give = (): void => {
        const make = jobs[next++]
        if (make === undefined) {
          current = undefined
          child.send('done')
          return
        }
        current = make()
        child.send(current)
      }
      child.on('message', (d: JobDone) => {
        if (current !== undefined && d.n === current.n) onDone(current, d)
        give()
      })
      child.once('exit', (code, signal) => {
        if (current === undefined && code === 0) resolve()
        else
          reject(
            new Error(
              `checker ${k} exited (code ${String(code)}, signal ${String(signal)})${current === undefined ? '' : ` during state ${current.n}`}`,
            ),
          )
      })
    })
  })
  await Promise.all(running)
}

export async function explore(opts: {
  hosts: number
  seed: number
  root: string
  maxChecks: number
  /** Checkers side by side (each starts one agent at a time). */
  workers: number
  /** Each state's agent: composed in its checker (the default), or a `node main.js serve` of its own. */
  agent: AgentHow
  /**
   * Where the states and the checkers' own directories are written: a
   * tmpfs by default (/dev/shm), since the agents' fsyncs there cost no I/O
   * and durability is the model's to decide, not the checker's disk's.
   */
  statesRoot: string
  /** Random subsets of the in-flight ops per crash point, where there are too many to try all. */
  samplesPerPoint: number
  /** Writes the lowered ops, one a line, with the barrier that makes each durable. */
  dumpOps?: string
  /** A regex over an fsync's words (the data root written `D`): those fsyncs are taken out of the trace. */
  dropBarrier?: string
  log: (l: string) => void
}): Promise<PowerSummary> {
  const t0 = performance.now()
  const rec = await record({ ...opts, scenario: { hold: opts.hosts >= 2, aside: opts.hosts >= 3 } })
  // --drop-barrier: the same run without the fsyncs that match, to show what the explorer finds when one is missing.
  const drop = opts.dropBarrier === undefined ? undefined : new RegExp(opts.dropBarrier)
  const ops = rec.lowered.ops.filter(
    (o) => !(o.op === 'fsync' && drop?.test(o.what.replaceAll(rec.world.sb.dataDir, 'D')) === true),
  )
  const barriersDropped = rec.lowered.ops.length - ops.length
  if (opts.dumpOps !== undefined) {
    const dur = durableAt(ops)
    fs.writeFileSync(
      opts.dumpOps,
      ops
        .map(
          (o, i) =>
            `#${i} ${o.what}${o.op === 'fsync' ? '' : ` (durable ${dur[i] === Infinity ? 'never' : `at #${dur[i]}`})`}\n`,
        )
        .join(''),
    )
  }
  const en = enumerate(ops, {
    asOfLastFsync: registryOp(rec.initial, ops),
    random: rng(opts.seed),
    exhaustiveUpTo: 64,
    samplesPerPoint: opts.samplesPerPoint,
  })
  opts.log(
    `power: ${ops.length} ops, ${en.points} crash points, ${en.states.length} states enumerated (${en.possible} possible)`,
  )
  // Distinct images only: many subsets leave the same tree.
  const distinct = new Map<string, CrashState>()
  for (const s of en.states) {
    const h = imageHash(replay(rec.initial, ops, s.persisted))
    if (!distinct.has(h)) distinct.set(h, s)
  }
  // Checked: all when few, else a seeded sample spread over the trace.
  const random = rng(opts.seed + 1)
  let todo = [...distinct.values()]
  if (todo.length > opts.maxChecks)
    todo = todo
      .map((s) => ({ s, k: random() }))
      .sort((a, b) => a.k - b.k)
      .slice(0, opts.maxChecks)
      .map((x) => x.s)
      .sort((a, b) => a.at - b.at)
  opts.log(`power: ${distinct.size} distinct states, checking ${todo.length} on ${opts.workers} checker(s)`)
  const violations: Violation[] = []
  const readyMs: number[] = []
  const byIntent: Record<Mode, number> = { nested: 0, flat: 0 }
  let checked = 0
  let withJournal = 0
  let wakeProbes = 0
  const jobs = todo.map((s, n) => (): StateJob => {
    const dir = path.join(opts.statesRoot, String(n))
    fs.mkdirSync(dir, { recursive: true })
    materialise(replay(rec.initial, ops, s.persisted), path.join(dir, 'data'))
    // The intent the crash happened under: the revert was recorded at flipAt.
    const lastOp = ops[Math.max(0, s.at - 1)]
    return { n, dir: path.join(dir, 'data'), mode: lastOp !== undefined && lastOp.t > rec.flipAt ? 'flat' : 'nested' }
  })
  await runCheckers(rec, opts.statesRoot, opts.workers, opts.agent, jobs, (job, { result }) => {
    checked++
    byIntent[job.mode]++
    if (result.journal) withJournal++
    wakeProbes += result.wakeProbes
    if (Number.isFinite(result.readyMs)) readyMs.push(result.readyMs)
    const s = todo[job.n] as CrashState
    if (result.problems.length > 0) {
      violations.push({
        state: `state ${job.n}: ${describe(ops, s)} [intent ${job.mode}, kept at ${path.dirname(job.dir)}]`,
        problems: result.problems,
      })
      opts.log(`power: VIOLATION in state ${job.n}: ${result.problems[0]}`)
    } else fs.rmSync(path.dirname(job.dir), { recursive: true, force: true })
    if (checked % 50 === 0)
      opts.log(
        `power: ${checked}/${todo.length} checked in ${Math.round((performance.now() - t0) / 1000)} s, ${violations.length} violation(s)`,
      )
  })
  readyMs.sort((a, b) => a - b)
  return {
    hosts: opts.hosts,
    seed: opts.seed,
    held: rec.held ?? null,
    setAside: rec.stray?.host ?? null,
    syscalls: rec.lowered.calls,
    syscallsUnderDataRoot: rec.lowered.callsUnderRoot,
    operations: ops.length,
    barriers: ops.filter((o) => o.op === 'fsync').length,
    barriersDropped,
    crashPoints: en.points,
    statesPossible: en.possible,
    statesEnumerated: en.states.length,
    statesDistinct: distinct.size,
    statesChecked: checked,
    statesWithJournal: withJournal,
    wakeProbes,
    checkedByIntent: byIntent,
    readyMsMedian: readyMs[Math.floor(readyMs.length / 2)] ?? 0,
    readyMsMax: readyMs[readyMs.length - 1] ?? 0,
    workers: opts.workers,
    agent: opts.agent,
    violations,
    skippedCalls: rec.lowered.skipped.slice(0, 20),
    cutWrites: rec.lowered.cutWrites,
    seconds: Math.round((performance.now() - t0) / 100) / 10,
  }
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      hosts: { type: 'string', default: '6' },
      seed: { type: 'string', default: '1' },
      'max-checks': { type: 'string', default: '2000' },
      workers: { type: 'string', default: '2' },
      samples: { type: 'string', default: '64' },
      agent: { type: 'string', default: 'in-process' },
      dir: { type: 'string' },
      keep: { type: 'boolean', default: false },
      'dump-ops': { type: 'string' },
      'drop-barrier': { type: 'string' },
      'states-dir': { type: 'string' },
    },
  })
  const hosts = Number(values.hosts)
  const seed = Number(values.seed)
  const maxChecks = Number(values['max-checks'])
  const workers = Number(values.workers)
  const samplesPerPoint = Number(values.samples)
  const agent = values.agent
  if (
    ![hosts, seed, maxChecks, workers, samplesPerPoint].every((n) => Number.isInteger(n) && n >= 1) ||
    (agent !== 'process' && agent !== 'in-process')
  ) {
    process.stderr.write(
      'usage: npm run crash:power -- [--hosts N] [--seed S] [--max-checks N] [--workers N] [--samples N] [--agent in-process|process] [--dir D] [--states-dir D] [--keep] [--dump-ops FILE] [--drop-barrier REGEX]\n',
    )
    return 2
  }
  const root = values.dir ?? fs.mkdtempSync(path.join(fs.realpathSync(os.tmpdir()), 'layoutd-power-'))
  const shm = fs.statSync('/dev/shm', { throwIfNoEntry: false })?.isDirectory() === true
  const statesRoot =
    values['states-dir'] ?? (shm ? fs.mkdtempSync('/dev/shm/layoutd-power-states-') : path.join(root, 'states'))
  const summary = await explore({
    hosts,
    seed,
    root,
    maxChecks,
    workers,
    agent,
    statesRoot,
    samplesPerPoint,
    dumpOps: values['dump-ops'],
    dropBarrier: values['drop-barrier'],
    log: (l) => process.stderr.write(`${l}\n`),
  })
  process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`)
  if (!values.keep && summary.violations.length === 0)
    for (const d of [root, statesRoot]) fs.rmSync(d, { recursive: true, force: true })
  else process.stderr.write(`power: kept ${root} and the states at ${statesRoot}\n`)
  return summary.violations.length === 0 ? 0 : 1
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await main()
}

// The power-loss explorer (design §3.5): records the agent's system calls
// while it migrates and reverts a few tenants (record.ts), builds the crash
// states the weak persistence model allows (model.ts), writes each distinct
// one out as a real data root, starts the real agent on it (start-up
// recovery) and checks the invariants of design §3–§4 once it is ready:
// every tree byte-identical in exactly one place, the row agreeing or a
// journal naming the move, no journal the crash left outliving recovery,
// no marker nothing explains, and every host a journal names reported
// `fenced` (so not wakeable) until recovery ends.
//
//   npm run crash:power -- --hosts 6 --seed 1 [--max-checks N] [--keep] [--drop-barrier REGEX]
// Prints a JSON summary; exits 1 when a crash state broke an invariant.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import { pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import type { Mode } from '../../src/domain/modes.js'
import { AgentProcess, type Sandbox } from '../../test/helpers/agent-process.js'
import { checkFence, checkState, layoutFiles, rng, type World } from '../crash.js'
import { durableAt, enumerate, imageHash, replay, type CrashState, type FsImage, type Op, type OpBody } from './model.js'
import { record, type Recording } from './record.js'
import { materialise } from './trace.js'

/** The registry's files: SQLite's own protocol makes them durable, so each is taken as of its last fsync (design §3.5). */
const REGISTRY_FILE = /\/registry\.db(-wal|-shm|-journal)?$|\/agent\.lock(-wal|-shm|-journal)?$/

export interface Violation {
  state: string
  problems: string[]
}

export interface PowerSummary {
  hosts: number
  seed: number
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
  if (root?.kind === 'dir') for (const [name, ino] of root.entries) if (REGISTRY_FILE.test(`/${name}`)) registryInos.add(ino)
  for (const o of ops) {
    const m = /^create (.*)$/.exec(o.what)
    if (o.op === 'create' && m !== null && REGISTRY_FILE.test(m[1] ?? '')) registryInos.add(o.ino)
  }
  return (o) => (o.op === 'write' || o.op === 'truncate' || o.op === 'chmod') && registryInos.has(o.ino)
}

/**
 * Starts the agent on one materialised state and checks it; answers the
 * problems. The registry's rows name paths under the recorded data root,
 * so the state is reached through that path: a symlink to the state's tree
 * (the data root itself may be a link, design §2.1). One state at a time.
 */
async function checkOne(rec: Recording, stateData: string, mode: Mode): Promise<string[]> {
  const sb = rec.world.sb
  fs.rmSync(sb.deployDir, { recursive: true, force: true })
  fs.cpSync(rec.deploy[mode], sb.deployDir, { recursive: true })
  fs.symlinkSync(stateData, sb.dataDir)
  try {
    return await checkLinked(rec, mode)
  } finally {
    fs.unlinkSync(sb.dataDir)
  }
}

/** What the checks did, so a run shows they were not vacuous. */
const tally = { wakeProbes: 0, statesWithJournal: 0 }

async function checkLinked(rec: Recording, mode: Mode): Promise<string[]> {
  const sb: Sandbox = rec.world.sb
  const w: World = { ...rec.world, tenants: rec.world.tenants.map((t) => ({ ...t, key: undefined })) }
  const problems: string[] = []
  // The state as the crash left it: every tree in one place, or a journal naming the move.
  const journals = layoutFiles(w.dirs).journals
  if (journals.size > 0) tally.statesWithJournal++
  try {
    problems.push(...checkState(w, { aside: true }).problems.map((p) => `on disk after the crash: ${p}`))
  } catch (err) {
    problems.push(`on disk after the crash: not checkable: ${err instanceof Error ? err.message : String(err)}`)
  }
  let agent: AgentProcess
  try {
    agent = await AgentProcess.start(sb)
  } catch (err) {
    return [...problems, `the agent did not start (intent ${mode}): ${err instanceof Error ? err.message : String(err)}`]
  }
  try {
    for (;;) {
      // Until recovery ends, a host a journal names reads fenced, and no wake is granted while its journal stands.
      const f = await checkFence(w, agent)
      problems.push(...f.problems)
      for (const [h, j] of journals) {
        const res = await fetch(`${agent.url}/wakes/${h}`, { method: 'POST' }).catch(() => undefined)
        if (res === undefined) continue
        await res.body?.cancel()
        tally.wakeProbes++
        if (res.status !== 200) continue
        const k = layoutFiles(w.dirs).journals.get(h)
        if (k !== undefined && k.generation === j.generation) problems.push(`${h}: a wake was granted while the journal the crash left (generation ${j.generation}) still stood`)
      }
      if (await agent.ready().catch(() => false)) break
      if (agent.exit !== undefined) return [...problems, `the agent exited during start-up:\n${agent.tail()}`]
      if (performance.now() - agent.startedAt > 60_000) return [...problems, `not ready within 60 s:\n${agent.tail()}`]
      await delay(20)
    }
    const now = layoutFiles(w.dirs).journals
    for (const [h, j] of journals) {
      const k = now.get(h)
      if (k !== undefined && k.generation === j.generation && k.startedAt === j.startedAt) problems.push(`${h}: the journal the crash left outlived start-up recovery`)
    }
  } finally {
    await agent.kill()
  }
  const after = checkState(w, { aside: true })
  problems.push(...after.problems.map((p) => `after recovery: ${p}`))
  return problems
}

export async function explore(opts: {
  hosts: number
  seed: number
  root: string
  maxChecks: number
  /** Writes the lowered ops, one a line, with the barrier that makes each durable. */
  dumpOps?: string
  /** A regex over an fsync's words (the data root written `D`): those fsyncs are taken out of the trace. */
  dropBarrier?: string
  log: (l: string) => void
}): Promise<PowerSummary> {
  const t0 = performance.now()
  const rec = await record(opts)
  // --drop-barrier: the same run without the fsyncs that match, to show what the explorer finds when one is missing.
  const drop = opts.dropBarrier === undefined ? undefined : new RegExp(opts.dropBarrier)
  const ops = rec.lowered.ops.filter((o) => !(o.op === 'fsync' && drop?.test(o.what.replaceAll(rec.world.sb.dataDir, 'D')) === true))
  const barriersDropped = rec.lowered.ops.length - ops.length
  if (opts.dumpOps !== undefined) {
    const dur = durableAt(ops)
    fs.writeFileSync(opts.dumpOps, ops.map((o, i) => `#${i} ${o.what}${o.op === 'fsync' ? '' : ` (durable ${dur[i] === Infinity ? 'never' : `at #${dur[i]}`})`}\n`).join(''))
  }
  const en = enumerate(ops, { asOfLastFsync: registryOp(rec.initial, ops), random: rng(opts.seed), exhaustiveUpTo: 64, samplesPerPoint: 16 })
  opts.log(`power: ${ops.length} ops, ${en.points} crash points, ${en.states.length} states enumerated (${en.possible} possible)`)
  // Distinct images only: many subsets leave the same tree.
  const distinct = new Map<string, CrashState>()
  for (const s of en.states) {
    const h = imageHash(replay(rec.initial, ops, s.persisted))
    if (!distinct.has(h)) distinct.set(h, s)
  }
  // Checked: all when few, else a seeded sample spread over the trace.
  const random = rng(opts.seed + 1)
  let todo = [...distinct.values()]
  if (todo.length > opts.maxChecks) todo = todo.map((s) => ({ s, k: random() })).sort((a, b) => a.k - b.k).slice(0, opts.maxChecks).map((x) => x.s).sort((a, b) => a.at - b.at)
  opts.log(`power: ${distinct.size} distinct states, checking ${todo.length}`)
  const violations: Violation[] = []
  let checked = 0
  // The recorded tree steps aside; each state takes its path in turn.
  fs.renameSync(rec.world.sb.dataDir, `${rec.world.sb.dataDir}.recorded`)
  for (const [n, s] of todo.entries()) {
    const dir = path.join(opts.root, 'states', String(n))
    fs.mkdirSync(dir, { recursive: true })
    materialise(replay(rec.initial, ops, s.persisted), path.join(dir, 'data'))
    const lastOp = ops[Math.max(0, s.at - 1)]
    const mode: Mode = lastOp !== undefined && lastOp.t > rec.flipAt ? 'flat' : 'nested'
    const problems = await checkOne(rec, path.join(dir, 'data'), mode)
    checked++
    if (problems.length > 0) {
      violations.push({ state: `state ${n}: ${describe(ops, s)} [intent ${mode}, kept at ${dir}]`, problems })
      opts.log(`power: VIOLATION in state ${n}: ${problems[0]}`)
    } else fs.rmSync(dir, { recursive: true, force: true })
    if (checked % 25 === 0) opts.log(`power: ${checked}/${todo.length} checked, ${violations.length} violation(s)`)
  }
  return {
    hosts: opts.hosts,
    seed: opts.seed,
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
    statesWithJournal: tally.statesWithJournal,
    wakeProbes: tally.wakeProbes,
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
      dir: { type: 'string' },
      keep: { type: 'boolean', default: false },
      'dump-ops': { type: 'string' },
      'drop-barrier': { type: 'string' },
    },
  })
  const hosts = Number(values.hosts)
  const seed = Number(values.seed)
  const maxChecks = Number(values['max-checks'])
  if (![hosts, seed, maxChecks].every((n) => Number.isInteger(n) && n >= 1)) {
    process.stderr.write('usage: npm run crash:power -- [--hosts N] [--seed S] [--max-checks N] [--dir D] [--keep] [--dump-ops FILE] [--drop-barrier REGEX]\n')
    return 2
  }
  const root = values.dir ?? fs.mkdtempSync(path.join(fs.realpathSync(os.tmpdir()), 'layoutd-power-'))
  const summary = await explore({ hosts, seed, root, maxChecks, dumpOps: values['dump-ops'], dropBarrier: values['drop-barrier'], log: (l) => process.stderr.write(`${l}\n`) })
  process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`)
  if (!values.keep && summary.violations.length === 0) fs.rmSync(root, { recursive: true, force: true })
  else process.stderr.write(`power: kept ${root}\n`)
  return summary.violations.length === 0 ? 0 : 1
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await main()
}

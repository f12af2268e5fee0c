// The random kill -9 harness (design §3–§4): the real agent, as a child
// process on a temp data dir of N flat tenants, is killed with SIGKILL at
// random moments of its pass, restarted, killed again, ..., and the last
// run of each direction goes to completion. After every kill the frozen
// state on disk is checked (every tree byte-identical, in exactly one
// place, the row agreeing with it or a journal naming the move); while it
// runs, the status report is checked to say `fenced` for every host a
// journal names; after each restart, no journal the crash left may outlive
// recovery; at the end no journal is left at all.
//
// `npm test` runs it small (test/crash/random-kill.test.ts); run large:
//   node dist/bench/crash.js --hosts 1000 --kills 200 [--seed N] [--keep]
// It prints a JSON summary and exits 1 when an invariant broke.
import { createHash } from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import { pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import { validHost } from '../src/domain/hostname.js'
import type { Mode } from '../src/domain/modes.js'
import { flatPaths, nestedPaths, pathsFor, type Dirs } from '../src/domain/paths.js'
import type { RowPaths } from '../src/domain/schemas.js'
import { Registry } from '../src/infra/registry.js'
import { AgentProcess, makeSandbox, recordIntent, type Sandbox } from '../test/helpers/agent-process.js'
import { INSTANCE_ENV } from '../src/infra/instance-keys.js'
import { makeTenantTree, treeLines } from '../test/helpers/tenants.js'

// ---- a seeded random source: a failing run repeats its choices ----------

/** mulberry32: small, fast, good enough to pick delays and names. */
export function rng(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

// ---- the tenants ----------------------------------------------------------

/** Names beyond the tenant helper's: what a shell, a URL or a Windows user would trip on. */
const MORE_ODD_NAMES = [
  ' leading space',
  'trailing space ',
  'back\\slash',
  'star*and?question',
  '%41%20percent',
  '😀 emoji ☃',
  'x'.repeat(255),
  '..dots..',
  'quote\'"both',
  'semi;colon|pipe&amp',
  '$HOME',
]

/** A valid host for tenant i, in a few shapes (numeric labels, inner double hyphens, punycode-like). */
export function hostFor(i: number): string {
  const shapes = [`t${i}.example.com`, `${i}.tenants.example.org`, `a-${i}--b.example.net`, `xn--caf-dma${i}.example`]
  const h = shapes[i % shapes.length] ?? `t${i}.example.com`
  if (!validHost(h)) throw new Error(`hostFor(${i}) = ${h} is not a valid host`)
  return h
}

/** Sizes and shapes vary by seed: many small files, deep trees, a large file now and then. */
function addVariety(dir: string, seed: number): void {
  const w = (rel: string, data: Buffer | string): void => {
    fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true })
    fs.writeFileSync(path.join(dir, rel), data)
  }
  for (const [i, name] of MORE_ODD_NAMES.entries()) w(path.join('odd', name), `${seed}:${i}\n`)
  if (seed % 5 === 0) for (let i = 0; i < 40; i++) w(`many/f${i}.txt`, `${seed}-${i}\n`.repeat(1 + (i % 7)))
  if (seed % 9 === 1) w(Array.from({ length: 16 }, (_, i) => `d${i}`).join('/') + '/bottom.txt', `deep ${seed}\n`)
  if (seed % 97 === 7) w('big.bin', Buffer.alloc(512 * 1024, seed & 0xff))
  if (seed % 13 === 2) fs.mkdirSync(path.join(dir, 'hollow/tree/of/dirs'), { recursive: true })
}

/** The key file's temporary name (src/infra/instance-keys.ts): a crash may leave it, the next start removes it. */
const KEY_TEMP = '.instance.env.tmp'

/** What a tenant's tree is: its hash without the agent's instance key, and the key's own line. */
export interface TreePrint {
  /** sha256 over test/helpers/tenants.ts treeLines, less the key file and its temporary name. */
  hash: string
  /** The key file's line (`"instance.env" file 600 <sha256>`), when it has one. */
  key: string | undefined
  /** The key's temporary name is there (a mint a kill cut short). */
  keyTemp: boolean
}

/**
 * The agent mints `instance.env` into every tenant's directory that has
 * none, once, and never rewrites it: the tree the tenant made is what must
 * not change, and the key, once there, must not change either.
 */
export function treePrint(dir: string): TreePrint {
  const keyLine = `${JSON.stringify(INSTANCE_ENV)} `
  const tempLine = `${JSON.stringify(KEY_TEMP)} `
  const lines = treeLines(dir)
  const rest = lines.filter((l) => !l.startsWith(keyLine) && !l.startsWith(tempLine))
  return {
    hash: createHash('sha256').update(rest.join('\n')).digest('hex'),
    key: lines.find((l) => l.startsWith(keyLine)),
    keyTemp: lines.some((l) => l.startsWith(tempLine)),
  }
}

export interface Tenant {
  host: string
  /** treePrint(dir).hash, taken when it was made. */
  hash: string
  /** The key file's line once a check has seen it. */
  key?: string
  /** The row's db, relative to its dir. */
  dbRel: string
}

/** The agent's sandbox and the tenants in it, with what each should stay. */
export interface World {
  sb: Sandbox
  dirs: Dirs
  tenants: Tenant[]
}

/** The rows paths of a tenant in mode. */
export function rowPathsFor(w: World, t: Tenant, mode: Mode): RowPaths {
  const p = pathsFor(w.dirs, t.host, mode)
  return { ...p, db: path.join(p.dir, t.dbRel) }
}

/**
 * Makes n tenants (trees, rows) in a new sandbox under root, all in one
 * layout: flat by default; nested ones are minted as the pass would leave
 * them (root 0750, run/ 2770).
 */
export async function makeWorld(
  root: string,
  n: number,
  opts: { firstSeed?: number; mode?: Mode } = {},
): Promise<World> {
  const sb = await makeSandbox(root)
  const dirs: Dirs = { dataDir: sb.dataDir, runDir: path.join(sb.dataDir, 'run') }
  fs.mkdirSync(dirs.runDir, { recursive: true })
  const mode = opts.mode ?? 'flat'
  const tenants: Tenant[] = []
  const registry = Registry.open(sb.dataDir)
  try {
    for (let i = 0; i < n; i++) {
      const host = hostFor(i)
      const seed = (opts.firstSeed ?? 1) + i
      const p = pathsFor(dirs, host, mode)
      if (mode === 'nested') {
        const run = path.dirname(p.socket)
        fs.mkdirSync(run, { recursive: true })
        fs.chmodSync(path.dirname(run), 0o750)
        fs.chmodSync(run, 0o2770)
      }
      const { db } = makeTenantTree(p.dir, seed)
      addVariety(p.dir, seed)
      registry.add({ host, kind: 'instance', hibernate: true, socket: p.socket, dir: p.dir, db })
      tenants.push({ host, hash: treePrint(p.dir).hash, dbRel: path.relative(p.dir, db) })
    }
  } finally {
    registry.close()
  }
  return { sb, dirs, tenants }
}

// ---- what is on disk --------------------------------------------------------

/** Exists, without following a link. */
export function exists(p: string): boolean {
  try {
    fs.lstatSync(p)
    return true
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false
    throw err
  }
}

export interface JournalFile {
  host: string
  to: Mode
  from: RowPaths
  dest: RowPaths
  generation: number
  startedAt: string
}

/** A batch's journal: every move of one group commit. */
interface BatchFile {
  v: 2
  generation: number
  startedAt: string
  moves: Array<Omit<JournalFile, 'generation' | 'startedAt'>>
}

/** What `<data>/layout` holds, by kind; journals by the host each move names. */
export interface LayoutFiles {
  journals: Map<string, JournalFile>
  holds: string[]
  temps: string[]
  other: string[]
}

export function layoutFiles(dirs: Dirs): LayoutFiles {
  const dir = path.join(dirs.dataDir, 'layout')
  const out: LayoutFiles = { journals: new Map(), holds: [], temps: [], other: [] }
  let names: string[]
  try {
    names = fs.readdirSync(dir)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return out
    throw err
  }
  for (const n of names.sort()) {
    if (n.endsWith('.tmp')) out.temps.push(n)
    else if (n.endsWith('.hold')) out.holds.push(n.slice(0, -'.hold'.length))
    else if (n.endsWith('.journal')) {
      let text: string
      try {
        text = fs.readFileSync(path.join(dir, n), 'utf8')
      } catch (err) {
        // Removed between the listing and the read: the live agent finished it.
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
        continue
      }
      // A host's own journal names one move; a batch's (`_batch-<generation>.journal`) names many.
      const parsed = JSON.parse(text) as JournalFile | BatchFile
      const named =
        'moves' in parsed
          ? parsed.moves.map((m) => ({ ...m, generation: parsed.generation, startedAt: parsed.startedAt }))
          : [parsed]
      if (!('moves' in parsed) && parsed.host !== n.slice(0, -'.journal'.length))
        out.other.push(`${n} (it names ${parsed.host})`)
      for (const j of named) {
        const was = out.journals.get(j.host)
        // Named twice (its own journal and a batch's, while the batch is rewritten): only ever the same move.
        if (was !== undefined && (was.to !== j.to || !samePaths(was.from, j.from) || !samePaths(was.dest, j.dest)))
          out.other.push(`${n} (it names ${j.host} with another move than a second journal)`)
        out.journals.set(j.host, j)
      }
    } else if (n === 'grace.json' || n === 'intent.applied') continue
    else if (n === 'aside') {
      if (fs.readdirSync(path.join(dir, n)).length > 0) out.other.push(n)
    } else out.other.push(n)
  }
  return out
}

/** The hosts the journals name (for checks against a running agent). */
function journalHosts(dirs: Dirs): Set<string> {
  return new Set(layoutFiles(dirs).journals.keys())
}

/** Where each tenant's tree is, as a check sees it. */
export interface Placement {
  host: string
  at: Mode | 'both' | 'none'
  /** The row's paths, or undefined when the row is gone. */
  row: RowPaths | undefined
}

function samePaths(a: RowPaths | undefined, b: RowPaths | undefined): boolean {
  return a !== undefined && b !== undefined && a.dir === b.dir && a.socket === b.socket && a.db === b.db
}

export interface StateCheck {
  /** Every invariant broken, one line each. */
  problems: string[]
  placements: Placement[]
  files: LayoutFiles
  /** Hosts whose row and files disagree (a journal names each, or that is a problem too). */
  rowBehind: number
}

export interface StateOptions {
  /** After the final converge: every host in this layout (or the one it answers), no journal, no temporary file. */
  final?: Mode | ((host: string) => Mode)
  /** Hosts expected to carry a hold marker; any other marker is a problem. */
  holds?: readonly string[]
  /** Something set aside is expected (the test put it in the way). */
  aside?: boolean
}

/**
 * The invariants of a state on disk with no agent running (design §3–§4):
 * every tree in exactly one place and byte-identical (hash); the row at the
 * paths the files are at, or else a journal naming exactly that move; every
 * journal naming its host's two shapes. Hold markers and anything set aside
 * are problems unless opts expects them: plain tenants give the pass no
 * reason for either.
 */
export function checkState(w: World, opts: StateOptions = {}): StateCheck {
  const problems: string[] = []
  const files = layoutFiles(w.dirs)
  const registry = Registry.open(w.sb.dataDir)
  const placements: Placement[] = []
  const final = typeof opts.final === 'string' ? () => opts.final as Mode : opts.final
  let rowBehind = 0
  try {
    for (const t of w.tenants) {
      const flat = exists(flatPaths(w.dirs, t.host).dir)
      const nested = exists(nestedPaths(w.dirs, t.host).dir)
      const at: Placement['at'] = flat && nested ? 'both' : flat ? 'flat' : nested ? 'nested' : 'none'
      const r = registry.get(t.host)
      const row = r === undefined ? undefined : { dir: r.dir, socket: r.socket, db: r.db }
      placements.push({ host: t.host, at, row })
      if (at === 'both' || at === 'none') {
        problems.push(`${t.host}: tree is in ${at === 'both' ? 'both places' : 'neither place'}`)
        continue
      }
      const dir = pathsFor(w.dirs, t.host, at).dir
      const st = fs.lstatSync(dir)
      if (!st.isDirectory()) problems.push(`${t.host}: ${dir} is not a directory`)
      else {
        const tp = treePrint(dir)
        if (tp.hash !== t.hash) problems.push(`${t.host}: tree at ${dir} differs from the original (hash)`)
        if (t.key !== undefined && tp.key !== t.key)
          problems.push(`${t.host}: its instance key ${tp.key === undefined ? 'vanished' : 'changed'}`)
        t.key ??= tp.key
        if (final !== undefined && !/^"instance\.env" file 600 [0-9a-f]{64}$/.test(tp.key ?? '')) {
          problems.push(`${t.host}: no instance key (mode 600) after the final converge: ${String(tp.key)}`)
        }
        if (final !== undefined && tp.keyTemp) problems.push(`${t.host}: ${KEY_TEMP} left after the final converge`)
      }
      const j = files.journals.get(t.host)
      const here = rowPathsFor(w, t, at)
      const want = final?.(t.host)
      if (want !== undefined && at !== want) problems.push(`${t.host}: tree is ${at}, wanted ${want}`)
      if (samePaths(row, here)) continue
      rowBehind++
      if (j === undefined) {
        problems.push(
          `${t.host}: row ${JSON.stringify(row)} disagrees with the files (${at}) and no journal names the move`,
        )
        continue
      }
      const other: Mode = at === 'flat' ? 'nested' : 'flat'
      if (!samePaths(row, rowPathsFor(w, t, other)))
        problems.push(`${t.host}: row ${JSON.stringify(row)} is neither shape`)
    }
    for (const [host, j] of files.journals) {
      const t = w.tenants.find((x) => x.host === host)
      if (t === undefined) {
        problems.push(`journal for unknown host ${host}`)
        continue
      }
      const from: Mode = j.to === 'nested' ? 'flat' : 'nested'
      if (
        j.host !== host ||
        !samePaths(j.from, rowPathsFor(w, t, from)) ||
        !samePaths(j.dest, rowPathsFor(w, t, j.to))
      ) {
        problems.push(`${host}: journal does not name its two shapes: ${JSON.stringify(j)}`)
      }
    }
  } finally {
    registry.close()
  }
  const holds = new Set(opts.holds ?? [])
  for (const h of files.holds) if (!holds.has(h)) problems.push(`${h}: unexpected hold marker`)
  for (const o of files.other)
    if (!(o === 'aside' && opts.aside === true))
      problems.push(`unexpected ${o} in ${path.join(w.dirs.dataDir, 'layout')}`)
  if (final !== undefined) {
    for (const h of holds) if (!files.holds.includes(h)) problems.push(`${h}: hold marker missing`)
    for (const h of files.journals.keys()) problems.push(`${h}: journal left after the final converge`)
    for (const tmp of files.temps) problems.push(`${tmp}: temporary file left after the final converge`)
  }
  return { problems, placements, files, rowBehind }
}

/**
 * The fence, seen from outside a running agent: a host a journal names
 * before and after one status request was named throughout it (a move
 * writes its journal once and removes it once), so the report must call it
 * `fenced`. Answers the problems found and how many hosts were checked; a
 * request the agent did not answer (killed meanwhile) checks nothing.
 */
export async function checkFence(
  w: World,
  agent: Pick<AgentProcess, 'status' | 'pid'>,
): Promise<{ problems: string[]; checked: number; fenced: number; unanswered?: string }> {
  const before = journalHosts(w.dirs)
  let report
  try {
    report = await agent.status()
  } catch (err) {
    // Killed or not yet serving: nothing was observed, nothing to judge.
    return { problems: [], checked: 0, fenced: 0, unanswered: (err as Error).message }
  }
  const after = journalHosts(w.dirs)
  const problems: string[] = []
  let checked = 0
  for (const h of before) {
    if (!after.has(h)) continue
    checked++
    const row = report.rows[h]
    if (row?.layout !== 'fenced') {
      problems.push(
        `${h}: a journal names it, yet /layout/status says ${JSON.stringify(row)} (agent ${agent.pid}, mode ${report.mode})`,
      )
    }
  }
  const fenced = Object.values(report.rows).filter((r) => r.layout === 'fenced').length
  return { problems, checked, fenced }
}

// ---- the random kills ------------------------------------------------------

export interface CrashOptions {
  hosts: number
  /** Kills in all, split between the migrate and the revert. */
  kills: number
  seed: number
  /** A directory the caller owns; the sandbox is made inside it. */
  root: string
  /** Progress lines (to stderr in the script). */
  log?: (line: string) => void
  /** Each agent's output is appended to <root>/agent.log. */
  keepLogs?: boolean
}

/**
 * Where a kill landed in the move (design §3.1), read from the disk it left:
 * `no-journal` (before a fence, between batches, after a journal's removal),
 * `journaled` (steps 4–6: a journal, the files still at the source),
 * `renamed` (step 7: the files at the destination, the row behind them),
 * `committed` (steps 8–9: the row rewritten, the journal not yet removed).
 * A kill that cut hosts at several steps counts at the furthest.
 */
export const KILL_STEPS = ['no-journal', 'journaled', 'renamed', 'committed'] as const
export type KillStep = (typeof KILL_STEPS)[number]

/** The steps a failpoint kill is placed at: each leaves a journal on disk (design §3.4). */
const TARGETED_STEPS = ['after-journal', 'after-preflight', 'after-prepare', 'after-rename', 'after-row'] as const

/** Where the kill that left c landed: the furthest step of any host a journal names. */
export function killStep(w: World, c: StateCheck): KillStep {
  let step = 0
  for (const [host, j] of c.files.journals) {
    const p = c.placements.find((x) => x.host === host)
    const t = w.tenants.find((x) => x.host === host)
    if (p === undefined || t === undefined) continue
    const here = p.at !== j.to ? 1 : samePaths(p.row, rowPathsFor(w, t, j.to)) ? 3 : 2
    step = Math.max(step, here)
  }
  return KILL_STEPS[step] ?? 'no-journal'
}

export interface PhaseSummary {
  mode: Mode
  kills: number
  /** Kills by where they landed in the move (KILL_STEPS). */
  killsByStep: Record<KillStep, number>
  /** Kills placed by a failpoint at a step that leaves a journal (the first life of each phase), so every phase cuts a move whatever the timing. */
  killsTargeted: number
  /** Kills that found at least one journal on disk (a move in flight). */
  killsMidMove: number
  /** Kills that found a row behind its files (between rename and commit). */
  killsRowBehind: number
  /** Kills that landed before the restarted agent was ready (during start-up or recovery). */
  killsBeforeReady: number
  /** Lives in which the intent was flipped for one life, so a recovery rolls a move back. */
  flips: number
  /** The final run: from its start to every host reported in mode. */
  finalSeconds: number
  seconds: number
}

export interface CrashSummary {
  hosts: number
  kills: number
  seed: number
  seconds: number
  phases: PhaseSummary[]
  /** Status reports checked against the journals on disk, and the hosts checked in them. */
  fenceChecks: { reports: number; hosts: number }
  /** Entries of <data>/nested that are no tenant's (a gate self-check a kill cut short leaves one). */
  nestedLeftovers: { count: number; examples: string[] }
  /** Every invariant broken; empty when the run passed. */
  problems: string[]
}

class Broken extends Error {
  override name = 'Broken'
}

/** The most the harness will believe the leg needs before its first fence (a loaded machine can make one run look slow). */
const MAX_LEG_MS = 10_000

/** How long a restarted agent may take to answer /ready before the run counts it stuck. */
const READY_TIMEOUT_MS = 120_000

/**
 * When a life ends: killed `afterMs` after the agent listens (`start`: the
 * kill lands in start-up recovery) or after it is ready (`work`: the kill
 * lands in the pass), or run to completion (`never`).
 */
export type KillPlan = { at: 'start' | 'work'; afterMs: number } | { at: 'step'; step: string } | 'never'

interface Watch {
  fenceReports: number
  fenceHosts: number
  /** Broken invariants of the life under way. */
  problems: string[]
}

/** The first lines of a long list, and how many more. */
function capped(lines: readonly string[], n = 10): string {
  return lines.length <= n ? lines.join('\n') : `${lines.slice(0, n).join('\n')}\n... and ${lines.length - n} more`
}

/** One life of the agent: started, watched, killed as planned (or run until every host is in finalMode). */
async function life(
  w: World,
  plan: KillPlan,
  st: Watch,
  logFile: string | undefined,
  finalMode: Mode,
): Promise<{
  listenedAt: number
  readyAt: number | undefined
  fencedAt: number | undefined
  killedAt: number | undefined
}> {
  const before = layoutFiles(w.dirs).journals
  const failpoint = plan !== 'never' && plan.at === 'step' ? plan.step : undefined
  const agent = await AgentProcess.start(w.sb, {
    ...(logFile === undefined ? {} : { logFile }),
    ...(failpoint === undefined ? {} : { failpoint }),
  })
  // Kills count from the moment it listens: recovery starts there, and what
  // comes before (node loading its modules) is nothing a kill could break.
  const listenedAt = performance.now()
  let readyAt: number | undefined
  let fencedAt: number | undefined
  let killedAt: number | undefined
  let killing: Promise<unknown> | undefined
  const killIn = (ms: number): void => {
    killing = delay(ms).then(() => {
      killedAt = performance.now()
      return agent.kill()
    })
  }
  if (plan !== 'never' && plan.at === 'start') killIn(plan.afterMs)
  try {
    // Watch until the kill: readiness, then the fence against the journals.
    while (killedAt === undefined && agent.exit === undefined) {
      if (failpoint !== undefined && readyAt !== undefined && performance.now() - readyAt > READY_TIMEOUT_MS) {
        throw new Broken(
          `the failpoint ${failpoint} was not reached ${READY_TIMEOUT_MS} ms after the agent was ready:\n${agent.tail()}`,
        )
      }
      if (readyAt === undefined) {
        if (await agent.ready().catch(() => false)) {
          readyAt = performance.now()
          if (plan !== 'never' && plan.at === 'work') killIn(plan.afterMs)
          // Recovery finishes every journal the crash left before /ready says
          // 200: one still here under the same generation was kept, and
          // nothing these tenants do gives recovery a reason to keep one.
          const now = layoutFiles(w.dirs).journals
          for (const [h, j] of before) {
            const k = now.get(h)
            if (k !== undefined && k.generation === j.generation && k.startedAt === j.startedAt) {
              st.problems.push(
                `${h}: the journal the crash left (generation ${j.generation}) outlived start-up recovery`,
              )
            }
          }
        } else if (performance.now() - listenedAt > READY_TIMEOUT_MS) {
          throw new Broken(`the agent was not ready ${READY_TIMEOUT_MS} ms after it listened:\n${agent.tail()}`)
        }
      }
      // Before /ready says 200 as after: the report is read during start-up recovery too.
      const f = await checkFence(w, agent)
      if (f.checked > 0) st.fenceReports++
      st.fenceHosts += f.checked
      st.problems.push(...f.problems)
      if (f.fenced > 0 && readyAt !== undefined) fencedAt ??= performance.now()
      if (plan === 'never' && readyAt !== undefined) break
      // Pacing, not waiting on a state: each report costs the agent a walk of every row.
      await delay(readyAt === undefined ? 10 : 40)
    }
    if (plan === 'never') {
      await agent.waitConverged(
        w.tenants.map((t) => t.host),
        finalMode,
        60_000 + 200 * w.tenants.length,
        w.tenants.length > 200 ? 250 : 25,
      )
      const exit = await agent.stop()
      if (exit.code !== 0)
        throw new Broken(`the agent did not stop cleanly on SIGTERM: ${JSON.stringify(exit)}\n${agent.tail()}`)
    } else {
      await killing
      if (failpoint !== undefined) killedAt ??= performance.now()
      if (agent.exit?.signal !== 'SIGKILL')
        throw new Broken(`the agent exited on its own: ${JSON.stringify(agent.exit)}\n${agent.tail()}`)
    }
  } catch (err) {
    await agent.kill()
    throw err
  }
  return { listenedAt, readyAt, fencedAt, killedAt }
}

function countAt(w: World, mode: Mode): number {
  let n = 0
  for (const t of w.tenants) if (exists(pathsFor(w.dirs, t.host, mode).dir)) n++
  return n
}

/**
 * Migrates then reverts every tenant, each direction under `kills/2`
 * random kills, and checks the invariants after each. Answers the summary;
 * summary.problems lists what broke (the run stops at the first crash state
 * that breaks one, since nothing after it would mean anything).
 */
export async function runCrash(opts: CrashOptions): Promise<CrashSummary> {
  const log = opts.log ?? (() => undefined)
  const random = rng(opts.seed)
  const t0 = performance.now()
  log(`crash: making ${opts.hosts} flat tenants under ${opts.root}`)
  const w = await makeWorld(opts.root, opts.hosts, { firstSeed: opts.seed * 7919 })
  const logFile = opts.keepLogs === true ? path.join(opts.root, 'agent.log') : undefined
  const st: Watch = { fenceReports: 0, fenceHosts: 0, problems: [] }
  const summary: CrashSummary = {
    hosts: opts.hosts,
    kills: opts.kills,
    seed: opts.seed,
    seconds: 0,
    phases: [],
    fenceChecks: { reports: 0, hosts: 0 },
    nestedLeftovers: { count: 0, examples: [] },
    problems: [],
  }
  // What a life costs, learned as the run goes: start-up (listen to
  // ready), the leg's first steps (ready to the first host fenced) and one
  // move. A kill lands uniformly within start-up (one in four), or
  // uniformly within the time the work left should take spread over the
  // kills left, so kills fall all along the pass instead of bunching at
  // its start or its end.
  let startMs = 200
  let legMs = 300
  let moveMs = 15
  try {
    for (const [pi, mode] of (['nested', 'flat'] as const).entries()) {
      const other: Mode = mode === 'nested' ? 'flat' : 'nested'
      const kills = pi === 0 ? Math.ceil(opts.kills / 2) : Math.floor(opts.kills / 2)
      const ph: PhaseSummary = {
        mode,
        kills,
        killsByStep: { 'no-journal': 0, journaled: 0, renamed: 0, committed: 0 },
        killsTargeted: 0,
        killsMidMove: 0,
        killsRowBehind: 0,
        killsBeforeReady: 0,
        flips: 0,
        finalSeconds: 0,
        seconds: 0,
      }
      const p0 = performance.now()
      await recordIntent(w.sb, mode)
      // One life in the middle runs under the other intent: the journals the
      // kill before it left are then rolled back rather than finished.
      const flipAt = kills >= 3 ? Math.floor(kills / 2) : -1
      for (let k = 0; k < kills; k++) {
        if (k === flipAt) await recordIntent(w.sb, other)
        if (k === flipAt + 1 && flipAt >= 0) await recordIntent(w.sb, mode)
        const target = k === flipAt ? other : mode
        const atBefore = countAt(w, target)
        const workMs = legMs + (moveMs * 2 * (opts.hosts - atBefore)) / (kills - k)
        // The first life of a phase, with every host still to move, is
        // killed by a failpoint at a step that leaves a journal: a phase cuts
        // a move however slow or fast the machine is. The rest land at random.
        const plan: KillPlan =
          k === 0
            ? { at: 'step', step: TARGETED_STEPS[Math.floor(random() * TARGETED_STEPS.length)] ?? 'after-rename' }
            : random() < 0.25
              ? { at: 'start', afterMs: random() * startMs }
              : { at: 'work', afterMs: random() * workMs }
        const { listenedAt, readyAt, fencedAt, killedAt } = await life(w, plan, st, logFile, target)
        if (k === flipAt) ph.flips++
        if (readyAt === undefined) ph.killsBeforeReady++
        else {
          startMs = 0.7 * startMs + 0.3 * (readyAt - listenedAt)
          if (fencedAt !== undefined) legMs = 0.7 * legMs + 0.3 * (fencedAt - readyAt)
          // Killed with work left before the leg fenced anything: its first
          // steps (the key backfill, the intent read) take longer than thought.
          else if (killedAt !== undefined && atBefore < opts.hosts)
            legMs = Math.min(MAX_LEG_MS, Math.max(legMs, 1.5 * (killedAt - readyAt)))
          const moved = countAt(w, target) - atBefore
          const ranMs = (killedAt ?? readyAt) - (fencedAt ?? readyAt)
          if (moved > 0 && ranMs > 0) moveMs = 0.7 * moveMs + 0.3 * (ranMs / moved)
          // Killed with hosts fenced and none moved yet: a move takes longer than thought.
          else if (fencedAt !== undefined && moved === 0) moveMs *= 1.5
        }
        if (plan.at === 'step') ph.killsTargeted++
        const c = checkState(w)
        const step = killStep(w, c)
        ph.killsByStep[step]++
        if (c.files.journals.size > 0) ph.killsMidMove++
        if (c.rowBehind > 0) ph.killsRowBehind++
        const when =
          plan.at === 'step'
            ? `at failpoint ${plan.step}`
            : `${Math.round(plan.afterMs)} ms after ${plan.at === 'start' ? 'it listened' : 'it was ready'}`
        if (c.problems.length > 0)
          throw new Broken(`after kill ${k + 1} of the ${mode} phase (${when}):\n${capped(c.problems)}`)
        if (st.problems.length > 0)
          throw new Broken(`during life ${k + 1} of the ${mode} phase:\n${capped(st.problems)}`)
        log(
          `crash: ${mode} kill ${k + 1}/${kills}${k === flipAt ? ` (intent ${other})` : ''} ${when}: ${countAt(w, mode)}/${opts.hosts} ${mode}, ` +
            `${c.files.journals.size} journal(s), ${c.rowBehind} row(s) behind, landed ${step}${readyAt === undefined ? ', before ready' : ''}`,
        )
      }
      const f0 = performance.now()
      await life(w, 'never', st, logFile, mode)
      ph.finalSeconds = (performance.now() - f0) / 1000
      const c = checkState(w, { final: mode })
      if (c.problems.length > 0) throw new Broken(`after the final ${mode} converge:\n${capped(c.problems)}`)
      if (st.problems.length > 0) throw new Broken(`during the final ${mode} run:\n${capped(st.problems)}`)
      ph.seconds = (performance.now() - p0) / 1000
      summary.phases.push(ph)
      log(
        `crash: ${mode} phase done: ${opts.hosts} ${mode}, every tree intact, ${kills} kills, ${ph.seconds.toFixed(1)} s`,
      )
    }
  } catch (err) {
    if (!(err instanceof Broken)) throw err
    summary.problems.push(err.message)
  }
  summary.fenceChecks = { reports: st.fenceReports, hosts: st.fenceHosts }
  const hosts = new Set(w.tenants.map((t) => t.host))
  const left = fs.readdirSync(path.join(w.dirs.dataDir, 'nested')).filter((n) => !hosts.has(n))
  summary.nestedLeftovers = { count: left.length, examples: left.slice(0, 3) }
  summary.seconds = (performance.now() - t0) / 1000
  return summary
}

// ---- the script ----------------------------------------------------------------

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      hosts: { type: 'string', default: '1000' },
      kills: { type: 'string', default: '200' },
      seed: { type: 'string' },
      dir: { type: 'string' },
      keep: { type: 'boolean', default: false },
    },
  })
  const hosts = Number(values.hosts)
  const kills = Number(values.kills)
  const seed = values.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(values.seed)
  if (!Number.isInteger(hosts) || hosts < 1 || !Number.isInteger(kills) || kills < 0 || !Number.isInteger(seed)) {
    process.stderr.write('usage: node dist/bench/crash.js [--hosts N] [--kills K] [--seed S] [--dir D] [--keep]\n')
    return 2
  }
  const root = values.dir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'layoutd-crash-'))
  const summary = await runCrash({
    hosts,
    kills,
    seed,
    root,
    keepLogs: values.keep,
    log: (l) => process.stderr.write(`${l}\n`),
  })
  process.stdout.write(`${JSON.stringify({ ...summary, root: values.keep ? root : undefined }, null, 2)}\n`)
  if (!values.keep && summary.problems.length === 0) fs.rmSync(root, { recursive: true, force: true })
  else process.stderr.write(`crash: the sandbox is kept at ${root}\n`)
  return summary.problems.length === 0 ? 0 : 1
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  process.exitCode = await main()
}

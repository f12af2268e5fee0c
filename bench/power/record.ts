// Recording for the power-loss explorer (design §3.5): the real agent
// (`node dist/src/main.js serve`) runs under `strace -f` on a world of flat
// tenants built as bench/crash.ts builds it, migrates them to nested
// through a recorded intent, then reverts them, and stops. What it
// recorded: the image of the data root before the agent started, the
// trace lowered to inode operations, and the deploy store as it was under
// each intent (copied, to start a crash state's agent under the intent it
// crashed under).
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import type { Mode } from '../../src/domain/modes.js'
import type { LayoutReport } from '../../src/domain/schemas.js'
import { MAIN_JS, freePort, recordIntent, sandboxEnv } from '../../test/helpers/agent-process.js'
import { flatPaths, nestedPaths, nestedRoot } from '../../src/domain/paths.js'
import { makeWorld, treePrint, type World } from '../crash.js'
import type { FsImage, Ino } from './model.js'
import { loadImage, lower, parseTrace, type Lowered } from './trace.js'

/** The calls traced: what changes the tree or makes it durable, and what moves an fd's offset. */
export const TRACED =
  'openat,open,write,pwrite64,lseek,rename,renameat,renameat2,link,linkat,unlink,unlinkat,mkdir,mkdirat,rmdir,' +
  'symlink,symlinkat,fsync,fdatasync,close,ftruncate,fchmod,fchmodat,chmod'

export const STRACE = process.env.STRACE_BIN ?? '/usr/bin/strace'

export interface Recording {
  world: World
  initial: FsImage
  nextIno: Ino
  lowered: Lowered
  /** Seconds since the epoch when the revert was recorded: ops after it ran under intent flat. */
  flipAt: number
  /** A copy of the deploy store under each intent. */
  deploy: Record<Mode, string>
  traceFile: string
  /** The host held for a second name of one of its files (`scenario.hold`). */
  held?: string
  /** What sat at a nested destination before the move set it aside (`scenario.aside`). */
  stray?: Stray
}

/** A file left where a move goes (a nested `run/`), which the move sets aside (design §3.1 step 3). */
export interface Stray {
  host: string
  /** Where it was made, and its bytes. */
  path: string
  data: Buffer
}

/**
 * The scenario's two exceptions, on tenants 1 and 2 (so at least 3 hosts):
 * one tenant's file gets a second name, so its move to nested is refused and
 * the host held (a hold marker written, the journal removed) until the
 * revert, under which it is flat already and its hold drops; another finds
 * a file where its nested `run/` goes, which the move sets aside.
 */
function addExceptions(world: World, want: { hold?: boolean; aside?: boolean }): { held?: string; stray?: Stray } {
  const out: { held?: string; stray?: Stray } = {}
  const [, h, a] = world.tenants
  if (want.hold === true) {
    if (h === undefined) throw new Error('a hold needs at least 2 hosts')
    const dir = flatPaths(world.dirs, h.host).dir
    fs.linkSync(path.join(dir, 'index.html'), path.join(dir, 'second-name'))
    h.hash = treePrint(dir).hash
    out.held = h.host
  }
  if (want.aside === true) {
    if (a === undefined) throw new Error('an aside needs at least 3 hosts')
    const run = path.dirname(nestedPaths(world.dirs, a.host).socket)
    fs.mkdirSync(nestedRoot(world.dirs, a.host), { recursive: true })
    const data = Buffer.from(`left where ${a.host}'s run/ goes, by someone else\n`)
    fs.writeFileSync(run, data)
    out.stray = { host: a.host, path: run, data }
  }
  return out
}

async function report(url: string): Promise<LayoutReport | undefined> {
  try {
    const res = await fetch(`${url}/layout/status`)
    return res.status === 200 ? ((await res.json()) as LayoutReport) : undefined
  } catch {
    return undefined
  }
}

/** Waits until the leg is idle and every host reads word (or what `except` says for it). */
export async function waitConverged(
  url: string,
  hosts: readonly string[],
  word: Mode,
  exited: () => boolean,
  timeoutMs: number,
  except: Record<string, string> = {},
): Promise<void> {
  const deadline = performance.now() + timeoutMs
  for (;;) {
    if (exited()) throw new Error(`the traced agent exited before every host was ${word}`)
    const r = await report(url)
    if (
      r !== undefined &&
      !r.leg.running &&
      !r.leg.pending &&
      hosts.every((h) => r.rows[h]?.layout === (except[h] ?? word))
    )
      return
    if (performance.now() > deadline) throw new Error(`not every host ${word} within ${timeoutMs} ms`)
    await delay(50)
  }
}

/** The pids of a process's children (Linux /proc). */
export function childrenOf(pid: number): number[] {
  try {
    return fs
      .readdirSync(`/proc/${pid}/task`)
      .flatMap((task) => fs.readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').trim().split(/\s+/))
      .filter((s) => s !== '')
      .map(Number)
  } catch {
    return []
  }
}

/** Builds the world under root, records the agent's migrate and revert under strace, and lowers the trace. */
export async function record(opts: {
  hosts: number
  seed: number
  root: string
  log: (l: string) => void
  /** More of the agent's environment (the audit's CARLOS_FAILPOINT=skip-fsync:<name>). */
  env?: Record<string, string>
  /** A hold and an aside among the moves (addExceptions). */
  scenario?: { hold?: boolean; aside?: boolean }
  /**
   * The migrate driven by the nested default, no intent recorded before the
   * start (the revert's is): the agent keeps no record then (design §7.7),
   * so the pass's first journal is what makes `D/layout`.
   */
  byDefault?: boolean
}): Promise<Recording> {
  const world = await makeWorld(path.join(opts.root, 'world'), opts.hosts, { firstSeed: opts.seed * 7919 })
  const { held, stray } = addExceptions(world, opts.scenario ?? {})
  const { sb } = world
  const hosts = world.tenants.map((t) => t.host)
  if (opts.byDefault !== true) await recordIntent(sb, 'nested')
  const deploy = { nested: path.join(opts.root, 'deploy-nested'), flat: path.join(opts.root, 'deploy-flat') }
  // The intents only: the running agent rewrites its box summary under layout/boxes (a temporary file
  // renamed into place), which a copy taken beside it may list and then not find.
  const copyIntents = (to: string): void =>
    fs.cpSync(sb.deployDir, to, {
      recursive: true,
      filter: (src) => path.relative(sb.deployDir, src) !== path.join('layout', 'boxes'),
    })
  copyIntents(deploy.nested)
  const { image: initial, nextIno } = loadImage(sb.dataDir)
  const traceFile = path.join(opts.root, 'agent.strace')
  const port = await freePort()
  const url = `http://127.0.0.1:${port}`
  const args = [
    '-f',
    '-y',
    '-qq',
    '-xx',
    '-ttt',
    '-s',
    '65536',
    '-e',
    `trace=${TRACED}`,
    '-o',
    traceFile,
    process.execPath,
    MAIN_JS,
    'serve',
  ]
  opts.log(`power: recording ${opts.hosts} tenants flat -> nested -> flat under strace`)
  const child = spawn(STRACE, args, {
    env: sandboxEnv(sb, { ...opts.env, CARLOS_AGENT_LISTEN: `127.0.0.1:${port}` }),
    stdio: ['ignore', 'ignore', 'pipe'],
  })
  let stderr = ''
  child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s))
  let exited = false
  const done = new Promise<void>((resolve) => child.once('exit', () => ((exited = true), resolve())))
  let flipAt: number
  try {
    await waitConverged(url, hosts, 'nested', () => exited, 120_000, held === undefined ? {} : { [held]: 'fenced' })
    flipAt = Date.now() / 1000
    await recordIntent(sb, 'flat')
    copyIntents(deploy.flat)
    await waitConverged(url, hosts, 'flat', () => exited, 120_000)
  } catch (err) {
    // The agent first, while strace is still its parent: once strace is gone it cannot be found here.
    for (const pid of childrenOf(child.pid ?? -1)) process.kill(pid, 'SIGKILL')
    child.kill('SIGKILL')
    throw new Error(`${err instanceof Error ? err.message : String(err)}\nstrace: ${stderr.slice(-2000)}`)
  } finally {
    // SIGTERM to the agent itself (strace would only detach on its own): a clean stop, traced too.
    for (const pid of childrenOf(child.pid ?? -1)) process.kill(pid, 'SIGTERM')
    await done
  }
  const calls = parseTrace(fs.readFileSync(traceFile, 'latin1'))
  const lowered = lower(calls, sb.dataDir, initial, nextIno)
  opts.log(`power: ${calls.length} calls traced, ${lowered.ops.length} operations under the data root`)
  return { world, initial, nextIno, lowered, flipAt, deploy, traceFile, held, stray }
}

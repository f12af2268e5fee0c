// One crash state of the power-loss explorer (design §3.5), checked: the
// state is at the recorded data root's path already (check-worker.ts links
// it there, in a mount namespace of its own); this starts the real agent on
// it under the intent the crash happened under and checks the invariants of
// design §3–§4 before start-up, until `/ready` and after it.
import fs from 'node:fs'
import path from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import type { Mode } from '../../src/domain/modes.js'
import { AgentProcess } from '../../test/helpers/agent-process.js'
import { checkFence, checkState, layoutFiles, type World } from '../crash.js'
import { startInProcess, type StartedAgent } from './in-process.js'
import type { Stray } from './record.js'

/** What a checker needs to know of the recording: the world, and the scenario's exceptions. */
export interface CheckContext {
  world: World
  held?: string
  stray?: Stray
}

/** Where a state's agent runs: `node main.js serve` of its own, or composed in the checker (in-process.ts). */
export type AgentHow = 'process' | 'in-process'

/** One state's verdict, and what the checks did (so a run shows they were not vacuous). */
export interface CheckResult {
  problems: string[]
  /** The state held a journal: a move the crash cut. */
  journal: boolean
  /** Wakes asked, before recovery ended, for hosts a journal named. */
  wakeProbes: number
  /** Milliseconds from the agent's spawn to its `/ready`. */
  readyMs: number
  /** The agent did not stop: the checker must not take another state. */
  stuck?: boolean
}

/** Every regular file under dir (not following links) whose bytes are data. */
function copiesUnder(dir: string, data: Buffer): string[] {
  let names: string[]
  try {
    names = fs.readdirSync(dir)
  } catch {
    return []
  }
  return names.flatMap((n) => {
    const p = path.join(dir, n)
    const st = fs.lstatSync(p)
    if (st.isDirectory()) return copiesUnder(p, data)
    return st.isFile() && st.size === data.length && fs.readFileSync(p).equals(data) ? [p] : []
  })
}

/** The file set aside is in exactly one place: where it was, or under `aside/<host>/`. */
export function strayProblems(ctx: CheckContext): string[] {
  const s = ctx.stray
  if (s === undefined) return []
  const at = copiesUnder(path.join(ctx.world.dirs.dataDir, 'layout', 'aside', s.host), s.data)
  const st = fs.lstatSync(s.path, { throwIfNoEntry: false })
  if (st?.isFile() === true && fs.readFileSync(s.path).equals(s.data)) at.push(s.path)
  return at.length === 1
    ? []
    : [`${s.host}: what was set aside is in ${at.length === 0 ? 'no place' : `${at.length} places: ${at.join(', ')}`}`]
}

/** The state on disk: every tree in one place (or a journal naming the move), markers explained, the stray in one place. */
function onDisk(ctx: CheckContext, w: World, holds: string[], when: string): string[] {
  try {
    return [...checkState(w, { aside: true, holds }).problems, ...strayProblems(ctx)].map((p) => `${when}: ${p}`)
  } catch (err) {
    return [`${when}: not checkable: ${err instanceof Error ? err.message : String(err)}`]
  }
}

/**
 * Starts the agent on the state at the world's data root and checks it. The
 * held host may carry its marker before recovery; after it, only under
 * intent nested (under flat the host is flat already, and its hold drops,
 * design §4.2).
 */
export async function checkLinked(ctx: CheckContext, mode: Mode, how: AgentHow): Promise<CheckResult> {
  const sb = ctx.world.sb
  // Instance keys as the state has them: a check learns each afresh.
  const w: World = { ...ctx.world, tenants: ctx.world.tenants.map((t) => ({ ...t, key: undefined })) }
  const held = ctx.held === undefined ? [] : [ctx.held]
  const journals = layoutFiles(w.dirs).journals
  const out: CheckResult = {
    problems: onDisk(ctx, w, held, 'on disk after the crash'),
    journal: journals.size > 0,
    wakeProbes: 0,
    readyMs: NaN,
  }
  let agent: StartedAgent
  try {
    agent = how === 'process' ? await AgentProcess.start(sb, { listenTimeoutMs: 120_000 }) : await startInProcess(sb)
  } catch (err) {
    out.problems.push(`the agent did not start (intent ${mode}): ${err instanceof Error ? err.message : String(err)}`)
    return out
  }
  try {
    for (;;) {
      // Until recovery ends, a host a journal names reads fenced, and no wake is granted while its journal stands.
      out.problems.push(...(await checkFence(w, agent)).problems)
      for (const [h, j] of journals) {
        const res = await fetch(`${agent.url}/wakes/${h}`, { method: 'POST', headers: agent.authorization() }).catch(
          () => undefined,
        )
        if (res === undefined) continue
        await res.body?.cancel()
        // A probe refused its token is no refusal of the wake: it would prove nothing.
        if (res.status === 401 || res.status === 403) {
          out.problems.push(`${h}: the wake probe was refused its token (${res.status})`)
          continue
        }
        out.wakeProbes++
        if (res.status !== 200) continue
        const k = layoutFiles(w.dirs).journals.get(h)
        if (k !== undefined && k.generation === j.generation)
          out.problems.push(
            `${h}: a wake was granted while the journal the crash left (generation ${j.generation}) still stood`,
          )
      }
      if (await agent.ready().catch(() => false)) break
      if (agent.exit !== undefined) {
        out.problems.push(`the agent exited during start-up:\n${agent.tail()}`)
        return out
      }
      if (performance.now() - agent.startedAt > 120_000) {
        out.problems.push(`not ready within 120 s:\n${agent.tail()}`)
        return out
      }
      await delay(20)
    }
    out.readyMs = Math.round(performance.now() - agent.startedAt)
    const now = layoutFiles(w.dirs).journals
    for (const [h, j] of journals) {
      const k = now.get(h)
      if (k !== undefined && k.generation === j.generation && k.startedAt === j.startedAt)
        out.problems.push(`${h}: the journal the crash left outlived start-up recovery`)
    }
  } finally {
    // An agent that does not stop would act on the next state's disk: the checker reports it and ends.
    const ac = new AbortController()
    const stopped = await Promise.race([
      agent.kill().then(() => true),
      delay(120_000, false, { signal: ac.signal }).catch(() => false),
    ])
    ac.abort()
    if (!stopped) {
      out.problems.push(`the agent did not stop within 120 s:\n${agent.tail()}`)
      out.stuck = true
    }
  }
  out.problems.push(...onDisk(ctx, w, mode === 'nested' ? held : [], 'after recovery'))
  return out
}

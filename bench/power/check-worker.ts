// A checker of the power-loss explorer (design §3.5), run by explore.ts as
// `unshare --mount` with its own directory bound over the recorded
// sandbox's: the registry's rows name paths under the recorded data root,
// so each state is reached through that very path, a symlink to the state's
// tree in this namespace alone, and two checkers run side by side without
// seeing each other's. The parent sends {n, dir, mode} over IPC; the
// checker answers {n, result} (check.ts) and takes the next.
import fs from 'node:fs'
import type { Mode } from '../../src/domain/modes.js'
import { checkLinked, type AgentHow, type CheckContext, type CheckResult } from './check.js'

/** What the parent writes for its checkers, as JSON (the stray's bytes in base64). */
export interface WorkerSetup {
  world: CheckContext['world']
  held?: string
  stray?: { host: string; path: string; data: string }
  /** A copy of the deploy store under each intent. */
  deploy: Record<Mode, string>
  agent: AgentHow
}

export interface StateJob {
  n: number
  /** The state's tree (its data root), outside the sandbox. */
  dir: string
  mode: Mode
}

export interface JobDone {
  n: number
  result: CheckResult
}

async function main(setupFile: string): Promise<void> {
  const setup = JSON.parse(fs.readFileSync(setupFile, 'utf8')) as WorkerSetup
  const ctx: CheckContext = {
    world: setup.world,
    held: setup.held,
    stray: setup.stray === undefined ? undefined : { ...setup.stray, data: Buffer.from(setup.stray.data, 'base64') },
  }
  const sb = ctx.world.sb
  // This namespace's sandbox: the probe's verdict, as the recording had it; the rest per state.
  fs.writeFileSync(sb.probeFile, 'ready: true\n')
  const send = (m: JobDone): Promise<void> =>
    new Promise((resolve, reject) =>
      process.send?.(m, undefined, {}, (err) => (err === null ? resolve() : reject(err))),
    )
  process.on('message', (job: StateJob | 'done') => {
    if (job === 'done') {
      process.disconnect()
      return
    }
    void (async () => {
      fs.rmSync(sb.deployDir, { recursive: true, force: true })
      fs.cpSync(setup.deploy[job.mode], sb.deployDir, { recursive: true })
      fs.rmSync(sb.dataDir, { recursive: true, force: true })
      fs.symlinkSync(job.dir, sb.dataDir)
      let result: CheckResult
      try {
        result = await checkLinked(ctx, job.mode, setup.agent)
      } catch (err) {
        result = {
          problems: [`the check failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`],
          journal: false,
          wakeProbes: 0,
          readyMs: NaN,
        }
      } finally {
        fs.unlinkSync(sb.dataDir)
      }
      await send({ n: job.n, result })
      if (result.stuck === true) process.exit(1)
    })()
  })
  // Ready for the first job.
  await send({ n: -1, result: { problems: [], journal: false, wakeProbes: 0, readyMs: NaN } })
}

const setupFile = process.argv[2]
if (setupFile === undefined || process.send === undefined) {
  process.stderr.write('check-worker: run by explore.ts (an IPC channel and a setup file)\n')
  process.exitCode = 2
} else await main(setupFile)

// The isolation gate (`nestedOK`, design §5): nested instances may wake, and
// the pass may move a host nested, only while all three checks pass:
//
//   selfcheck  the agent can create, chmod and remove a nested tree under
//              D/nested without following a symlink;
//   mounts     every mount in CARLOS_NESTED_MOUNTS carries nosymfollow, so a
//              tenant's planted symlink is never followed by anyone;
//   probe      the isolation probe's verdict file says `ready: true`.
//
// The verdict is computed off the request path and cached: a wake or the
// status report reads it without I/O. The self-check and the mounts are
// re-evaluated before every leg run (they are cheap and a remount must be
// seen); the probe file is read at start and every CARLOS_PROBE_EVERY, as
// the probe itself runs on its own schedule.
import { errorMessage } from '../errors.js'
import { randomBytes } from 'node:crypto'
import fs from 'node:fs/promises'
import path from 'node:path'
import type { IsolationGate, Logger } from '../domain/ports.js'
import { setDirMode } from './fsutil.js'

export interface GateCheck {
  name: 'selfcheck' | 'mounts' | 'probe'
  ok: boolean
  detail: string
}

export interface IsolationConfig {
  dataDir: string
  nestedMounts: string[]
  mountinfo: string
  probeFile: string
  probeEveryMs: number
}

const NOT_YET_RUN = 'not yet run'

/** Decodes the octal escapes mountinfo uses for space, tab, newline and backslash. */
function unescapeMount(s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(parseInt(oct, 8)))
}

/**
 * The per-mount options of every mount point in a mountinfo text. A later
 * line for the same point is a mount on top of the earlier one, and wins.
 */
export function parseMountinfo(text: string): Map<string, string[]> {
  const mounts = new Map<string, string[]>()
  for (const line of text.split('\n')) {
    const fields = line.split(' ')
    const point = fields[4]
    const opts = fields[5]
    if (point === undefined || opts === undefined) continue
    mounts.set(unescapeMount(point), opts.split(','))
  }
  return mounts
}

/** Why the mounts do not isolate, or '' when every required one has nosymfollow. */
export function mountsVerdict(text: string, required: readonly string[]): string {
  const mounts = parseMountinfo(text)
  for (const want of required) {
    const opts = mounts.get(want)
    if (opts === undefined) return `${want} is not a mount point`
    if (!opts.includes('nosymfollow')) return `${want} is mounted without nosymfollow`
  }
  return ''
}

/** Why the probe's verdict is not ready, or '' when it says `ready: true`. */
export function probeVerdict(text: string): string {
  const ready = /^\s*ready:\s*(\S+)\s*$/m.exec(text)?.[1]
  if (ready === 'true') return ''
  const why = /^\s*reason:\s*(.+?)\s*$/m.exec(text)?.[1]
  if (ready === undefined) return 'the probe verdict has no `ready:` line'
  return `the probe says ready: ${ready}${why ? ` (${why})` : ''}`
}

export class Isolation implements IsolationGate {
  private checks: GateCheck[] = [
    { name: 'selfcheck', ok: false, detail: NOT_YET_RUN },
    { name: 'mounts', ok: false, detail: NOT_YET_RUN },
    { name: 'probe', ok: false, detail: NOT_YET_RUN },
  ]
  private timer: NodeJS.Timeout | undefined
  private stopped = false
  private running: Promise<void> | undefined

  constructor(
    private readonly cfg: IsolationConfig,
    private readonly logger: Logger,
    /** Called when the gate's answer changes: a serial move (design §5). */
    private readonly onChange: (verdict: string | null) => void = () => {},
  ) {}

  check(): string | null {
    const failed = this.checks.find((c) => !c.ok)
    return failed === undefined ? null : `${failed.name}: ${failed.detail}`
  }

  report(): GateCheck[] {
    return this.checks.map((c) => ({ ...c }))
  }

  /** Reads the probe now and then every probeEveryMs, each read scheduled after the last ends. */
  start(): void {
    const tick = () => {
      this.refresh({ probe: true })
        .catch((err: unknown) => this.logger.error({ err }, 'layout: isolation gate refresh failed'))
        .finally(() => {
          if (!this.stopped) this.timer = setTimeout(tick, this.cfg.probeEveryMs).unref()
        })
    }
    this.timer = setTimeout(tick, 0).unref()
  }

  stop(): void {
    // A tick in flight sees stopped and schedules no other.
    this.stopped = true
    clearTimeout(this.timer)
  }

  /** Re-evaluates the checks; one evaluation at a time, later callers share it. */
  async refresh(opts: { probe: boolean }): Promise<string | null> {
    while (this.running) await this.running
    this.running = this.evaluate(opts.probe)
    try {
      await this.running
    } finally {
      this.running = undefined
    }
    return this.check()
  }

  private async evaluate(readProbe: boolean): Promise<void> {
    const before = this.check()
    const self = await this.selfCheck()
    const mounts = await this.mounts()
    const probe = readProbe ? await this.probe() : this.checks[2]
    this.checks = [self, mounts, probe ?? { name: 'probe', ok: false, detail: NOT_YET_RUN }]
    const after = this.check()
    if (after !== before) {
      this.logger.info({ gate: after ?? 'open' }, after === null ? 'layout: isolation gate open' : `layout: isolation gate shut -> ${after}`)
      this.onChange(after)
    }
  }

  private async selfCheck(): Promise<GateCheck> {
    const nested = path.join(this.cfg.dataDir, 'nested')
    const probe = path.join(nested, `.selfcheck-${process.pid}-${randomBytes(4).toString('hex')}`)
    try {
      await fs.mkdir(nested, { recursive: true, mode: 0o755 })
      const st = await fs.lstat(nested)
      if (st.isSymbolicLink() || !st.isDirectory()) return fail('selfcheck', `${nested} is not a directory (a symlink is refused)`)
      await this.removeStaleProbes(nested)
      await fs.mkdir(probe, { mode: 0o750 })
      await fs.mkdir(path.join(probe, 'run'), { mode: 0o700 })
      await setDirMode(path.join(probe, 'run'), 0o2770)
      const run = await fs.lstat(path.join(probe, 'run'))
      if (!run.isDirectory() || (run.mode & 0o7777) !== 0o2770) {
        return fail('selfcheck', `chmod 2770 on ${path.join(probe, 'run')} did not hold (mode ${(run.mode & 0o7777).toString(8)})`)
      }
      return { name: 'selfcheck', ok: true, detail: 'ok' }
    } catch (err) {
      return fail('selfcheck', errorMessage(err))
    } finally {
      await fs.rm(probe, { recursive: true, force: true }).catch((err: unknown) => {
        this.logger.warn({ err, path: probe }, 'layout: isolation self-check could not remove its tree')
      })
    }
  }

  /**
   * A self-check killed half-way leaves its tree behind. Its name starts
   * with a dot, so it is never a host's; one agent runs per box, so any
   * such tree but the one being made now is a leftover.
   */
  private async removeStaleProbes(nested: string): Promise<void> {
    for (const name of await fs.readdir(nested)) {
      if (!name.startsWith('.selfcheck-')) continue
      await fs.rm(path.join(nested, name), { recursive: true, force: true })
    }
  }

  private async mounts(): Promise<GateCheck> {
    if (this.cfg.nestedMounts.length === 0) return { name: 'mounts', ok: true, detail: 'no mount required (CARLOS_NESTED_MOUNTS=none)' }
    let text: string
    try {
      text = await fs.readFile(this.cfg.mountinfo, 'utf8')
    } catch (err) {
      return fail('mounts', `cannot read ${this.cfg.mountinfo}: ${errorMessage(err)}`)
    }
    const why = mountsVerdict(text, this.cfg.nestedMounts)
    return why === '' ? { name: 'mounts', ok: true, detail: 'ok' } : fail('mounts', why)
  }

  private async probe(): Promise<GateCheck> {
    let text: string
    try {
      const fh = await fs.open(this.cfg.probeFile, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW)
      try {
        const { bytesRead, buffer } = await fh.read({ buffer: Buffer.alloc(64 * 1024) })
        text = buffer.toString('utf8', 0, bytesRead)
      } finally {
        await fh.close()
      }
    } catch (err) {
      return fail('probe', `cannot read ${this.cfg.probeFile}: ${errorMessage(err)}`)
    }
    const why = probeVerdict(text)
    return why === '' ? { name: 'probe', ok: true, detail: 'ok' } : fail('probe', why)
  }
}

function fail(name: GateCheck['name'], detail: string): GateCheck {
  return { name, ok: false, detail }
}

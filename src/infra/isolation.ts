// The isolation gate (`nestedOK`, design §5.4): nested instances may wake, and the pass may move a host nested, only
// while all three checks below pass.
//
//   selfcheck  a nested tree is made, chmodded and removed under D/nested, following no symlink;
//   mounts     D/apps and D/nested share a mount (for rename(2)); each CARLOS_NESTED_MOUNTS mount is nosymfollow;
//   probe      the probe's verdict file says `ready: true`.
//
// The verdict is cached, so a wake does no I/O; answers compare by name, pass and code only (design §5.4).
import { errorMessage } from '../errors.js'
import { randomBytes } from 'node:crypto'
import nodeFs from 'node:fs/promises'
import path from 'node:path'
import type { IsolationGate, Logger } from '../domain/ports.js'
import { fsyncDir, setDirMode } from './fsutil.js'
import { NESTED_ROOT_MODE, NESTED_RUN_MODE } from './pass/mover.js'

export interface GateCheck {
  name: 'selfcheck' | 'mounts' | 'probe'
  ok: boolean
  /** Stable; answers compare by it. */
  code: string
  /** Stable words for the code. */
  reason: string
  /** What varies: /ready?verbose and logs only. */
  detail: string
}

/** A test fails one (EACCES, which root never sees). */
export type SelfCheckFs = Pick<typeof nodeFs, 'mkdir' | 'lstat' | 'readdir' | 'rm'>

export interface IsolationConfig {
  dataDir: string
  nestedMounts: string[]
  mountinfo: string
  probeFile: string
  probeEveryMs: number
  selfCheckFs?: SelfCheckFs
}

const NOT_YET_RUN = 'not yet run'
const NOT_YET_RUN_CODE = 'not-yet-run'

function notYetRun(name: GateCheck['name']): GateCheck {
  return { name, ok: false, code: NOT_YET_RUN_CODE, reason: NOT_YET_RUN, detail: NOT_YET_RUN }
}

function passed(name: GateCheck['name'], detail: string): GateCheck {
  return { name, ok: true, code: 'ok', reason: 'ok', detail }
}

function fail(name: GateCheck['name'], code: string, reason: string, detail = reason): GateCheck {
  return { name, ok: false, code, reason, detail }
}

function errnoCode(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code
  return typeof code === 'string' && code !== '' ? code : 'error'
}

function verdictKey(checks: readonly GateCheck[]): string {
  return checks.map((c) => `${c.name}:${c.ok ? 'ok' : c.code}`).join(' ')
}

/** mountinfo's octal escapes. */
function unescapeMount(s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(parseInt(oct, 8)))
}

/** A later line for a point is mounted on top, and wins. */
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

function under(point: string, p: string): boolean {
  return point === '/' || p === point || p.startsWith(`${point}/`)
}

/** The mount id of real path p: the longest point holding it, its last line. */
export function mountIdOf(text: string, p: string): string | undefined {
  let best: { point: string; id: string } | undefined
  for (const line of text.split('\n')) {
    const fields = line.split(' ')
    const id = fields[0]
    const raw = fields[4]
    if (id === undefined || raw === undefined || id === '') continue
    const point = unescapeMount(raw)
    if (!under(point, p)) continue
    if (best === undefined || point.length >= best.point.length) best = { point, id }
  }
  return best?.id
}

/** p's real path, or its nearest existing ancestor's (the first flat move makes D/apps). */
async function nearestReal(p: string): Promise<string> {
  for (let at = p; ; at = path.dirname(at)) {
    try {
      return await nodeFs.realpath(at)
    } catch (err) {
      if (errnoCode(err) !== 'ENOENT' || path.dirname(at) === at) throw err
    }
  }
}

/** EXDEV: a bind mount keeps st_dev, so mount ids are compared too. */
export async function renameFailure(
  dataDir: string,
  mountinfo = '/proc/self/mountinfo',
): Promise<{ code: string; reason: string; detail: string } | undefined> {
  const apps = await nearestReal(path.join(dataDir, 'apps'))
  const nested = await nearestReal(path.join(dataDir, 'nested'))
  const [a, n] = await Promise.all([nodeFs.stat(apps), nodeFs.stat(nested)])
  const text = await nodeFs.readFile(mountinfo, 'utf8')
  const [ma, mn] = [mountIdOf(text, apps), mountIdOf(text, nested)]
  if (a.dev === n.dev && ma === mn) return undefined
  return {
    code: 'cross-mount',
    reason:
      `${path.join(dataDir, 'apps')} and ${path.join(dataDir, 'nested')} are on different mounts: ` +
      'rename(2) cannot move a tenant between them (EXDEV)',
    detail: `${apps}: st_dev ${a.dev}, mount ${ma ?? '?'}; ${nested}: st_dev ${n.dev}, mount ${mn ?? '?'}`,
  }
}

export function mountsFailure(text: string, required: readonly string[]): { code: string; reason: string } | undefined {
  const mounts = parseMountinfo(text)
  for (const want of required) {
    const opts = mounts.get(want)
    if (opts === undefined) return { code: 'not-a-mount', reason: `${want} is not a mount point` }
    if (!opts.includes('nosymfollow'))
      return { code: 'no-nosymfollow', reason: `${want} is mounted without nosymfollow` }
  }
  return undefined
}

export function probeFailure(text: string): { code: string; reason: string } | undefined {
  const ready = /^\s*ready:\s*(\S+)\s*$/m.exec(text)?.[1]
  if (ready === 'true') return undefined
  const why = /^\s*reason:\s*(.+?)\s*$/m.exec(text)?.[1]
  if (ready === undefined) return { code: 'probe-unreadable', reason: 'the probe verdict has no `ready:` line' }
  return { code: 'probe-not-ready', reason: `the probe says ready: ${ready}${why ? ` (${why})` : ''}` }
}

export class Isolation implements IsolationGate {
  private checks: GateCheck[] = [notYetRun('selfcheck'), notYetRun('mounts'), notYetRun('probe')]
  private timer: NodeJS.Timeout | undefined
  private stopped = false
  private running: Promise<void> | undefined
  /** D fsynced since D/nested was last seen made. */
  private nestedEntrySynced = false

  constructor(
    private readonly cfg: IsolationConfig,
    private readonly logger: Logger,
    /** A serial move (design §5). */
    private readonly onChange: (verdict: string | null) => void = () => {},
  ) {}

  /** null when all pass. */
  check(): string | null {
    const failed = this.checks.find((c) => !c.ok)
    return failed === undefined ? null : `${failed.name}: ${failed.reason}`
  }

  report(): GateCheck[] {
    return this.checks.map((c) => ({ ...c }))
  }

  /** `not yet run` is no verdict (design §5.4). */
  judged(): boolean {
    return this.checks.every((c) => c.code !== NOT_YET_RUN_CODE)
  }

  /** Each read scheduled after the last ends. */
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

  /** Later callers share the running evaluation. */
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
    const before = verdictKey(this.checks)
    const self = await this.selfCheck()
    const mounts = await this.mounts()
    const probe = readProbe ? await this.probe() : this.checks[2]
    this.checks = [self, mounts, probe ?? notYetRun('probe')]
    if (verdictKey(this.checks) === before) return
    const after = this.check()
    const failed = this.checks.filter((c) => !c.ok).map(({ name, code, detail }) => ({ name, code, detail }))
    this.logger.info(
      { gate: after ?? 'open', failed },
      after === null ? 'layout: isolation gate open' : `layout: isolation gate shut -> ${after}`,
    )
    this.onChange(after)
  }

  private async selfCheck(): Promise<GateCheck> {
    const fs = this.cfg.selfCheckFs ?? nodeFs
    const nested = path.join(this.cfg.dataDir, 'nested')
    const probe = path.join(nested, `.selfcheck-${process.pid}-${randomBytes(4).toString('hex')}`)
    try {
      // D/nested's entry must be durable before a tree is renamed under it (§3.5): fsynced when made, and once per
      // process, as a kill -9 may have left it in the page cache only.
      const made = (await fs.mkdir(nested, { recursive: true, mode: 0o755 })) !== undefined
      if (made || !this.nestedEntrySynced) {
        await fsyncDir(this.cfg.dataDir, 'nested-entry')
        this.nestedEntrySynced = true
      }
      const st = await fs.lstat(nested)
      if (st.isSymbolicLink() || !st.isDirectory())
        return fail('selfcheck', 'not-a-directory', `${nested} is not a directory (a symlink is refused)`)
      await this.removeStaleProbes(fs, nested)
      // The tree as the pass makes it (design §2).
      await fs.mkdir(probe, { mode: 0o700 })
      await setDirMode(probe, NESTED_ROOT_MODE)
      await fs.mkdir(path.join(probe, 'run'), { mode: 0o700 })
      await setDirMode(path.join(probe, 'run'), NESTED_RUN_MODE)
      for (const [dir, want] of [
        [probe, NESTED_ROOT_MODE],
        [path.join(probe, 'run'), NESTED_RUN_MODE],
      ] as const) {
        const st = await fs.lstat(dir)
        if (st.isDirectory() && (st.mode & 0o7777) === want) continue
        const [mode, asked] = [(st.mode & 0o7777).toString(8), want.toString(8)]
        return fail(
          'selfcheck',
          'mode-not-held',
          `chmod ${asked} on a tree under ${nested} did not hold (mode ${mode})`,
          `chmod ${asked} on ${dir} did not hold (mode ${mode})`,
        )
      }
      return passed('selfcheck', 'ok')
    } catch (err) {
      // The errno text names the new probe dir: detail, not verdict.
      const code = errnoCode(err)
      return fail(
        'selfcheck',
        code,
        `cannot create, chmod and remove a tree under ${nested} (${code})`,
        errorMessage(err),
      )
    } finally {
      await fs.rm(probe, { recursive: true, force: true }).catch((err: unknown) => {
        this.logger.warn({ err, path: probe }, 'layout: isolation self-check could not remove its tree')
      })
    }
  }

  /** Dot names are never hosts', and one agent runs per box. */
  private async removeStaleProbes(fs: SelfCheckFs, nested: string): Promise<void> {
    for (const name of await fs.readdir(nested)) {
      if (!name.startsWith('.selfcheck-')) continue
      await fs.rm(path.join(nested, name), { recursive: true, force: true })
    }
  }

  private async mounts(): Promise<GateCheck> {
    try {
      const cross = await renameFailure(this.cfg.dataDir)
      if (cross !== undefined) return fail('mounts', cross.code, cross.reason, cross.detail)
    } catch (err) {
      const code = errnoCode(err)
      return fail('mounts', code, `cannot tell the mounts of D/apps and D/nested apart (${code})`, errorMessage(err))
    }
    if (this.cfg.nestedMounts.length === 0) return passed('mounts', 'no mount required (CARLOS_NESTED_MOUNTS=none)')
    let text: string
    try {
      text = await nodeFs.readFile(this.cfg.mountinfo, 'utf8')
    } catch (err) {
      const code = errnoCode(err)
      return fail(
        'mounts',
        code,
        `cannot read ${this.cfg.mountinfo} (${code})`,
        `cannot read ${this.cfg.mountinfo}: ${errorMessage(err)}`,
      )
    }
    const why = mountsFailure(text, this.cfg.nestedMounts)
    return why === undefined ? passed('mounts', 'ok') : fail('mounts', why.code, why.reason)
  }

  private async probe(): Promise<GateCheck> {
    let text: string
    try {
      // O_NONBLOCK: a FIFO in the verdict's place must not hold the gate.
      const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK } = nodeFs.constants
      const fh = await nodeFs.open(this.cfg.probeFile, O_RDONLY | O_NOFOLLOW | O_NONBLOCK)
      try {
        if (!(await fh.stat()).isFile()) {
          return fail('probe', 'not-a-regular-file', `${this.cfg.probeFile} is not a regular file`)
        }
        const { bytesRead, buffer } = await fh.read({ buffer: Buffer.alloc(64 * 1024) })
        text = buffer.toString('utf8', 0, bytesRead)
      } finally {
        await fh.close()
      }
    } catch (err) {
      const code = errnoCode(err)
      return fail(
        'probe',
        code,
        `cannot read ${this.cfg.probeFile} (${code})`,
        `cannot read ${this.cfg.probeFile}: ${errorMessage(err)}`,
      )
    }
    const why = probeFailure(text)
    return why === undefined ? passed('probe', 'ok') : fail('probe', why.code, why.reason)
  }
}

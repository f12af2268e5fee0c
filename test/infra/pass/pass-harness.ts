// A real Pass on a temp data dir with a real Registry; only the outside
// things that are the subject of a test are fakes: the clock (grace, stop
// timeout), the activator's claims, the isolation gate.
import fs from 'node:fs'
import path from 'node:path'
import type { TestContext } from 'node:test'
import { FenceTable, type Claims } from '../../../src/domain/fence.js'
import type { Mode, Result } from '../../../src/domain/modes.js'
import { flatPaths, nestedPaths, type Dirs } from '../../../src/domain/paths.js'
import type { Logger } from '../../../src/domain/ports.js'
// The domain tests' fake clock: grace and the stop timeout are its subject here too.
import { FakeClock } from '../../domain/fakes.js'
import type { Route } from '../../../src/domain/schemas.js'
import { Pass, type PassDeps } from '../../../src/infra/pass/pass.js'
import { Registry } from '../../../src/infra/registry.js'
import { makeTenantTree } from '../../helpers/tenants.js'
import { tmpDir } from '../../helpers/tmp.js'

/**
 * The activator's claims. A stop either releases the claim at once
 * ('release') or hangs until its signal aborts ('hang'); `stopAsked`
 * resolves when the pass asks, so a test can act while it waits.
 */
export class FakeClaims implements Claims {
  readonly awake = new Set<string>()
  readonly stops: string[] = []
  behaviour: 'release' | 'hang' = 'release'
  #asked: Array<() => void> = []

  claimed(host: string): boolean {
    return this.awake.has(host)
  }

  stop(host: string, signal: AbortSignal): Promise<boolean> {
    this.stops.push(host)
    for (const f of this.#asked.splice(0)) f()
    if (this.behaviour === 'release') {
      this.awake.delete(host)
      return Promise.resolve(true)
    }
    return new Promise((resolve) => {
      if (signal.aborted) resolve(false)
      signal.addEventListener('abort', () => resolve(false), { once: true })
    })
  }

  stopAsked(): Promise<void> {
    return new Promise((resolve) => this.#asked.push(resolve))
  }
}

export interface LogLine {
  level: 'debug' | 'info' | 'warn' | 'error'
  msg: string
  fields: Record<string, unknown>
}

export function captureLogger(): Logger & { lines: LogLine[] } {
  const lines: LogLine[] = []
  return {
    lines,
    debug: (fields, msg) => lines.push({ level: 'debug', msg, fields }),
    info: (fields, msg) => lines.push({ level: 'info', msg, fields }),
    warn: (fields, msg) => lines.push({ level: 'warn', msg, fields }),
    error: (fields, msg) => lines.push({ level: 'error', msg, fields }),
  }
}

export interface Harness {
  dirs: Dirs
  reg: Registry
  fence: FenceTable
  claims: FakeClaims
  clock: FakeClock
  gate: { why: string | null; check(): string | null }
  logger: ReturnType<typeof captureLogger>
  steps: string[]
  pass: Pass
  /** A new Pass on the same files, registry, fence and fakes: what a restart would build. */
  newPass(extra?: Partial<PassDeps>): Pass
  /** Adds an activator-managed row at the flat paths and its tree; answers the row. */
  addFlat(host: string, seed?: number): Route
  addNested(host: string, seed?: number): Route
  converge(mode: Mode, opts?: { deferAwake?: boolean; signal?: AbortSignal }): Promise<Result[]>
}

export const GRACE_MS = 3_600_000

export async function harness(t: TestContext, extra: Partial<PassDeps> = {}): Promise<Harness> {
  const dataDir = await tmpDir(t, 'layoutd-pass-')
  const dirs: Dirs = { dataDir, runDir: path.join(dataDir, 'run') }
  fs.mkdirSync(dirs.runDir)
  const reg = Registry.open(dataDir)
  t.after(() => reg.close())
  const fence = new FenceTable()
  const claims = new FakeClaims()
  const clock = new FakeClock()
  const gate = {
    why: null as string | null,
    check(): string | null {
      return this.why
    },
  }
  const logger = captureLogger()
  const steps: string[] = []
  const deps = (): PassDeps => ({
    dirs,
    registry: reg,
    fence,
    claims,
    gate,
    logger,
    clock,
    graceMs: GRACE_MS,
    socketsGid: () => Promise.resolve(-1),
    failpoint: (s) => steps.push(s),
    ...extra,
  })
  const add = (host: string, mode: Mode, seed: number): Route => {
    const p = mode === 'flat' ? flatPaths(dirs, host) : nestedPaths(dirs, host)
    const { db } = makeTenantTree(p.dir, seed)
    const rt: Route = { host, kind: 'instance', hibernate: true, ...p, db }
    reg.add(rt)
    return rt
  }
  const h: Harness = {
    dirs,
    reg,
    fence,
    claims,
    clock,
    gate,
    logger,
    steps,
    pass: new Pass(deps()),
    newPass: (more = {}) => new Pass({ ...deps(), ...more }),
    addFlat: (host, seed = 1) => add(host, 'flat', seed),
    addNested: (host, seed = 1) => add(host, 'nested', seed),
    converge: (mode, opts = {}) =>
      h.pass.converge(mode, {
        deferAwake: opts.deferAwake ?? true,
        signal: opts.signal ?? new AbortController().signal,
      }),
  }
  return h
}

/** The outcome of each host, as a plain object for deepEqual. */
export function outcomes(results: readonly Result[]): Record<string, string> {
  return Object.fromEntries(results.map((r) => [r.host, r.outcome]))
}

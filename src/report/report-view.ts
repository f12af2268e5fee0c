// The report as the agent serves it (design §6): rows judged by the armed
// pass (or by <data>/layout before it), with the last run's withheld
// reasons. Cached per version (design §6.2), built in slices when asked.
import type { Phase } from '../agent-api.js'
import type { Config } from '../config.js'
import type { IntentState } from '../domain/intent-state.js'
import { defaultSlicer } from '../domain/loop-turns.js'
import type { Leg } from '../domain/leg.js'
import type { Result } from '../domain/modes.js'
import type { IsolationGate, LayoutDirectory, LayoutPass, RouteStore, RowsSnapshot } from '../domain/ports.js'
import { managedReportSteps, tallyOf, unmanagedLayoutReport, type RowTally, type TalliedReport } from './build.js'
import type { LayoutReport, LegRun, Route } from '../domain/schemas.js'
import { withheldBy, type RunReasons } from './withheld-reasons.js'

export type ReportPass = Pick<LayoutPass, 'classify' | 'held' | 'note' | 'facts' | 'changes'>

export interface ReportViewDeps {
  config: Config
  registry: Pick<RouteStore, 'snapshot'>
  layoutDir: LayoutDirectory
  state: IntentState
  gate: IsolationGate | null
}

/** The inputs a version stands for, numbered when first seen. */
interface Version {
  inputs: readonly unknown[]
  version: number
  tag: string
}

export interface Built {
  version: number
  tag: string
  report: LayoutReport
  /** Gathered as the rows were judged: nothing walks them again for a count. */
  tally: Readonly<RowTally>
}

/** Each input compares in constant time; equal inputs, equal report. */
function sameInputs(a: readonly unknown[], b: readonly unknown[]): boolean {
  if (a.length !== b.length) return false
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false
  return true
}

function sameSet(a: ReadonlySet<string>, b: ReadonlySet<string>): boolean {
  if (a.size !== b.size) return false
  for (const x of a) if (!b.has(x)) return false
  return true
}

export class ReportView {
  readonly #deps: ReportViewDeps
  /** A version of another process never matches one of this. */
  readonly #epoch = Date.now().toString(36)
  /** Numbered as seen, built only when asked. */
  #seen: Version | undefined
  #built: Built | undefined
  /** A reader of this version waits for it rather than build again. */
  #building: { version: number; done: Promise<Built> } | undefined
  #versions = 0
  /** Null until listed, when any row may be mid-move. */
  #onDisk: { journals: Set<string>; holds: Set<string> } | null = null
  /** The last finished run's withholding results, by host. */
  #withheld = new Map<string, Result>()
  /** Builds begun, whole or in slices. */
  #builds = 0

  constructor(deps: ReportViewDeps) {
    this.#deps = deps
  }

  async listLayoutDir(): Promise<void> {
    const { layoutDir } = this.#deps
    const [journals, holds] = await Promise.all([layoutDir.journalHosts(), layoutDir.holdHosts()])
    const listed = { journals: new Set(journals), holds: new Set(holds) }
    // An unchanged listing keeps its identity, so the version stays.
    const was = this.#onDisk
    if (was !== null && sameSet(was.journals, listed.journals) && sameSet(was.holds, listed.holds)) return
    this.#onDisk = listed
  }

  /** Its withheld results are the rows' reasons until the next run finishes. */
  noteFinishedRun(run: LegRun): void {
    this.#withheld = withheldBy(run)
  }

  /** The tag now, with nothing built. */
  tag(phase: Phase, pass: ReportPass | null, leg: Leg): string {
    return this.#version(phase, pass, leg).tag
  }

  get builds(): number {
    return this.#builds
  }

  report(phase: Phase, pass: ReportPass | null, leg: Leg): LayoutReport {
    return this.#current(phase, pass, leg).report
  }

  /** Rows by word, counted once per version. */
  counts(phase: Phase, pass: ReportPass | null, leg: Leg): Readonly<Record<string, number>> {
    return this.#current(phase, pass, leg).tally.counts
  }

  /** In slices, so no reader holds the activator; one build per version (design §6.2). */
  async reportSoon(phase: Phase, pass: ReportPass | null, leg: Leg): Promise<Built> {
    const seen = this.#version(phase, pass, leg)
    if (this.#built?.version === seen.version) return this.#built
    if (this.#building?.version === seen.version) return this.#building.done
    if (pass === null) return this.#current(phase, pass, leg)
    const done = this.#buildSoon(seen, pass, leg).finally(() => {
      if (this.#building?.done === done) this.#building = undefined
    })
    this.#building = { version: seen.version, done }
    return done
  }

  async #buildSoon(seen: Version, pass: ReportPass, leg: Leg): Promise<Built> {
    this.#builds++
    const { config, state, registry } = this.#deps
    const steps = managedReportSteps({
      box: config.box,
      routes: (seen.inputs[0] as RowsSnapshot).routes,
      rowsNow: () => registry.snapshot(),
      pass,
      state,
      leg: leg.state(),
      reasons: this.#reasons(),
    })
    for (;;) {
      const step = steps.next()
      if (step.done === true) return this.#keep(seen, step.value)
      await defaultSlicer.pause()
    }
  }

  #reasons(): RunReasons {
    return { last: this.#withheld, gate: this.#deps.gate?.check() ?? null }
  }

  #inputs(phase: Phase, pass: ReportPass | null, leg: Leg): unknown[] {
    const { registry, state, gate } = this.#deps
    return [
      registry.snapshot(),
      pass,
      pass?.changes(),
      state.version,
      gate?.check(),
      leg.stateKey(),
      phase,
      this.#withheld,
      this.#onDisk,
    ]
  }

  /** A new number when any input changed. */
  #version(phase: Phase, pass: ReportPass | null, leg: Leg): Version {
    const inputs = this.#inputs(phase, pass, leg)
    const seen = this.#seen
    if (seen !== undefined && sameInputs(seen.inputs, inputs)) return seen
    const version = ++this.#versions
    this.#seen = { inputs, version, tag: `${this.#epoch}.${version}` }
    return this.#seen
  }

  /** Built whole when its version has none yet. */
  #current(phase: Phase, pass: ReportPass | null, leg: Leg): Built {
    const seen = this.#version(phase, pass, leg)
    if (this.#built?.version === seen.version) return this.#built
    this.#builds++
    return this.#keep(seen, this.#build(phase, pass, leg, (seen.inputs[0] as RowsSnapshot).routes))
  }

  /** Kept unless one of a later version is kept already. */
  #keep(seen: Version, { report, tally }: TalliedReport): Built {
    const built: Built = { version: seen.version, tag: seen.tag, report, tally }
    if (this.#built === undefined || this.#built.version <= built.version) this.#built = built
    return built
  }

  #build(phase: Phase, pass: ReportPass | null, leg: Leg, routes: readonly Route[]): TalliedReport {
    const { config, state } = this.#deps
    if (pass === null) {
      // No pass, so no hold marker holds a host for it.
      const report = this.#unmanaged(phase, leg, routes)
      return { report, tally: tallyOf(report, () => false) }
    }
    const steps = managedReportSteps({
      box: config.box,
      routes,
      pass,
      state,
      leg: leg.state(),
      reasons: this.#reasons(),
    })
    for (;;) {
      const step = steps.next()
      if (step.done === true) return step.value
    }
  }

  /** Before the pass is armed: judged by `<data>/layout`. */
  #unmanaged(phase: Phase, leg: Leg, routes: readonly Route[]): LayoutReport {
    const { config, state } = this.#deps
    const onDisk = this.#onDisk
    const report = unmanagedLayoutReport({
      box: config.box,
      routes,
      dirs: config,
      journalHosts: onDisk?.journals ?? new Set(),
      holdHosts: onDisk?.holds ?? new Set(),
      leg: leg.state(),
      recovering: config.activator !== 'none',
    })
    if (onDisk === null) {
      // Before the listing (design §4.4 step 1) every row we might move reads fenced: any may be mid-move.
      for (const [host, r] of Object.entries(report.rows)) {
        if (r.layout === 'nested' || r.layout === 'flat')
          report.rows[host] = {
            ...r,
            layout: 'fenced',
            code: 'agent_starting',
            reason: `layoutd is ${phase}: <data>/layout not listed yet`,
          }
      }
    }
    if (config.activator === 'none') return report
    // Recovering: rows judged as unmanaged, under the intent seen so far.
    return {
      ...report,
      mode: state.lastIntent(),
      warnings: [`start-up recovery is running (${phase}): nothing may wake until it is done`, ...report.warnings],
    }
  }
}

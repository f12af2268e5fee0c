// One box of the simulated fleet: the agent's real rollout code on the
// model of etcd (its etcd store client with the watch, the lease and the
// label; RolloutAwareStore and the RolloutFollower; the intent poller; the
// box publisher building the summary from a report as the agent does), on
// a process clock the world can kill. Only the pass is a stand-in: it moves
// the box's rows toward the intent over passMs, leaving a row whose tenant
// is awake deferred for its grace (`awake_grace`) and a row that meets a
// hold held (`symlink_source`) until an operator clears it. The disk (rows,
// mode) outlives the process: a box that comes back finds it.
import { BoxPublisher } from '../../src/agent/box-publisher.js'
import { IntentPoller } from '../../src/agent/intent-poller.js'
import { RolloutAwareStore } from '../../src/agent/rollout-store.js'
import { loadLayoutIntent } from '../../src/domain/intent.js'
import type { DeployStore, Logger } from '../../src/domain/ports.js'
import { reportFigures } from '../../src/report/figures.js'
import { tallyOf } from '../../src/report/build.js'
import type { LayoutReport, RowReport } from '../../src/domain/schemas.js'
import type { RolloutPort } from '../../src/domain/rollout.js'
import type { EtcdRollouts } from '../../src/infra/deploy-etcd/rollout.js'
import { EtcdDeployStore } from '../../src/infra/deploy-etcd/store.js'
import type { Metrics } from '../../src/metrics/metrics.js'
import { type EtcdModel, type NetFaults, SimGateway } from './etcd-model.js'
import { ProcessClock, type Rng, type Scheduler, SIM_EPOCH } from './scheduler.js'

export interface SimRow {
  host: string
  layout: 'flat' | 'nested'
  /** The tenant is awake until then (virtual ms); 0: asleep. */
  awakeUntil: number
  /** A move to nested meets a hold (a symlinked source): the row is held, not moved. */
  holdOnMove: boolean
  /** Held down by a hold marker until an operator clears it. */
  held: boolean
  /** What the last pass said of the row: '', awake_grace, symlink_source. */
  code: '' | 'awake_grace' | 'symlink_source'
}

/** What outlives the agent's process: the rows and the mode the box last converged to. */
export interface BoxDisk {
  box: string
  rows: SimRow[]
  mode: 'flat' | 'nested' | 'none'
}

/** One run of the stand-in pass, as the world's invariants see it. */
export interface PassEvent {
  kind: 'start' | 'end'
  box: string
  intent: string
  mode: 'flat' | 'nested'
  at: number
  /** At the end: rows left deferred (awake), held. */
  deferred: number
  held: number
}

export interface SimAgentOptions {
  s: Scheduler
  model: EtcdModel
  disk: BoxDisk
  rng: Rng
  net: () => NetFaults
  prefix: string
  ttlMs: number
  /** How many times this box has started: its pid, in effect. */
  life: number
  onPass: (e: PassEvent) => void
  trace: ((line: string) => void) | undefined
  /** A protocol broken on purpose, to show the invariants catch it (the simulation's own tests). */
  sabotage?: Sabotage
}

/**
 * lanes: a box starts without waiting for the box before it in its lane to
 * be done; waves: every box of the open wave reads as done with no failed row.
 */
export type Sabotage = 'lanes' | 'waves'

/** The rollouts' port with one rule broken. */
function sabotaged(port: RolloutPort, how: Sabotage): RolloutPort {
  return new Proxy(port, {
    get(target, key) {
      if (how === 'lanes' && key === 'hasFinished') return () => Promise.resolve(true)
      if (how === 'waves' && key === 'doneCount')
        return (id: string, wave: number, signal: AbortSignal) =>
          target.get(id, signal).then((s) => s?.record.waves[wave]?.length ?? 0)
      if (how === 'waves' && key === 'progress')
        return async (id: string, wave: number | undefined, signal: AbortSignal) => {
          const s = await target.get(id, signal)
          const boxes = wave === undefined ? (s?.record.waves.flat() ?? []) : (s?.record.waves[wave] ?? [])
          return new Map(boxes.map((b) => [b, { done: true, failedRows: 0 }]))
        }
      const v: unknown = Reflect.get(target, key)
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v
    },
  })
}

const quiet: Logger = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined }
const noMetrics = { intentRead: () => undefined } as unknown as Metrics

export class SimAgent {
  readonly clock: ProcessClock
  readonly store: EtcdDeployStore
  readonly reads: DeployStore
  readonly #o: SimAgentOptions
  readonly #life = new AbortController()
  readonly #gateway: SimGateway
  readonly #publisher: BoxPublisher
  #running = false
  #pending = false
  #retry: (() => void) | undefined
  #failures = 0
  #changes = 0
  #lastRunAt = SIM_EPOCH
  /** The last run could not read the intent. */
  #unreadable = false
  #retryAt: number | undefined
  /** Runs started; a waiter is answered by the first run started after it asked. */
  #runs = 0
  readonly #waiters: Array<{ after: number; resolve: (at: string | null) => void }> = []

  constructor(o: SimAgentOptions) {
    this.#o = o
    const name = `${o.disk.box}#${o.life}`
    this.clock = new ProcessClock(o.s, name)
    const gateway = new SimGateway(o.model, this.clock, o.rng.fork(), o.net, o.disk.box)
    this.#gateway = gateway
    if (o.trace !== undefined) gateway.trace = (line) => o.trace?.(`  ${name} → ${line}`)
    const jitter = o.rng.fork()
    this.store = new EtcdDeployStore([], {
      gateway,
      prefix: o.prefix,
      clock: this.clock,
      random: () => jitter.next(),
      logger: quiet,
      boxTtlMs: o.ttlMs,
    })
    const sabotage = o.sabotage
    if (sabotage !== undefined) {
      const port = sabotaged(this.store.rollouts(), sabotage)
      this.store.rollouts = () => port as EtcdRollouts
    }
    // As the agent does: an operator's retry runs the leg again.
    this.reads = RolloutAwareStore.around(this.store, {
      box: o.disk.box,
      clock: this.clock,
      logger: quiet,
      kickLeg: () => this.runAgain(),
    })
    this.#publisher = new BoxPublisher({
      config: { activatorUrl: '' },
      store: this.reads,
      logger: quiet,
      clock: this.clock,
      figures: (ask) => {
        const report = this.#report()
        const tally = tallyOf(report, (h) => this.#held(h))
        return Promise.resolve(reportFigures({ tag: String(this.#changes), report, tally }, ask))
      },
      tag: () => String(this.#changes),
      legBusy: () => ({ running: this.#running, pending: this.#pending }),
      version: () => Promise.resolve('sim'),
      signal: this.#life.signal,
    })
  }

  get box(): string {
    return this.#o.disk.box
  }

  get dead(): boolean {
    return this.clock.dead
  }

  /** As the agent starts: the label, the first read of the intent, then the leg and the watch. */
  start(): void {
    const { disk, life } = this.#o
    const holder = { box: disk.box, dataRoot: `/srv/${disk.box}`, pid: 1000 + life, host: disk.box, since: 'sim' }
    void this.store
      .claimLabel(holder, AbortSignal.timeout(30_000))
      .catch(() => undefined)
      .then(() => {
        const poller = new IntentPoller({
          store: this.reads,
          box: disk.box,
          // The agent's default (CARLOS_LAYOUT_POLL): a read that failed leaves the summary naming no intent until the next.
          pollMs: 5_000,
          clock: this.clock,
          logger: quiet,
          metrics: noMetrics,
          signal: this.#life.signal,
          kickLeg: () => this.kick(),
          onRead: (intent) => this.#publisher.noteIntent(intent),
        })
        return poller.start()
      })
  }

  /** kill -9: no timer of the process runs again, no request of it is answered or applied. */
  kill(): void {
    this.clock.kill()
  }

  /**
   * The run is over: killed, then its life and its store's gateway aborted.
   * Node keeps a signal of AbortSignal.any() that has listeners alive until
   * it aborts, so one left pending would hold its whole world, seed after
   * seed. Its clock is dead first, so nothing the aborts wake reaches etcd.
   */
  release(): void {
    this.kill()
    this.#life.abort()
    void this.#gateway.close()
  }

  /** Something changed on the box (a tenant slept, a hold was cleared and `converge` run): the leg runs. */
  kick(): void {
    if (this.clock.dead) return
    if (this.#running) {
      this.#pending = true
      return
    }
    this.#running = true
    const n = ++this.#runs
    let ended: string | null = null
    this.#changed()
    void this.#run()
      .then(
        () => {
          this.#failures = 0
          ended = new Date(this.#lastRunAt).toISOString()
        },
        () => {
          // The intent could not be read: the report says unreadable, and the leg backs off and tries
          // again (1 s to 30 s, jittered), as the agent's leg does (domain/leg-run.ts).
          this.#unreadable = true
          this.#failures++
          const cap = Math.min(30_000, 1_000 * 2 ** Math.min(this.#failures - 1, 5))
          this.#retryIn(cap / 2 + (this.#o.rng.next() * cap) / 2)
        },
      )
      .finally(() => {
        this.#running = false
        this.#changed()
        for (const w of this.#waiters.filter((x) => x.after < n)) {
          this.#waiters.splice(this.#waiters.indexOf(w), 1)
          w.resolve(ended)
        }
        if (this.#pending) {
          this.#pending = false
          this.kick()
        }
      })
  }

  /** As the agent's runAgain: the leg runs, and the end of the first run started after this is told. */
  runAgain(): Promise<string | null> {
    const after = this.#runs
    const ended = new Promise<string | null>((resolve) => this.#waiters.push({ after, resolve }))
    this.kick()
    return ended
  }

  #retryIn(ms: number): void {
    this.#retry?.()
    this.#retryAt = this.clock.now() + ms
    this.#retry = this.clock.setTimer(
      ms,
      () => {
        this.#retryAt = undefined
        this.kick()
      },
      'leg retry',
    )
  }

  #changed(): void {
    this.#changes++
    this.#publisher.update()
  }

  #held(host: string): boolean {
    return this.#o.disk.rows.some((r) => r.host === host && r.held)
  }

  async #run(): Promise<void> {
    const { disk, onPass } = this.#o
    const read = await loadLayoutIntent(this.reads, disk.box, this.#life.signal)
    if (!read.found) return
    this.#unreadable = false
    const { id, mode } = read.intent
    if (mode !== 'flat' && mode !== 'nested') return
    const at = () => this.clock.now()
    onPass({ kind: 'start', box: disk.box, intent: id, mode, at: at(), deferred: 0, held: 0 })
    const toMove = disk.rows.filter((r) => r.layout !== mode && !r.held)
    if (toMove.length > 0) {
      const passMs = this.#o.rng.int(200, 4_000)
      await new Promise<void>((resolve) => this.clock.setTimer(passMs, resolve, 'pass ends'))
    }
    for (const r of disk.rows) {
      if (r.layout === mode && !r.held) r.code = ''
      if (r.layout === mode || r.held) continue
      if (r.awakeUntil > at()) r.code = 'awake_grace'
      else if (r.holdOnMove && mode === 'nested') {
        r.held = true
        r.code = 'symlink_source'
      } else {
        r.layout = mode
        r.code = ''
      }
    }
    disk.mode = mode
    this.#lastRunAt = at()
    const deferred = disk.rows.filter((r) => r.code === 'awake_grace').length
    const held = disk.rows.filter((r) => r.held).length
    onPass({ kind: 'end', box: disk.box, intent: id, mode, at: at(), deferred, held })
    // A deferred row is tried again when its grace ends.
    const graceEnd = Math.min(...disk.rows.filter((r) => r.code === 'awake_grace').map((r) => r.awakeUntil))
    if (Number.isFinite(graceEnd)) this.#retryIn(graceEnd - at() + 1)
  }

  #report(): LayoutReport {
    const { disk } = this.#o
    const rows: Record<string, RowReport> = {}
    for (const r of disk.rows)
      rows[r.host] = r.held
        ? { layout: 'fenced', code: 'symlink_source', reason: 'held', note: '' }
        : { layout: r.layout, code: r.code, reason: '', note: '' }
    const iso = (ms: number) => new Date(ms).toISOString()
    return {
      box: disk.box,
      mode: this.#unreadable ? 'unreadable' : disk.mode,
      default: false,
      defaultBlocked: '',
      rows,
      leg: {
        running: this.#running,
        pending: this.#pending,
        lastRun: { startedAt: iso(this.#lastRunAt), finishedAt: iso(this.#lastRunAt), results: [] },
        retryAt: this.#retryAt === undefined ? null : iso(this.#retryAt),
      },
      warnings: [],
    }
  }
}

// One seed of the rollout simulation: a fleet of SimAgents on the model of
// etcd, an operator who records a rollout with the real CLI code (`fleet
// rollout migrate`, manual gates among its waves) and pauses, resumes,
// retries a box, skips a box, promotes or aborts it, and the faults the
// seed draws until a moment it fixes them all: tenants awake through their
// grace, rows held, boxes killed and started again, requests refused, late
// or answered never, watches dropped. After the fix the operator resumes a
// paused rollout once (and promotes at each gate), and it must end done
// within a bound. The protocol's invariants are checked on every change etcd
// makes and after every step.
import { fleetCommand, readFleet } from '../../src/cli/commands/fleet.js'
import { loadConfig, type Config } from '../../src/config.js'
import { isSkipped, placeOf, RolloutEvent, RolloutRecord } from '../../src/domain/rollout.js'
import { Value } from '../../src/domain/typebox.js'
import { EtcdDeployStore, INTENT_PREFIX } from '../../src/infra/deploy-etcd/store.js'
import { EtcdModel, type ModelEvent, type NetFaults, QUIET_NET, SimGateway } from './etcd-model.js'
import { ProcessClock, type Rng, Scheduler, SIM_EPOCH, virtualTimeouts } from './scheduler.js'
import { type BoxDisk, type PassEvent, type Sabotage, SimAgent } from './sim-agent.js'

/** The properties a run checks; a violation names one. */
export const PROPERTIES = {
  'wave-opened-early': 'a wave opened before every box of the wave before it was done, and no promote opened it',
  'box-started-twice': "a box's start in a rollout was written twice",
  'started-outside-open-wave': 'a box started while its wave was not open or the rollout not running',
  'over-max-parallel': 'more than maxParallel live boxes of a wave moved at once',
  'awake-fails-wave': 'a wave failed on rows deferred for their grace (awake tenants) alone',
  'stale-verdict':
    'a wave failed on a record frozen at a box’s finish: its rows as they are now are within the threshold',
  'fixed-rollout-not-done': 'every fault was fixed and the rollout resumed, and it did not end done within the bound',
  'box-dropped-from-view': 'a box that published a summary is missing from the fleet view (fleet status)',
  'event-not-in-history':
    'a change of a rollout record has no event under rollouts/events/<id>/ (or `fleet rollout history` lacks it)',
} as const
export type Property = keyof typeof PROPERTIES

export interface Violation {
  property: Property
  step: number
  atMs: number
  detail: string
}

export interface SimOptions {
  seed: number
  boxes: number
  /** Told each step, each request and each change of etcd (the replay). */
  trace?: (line: string) => void
  /** Every agent runs with this rule of the protocol broken (the simulation's own tests). */
  sabotage?: Sabotage
}

export interface SimResult {
  seed: number
  boxes: number
  steps: number
  virtualMs: number
  /** How the rollout ended: done, paused, aborted, … or not-recorded. */
  outcome: string
  violations: Violation[]
  /** What the seed drew: awake rows, held rows, kills, operator acts. */
  drawn: Record<string, number>
}

/** After the fix, the operator resumes a paused rollout this much later (the boxes settle). */
const SETTLE_MS = 20_000
/** A rollout whose faults were fixed and which was resumed ends done within this. */
const DONE_BOUND_MS = 5 * 60_000
const TTL_MS = 15_000
const MAX_STEPS = 400_000

let config: Config | undefined

class World {
  readonly s: Scheduler
  readonly model: EtcdModel
  readonly rng: Rng
  readonly o: SimOptions
  readonly disks: BoxDisk[] = []
  readonly agents = new Map<string, SimAgent>()
  /** Every agent the run started, the killed ones too: each is let go at the end (SimAgent.release). */
  readonly everyAgent: SimAgent[] = []
  readonly lives = new Map<string, number>()
  readonly violations: Violation[] = []
  readonly drawn: Record<string, number> = {
    awake: 0,
    held: 0,
    kills: 0,
    pauses: 0,
    aborts: 0,
    retries: 0,
    skips: 0,
    promotes: 0,
    gates: 0,
    noisyNet: 0,
  }
  net: NetFaults = QUIET_NET
  fixAt = 0
  fixed = false
  /** The rollout the operator recorded, and what the invariants keep of it. */
  rolloutId: string | undefined
  readonly records = new Map<string, RolloutRecord>()
  readonly started = new Map<string, number>()
  /** Boxes whose first pass on the rollout's intent ended. */
  readonly firstPassEnded = new Set<string>()
  /** Each box's deferred and held rows when its end was written. */
  readonly atDone = new Map<string, { deferred: number; held: number }>()
  readonly published = new Set<string>()
  operatorActs = 0
  resumedAfterFix = false
  /** Each change of a record seen (id, revision), with the key its event must have; checked after the step. */
  readonly recordChanges: Array<{ id: string; rev: number; eventKey: string }> = []
  #eventsDue = 0
  /** The revision each record was last changed at: the next change's event is keyed by it. */
  readonly #recordRev = new Map<string, number>()
  viewDue = false
  /** A start, a pass's end, a kill or a boot since the last count of the boxes moving. */
  movingDue = false
  readonly #said = new Set<string>()
  readonly ops: EtcdDeployStore
  readonly observer: EtcdDeployStore

  constructor(o: SimOptions) {
    this.o = o
    this.s = new Scheduler(o.seed)
    this.s.trace = o.trace
    this.rng = this.s.rng
    this.model = new EtcdModel(this.s)
    this.model.observers.push((events) => this.#onEtcd(events))
    const opClock = new ProcessClock(this.s, 'operator')
    const opGateway = new SimGateway(this.model, opClock, this.rng.fork(), () => this.net, 'operator')
    this.ops = new EtcdDeployStore([], { gateway: opGateway, clock: opClock, random: () => 0.5 })
    const obsClock = new ProcessClock(this.s, 'observer')
    const obsGateway = new SimGateway(this.model, obsClock, this.rng.fork(), () => QUIET_NET, 'observer')
    this.observer = new EtcdDeployStore([], { gateway: obsGateway, clock: obsClock, random: () => 0.5 })
  }

  violate(property: Property, detail: string): void {
    const key = `${property}:${detail}`
    if (this.#said.has(key)) return
    this.#said.add(key)
    this.violations.push({ property, step: this.s.steps, atMs: this.s.now - SIM_EPOCH, detail })
    this.o.trace?.(`  VIOLATION ${property}: ${detail}`)
  }

  at(ms: number, fn: () => void, label: string): void {
    this.s.setTimer(ms - (this.s.now - SIM_EPOCH), fn, label)
  }

  /** The seed's fleet, faults and operator, as timers. */
  draw(): void {
    const { rng } = this
    this.fixAt = rng.int(45, 90) * 1000
    if (rng.chance(0.5)) {
      this.net = { fail: 0.02, lost: 0.01, late: 0.1, lateMs: 2_000, watchDrop: 0.02 }
      this.drawn.noisyNet = 1
    }
    for (let i = 0; i < this.o.boxes; i++) {
      const box = `box${String(i).padStart(4, '0')}`
      const rows = Array.from({ length: rng.int(2, 6) }, (_, j) => ({
        host: `t${j}.${box}`,
        layout: 'flat' as const,
        awakeUntil: 0,
        holdOnMove: rng.chance(0.04),
        held: false,
        code: '' as const,
      }))
      this.drawn.held = (this.drawn.held ?? 0) + rows.filter((r) => r.holdOnMove).length
      const disk: BoxDisk = { box, rows, mode: 'none' }
      this.disks.push(disk)
      this.at(rng.int(0, 2_000), () => this.boot(disk), `${box} boots`)
      for (const row of rows)
        if (rng.chance(0.08)) {
          this.drawn.awake = (this.drawn.awake ?? 0) + 1
          const wake = rng.int(0, 40_000)
          const grace = rng.int(10, 90) * 1000
          this.at(wake, () => (row.awakeUntil = this.s.now + grace), `${row.host} wakes`)
          if (rng.chance(0.5)) this.at(wake + rng.int(1, grace / 1000) * 1000, () => this.sleep(disk, row), 'sleeps')
        }
      if (rng.chance(0.1)) {
        this.drawn.kills = (this.drawn.kills ?? 0) + 1
        const kill = rng.int(5_000, 40_000)
        this.at(kill, () => this.kill(box), `${box} killed`)
        const back = kill + rng.int(5, 60) * 1000
        if (back < this.fixAt) this.at(back, () => this.boot(disk), `${box} back`)
      }
    }
    this.at(rng.int(3_000, 5_000), () => this.recordRollout(0), 'operator records a rollout')
    if (rng.chance(0.2)) {
      this.drawn.pauses = 1
      const p = rng.int(6_000, 40_000)
      this.at(p, () => this.operator('pause'), 'operator pauses')
      const r = p + rng.int(5, 30) * 1000
      if (r < this.fixAt) this.at(r, () => this.operator('resume'), 'operator resumes')
    }
    if (rng.chance(0.03)) {
      this.drawn.aborts = 1
      this.at(rng.int(6_000, 40_000), () => this.operator('abort'), 'operator aborts')
    }
    this.#drawBoxActs()
    this.at(this.fixAt, () => this.fix(), 'every fault is fixed')
    for (let t = this.fixAt + SETTLE_MS; t <= this.fixAt + SETTLE_MS + DONE_BOUND_MS; t += 10_000)
      this.at(t, () => this.resumeIfPaused(), 'operator looks')
  }

  /** The operator's acts on one box or one wave: retry a box, skip a box (with why), promote the next wave. */
  #drawBoxActs(): void {
    const { rng } = this
    const box = () => this.disks[rng.int(0, this.disks.length - 1)]?.box ?? ''
    if (rng.chance(0.15)) {
      this.drawn.retries = 1
      const b = box()
      this.at(rng.int(6_000, 60_000), () => this.operator('retry', 0, b), `operator retries ${b}`)
    }
    if (rng.chance(0.08)) {
      this.drawn.skips = 1
      const b = box()
      this.at(rng.int(6_000, 60_000), () => this.operator('skip', 0, b), `operator skips ${b}`)
    }
    if (rng.chance(0.08)) {
      this.drawn.promotes = 1
      this.at(rng.int(6_000, 60_000), () => this.operator('promote'), 'operator promotes')
    }
  }

  boot(disk: BoxDisk): void {
    const old = this.agents.get(disk.box)
    if (old !== undefined && !old.dead) return
    const life = (this.lives.get(disk.box) ?? 0) + 1
    this.lives.set(disk.box, life)
    const agent = new SimAgent({
      s: this.s,
      model: this.model,
      disk,
      rng: this.rng.fork(),
      net: () => this.net,
      prefix: INTENT_PREFIX,
      ttlMs: TTL_MS,
      life,
      onPass: (e) => this.#onPass(e),
      trace: this.o.trace,
      sabotage: this.o.sabotage,
    })
    this.agents.set(disk.box, agent)
    this.everyAgent.push(agent)
    this.movingDue = true
    agent.start()
  }

  kill(box: string): void {
    this.agents.get(box)?.kill()
  }

  sleep(disk: BoxDisk, row: { awakeUntil: number }): void {
    row.awakeUntil = 0
    // The tenant's claim is released: the box looks at its deferred rows again.
    this.agents.get(disk.box)?.kick()
  }

  fix(): void {
    this.fixed = true
    this.net = QUIET_NET
    for (const disk of this.disks) {
      for (const r of disk.rows) {
        r.awakeUntil = 0
        r.holdOnMove = false
        r.held = false
      }
      const a = this.agents.get(disk.box)
      // A dead box is started again; a live one is told to converge (`layoutd converge`).
      if (a === undefined || a.dead) this.boot(disk)
      else a.kick()
    }
  }

  #io(): Parameters<typeof fleetCommand>[1] {
    config ??= loadConfig({ CARLOS_BOX: 'ops', CARLOS_DEPLOYMENT_ETCD: 'http://etcd.sim:2379' })
    const sink = { write: () => true } as unknown as NodeJS.WritableStream
    return {
      config,
      store: this.ops,
      stdout: sink,
      stderr: sink,
      at: () => new Date(this.s.now),
      by: 'op@sim',
      idSuffix: () =>
        Math.floor(this.rng.next() * 0xffffff)
          .toString(16)
          .padStart(6, '0'),
    } as Parameters<typeof fleetCommand>[1]
  }

  recordRollout(attempt: number): void {
    const { rng } = this
    const waves = rng.pick(['1,100%', '1,50%,100%', '2,60%,100%', '50%,100%', '1,pause,100%', '1,50%,pause,100%'])
    if (waves.includes('pause')) this.drawn.gates = 1
    const argv = ['rollout', 'migrate', '--waves', waves]
    if (rng.chance(0.7)) argv.push('--max-parallel', String(rng.int(1, 3)))
    argv.push('--max-failed-rows', rng.chance(0.8) ? '0' : '1')
    argv.push('--progress-deadline', rng.pick(['2m', '10m']), '-m', `seed ${this.o.seed}`)
    void fleetCommand(argv, this.#io()).then((code) => {
      if (code === 0) return
      if (attempt < 10) this.at(this.s.now - SIM_EPOCH + 2_000, () => this.recordRollout(attempt + 1), 'record again')
    })
  }

  operator(action: OperatorAct, attempt = 0, box?: string): void {
    if (this.rolloutId === undefined) return
    this.operatorActs++
    const argv = ['rollout', action, ...(box === undefined ? [] : [box]), '-m', `sim ${action}`]
    void fleetCommand(argv, this.#io()).then((code) => {
      this.operatorActs--
      // A refusal (not running, not paused) stands; a pause, resume or abort the network lost is tried again.
      // A retry, skip or promote is not: its refusal (a box not started, the last wave) is part of the draw.
      const r = this.records.get(this.rolloutId ?? '')
      if (code === 0 || r === undefined || attempt >= 5 || landed(action, r)) return
      this.at(this.s.now - SIM_EPOCH + 2_000, () => this.operator(action, attempt + 1, box), `operator ${action} again`)
    })
  }

  resumeIfPaused(): void {
    const r = this.records.get(this.rolloutId ?? '')
    if (r?.state === 'waiting') this.operator('promote')
    if (r?.state !== 'paused' || this.resumedAfterFix) return
    this.resumedAfterFix = true
    this.operator('resume')
  }

  #onPass(e: PassEvent): void {
    const id = this.rolloutId
    if (id === undefined || e.intent !== id || e.kind !== 'end') return
    if (this.started.has(`${id}/${e.box}`)) this.firstPassEnded.add(e.box)
    this.movingDue = true
  }

  /** Every change etcd makes, checked as it lands. */
  #onEtcd(events: readonly ModelEvent[]): void {
    const root = '/carlos/layout/rollouts/'
    for (const e of events) {
      this.o.trace?.(`    etcd rev ${e.rev} ${e.type} ${e.key}${e.type === 'PUT' ? ` v${e.version} ${said(e)}` : ''}`)
      if (e.key.startsWith('/carlos/layout/boxes/')) {
        const box = e.key.slice('/carlos/layout/boxes/'.length)
        if (e.type === 'PUT') this.published.add(box)
        else this.viewDue = true
      } else if (e.type === 'PUT' && e.key.startsWith(`${root}record/`)) {
        const id = e.key.slice(`${root}record/`.length)
        const since = e.version === 1 ? 0 : (this.#recordRev.get(id) ?? -1)
        this.#recordRev.set(id, e.rev)
        this.recordChanges.push({ id, rev: e.rev, eventKey: `${root}events/${id}/${String(since).padStart(20, '0')}` })
        this.#eventsDue++
        this.#onRecord(JSON.parse(e.value), events, since)
      } else if (e.type === 'PUT' && e.key.startsWith(`${root}started/`)) this.#onStarted(e)
      else if (e.type === 'PUT' && e.key.startsWith(`${root}done/`)) {
        const box = e.key.split('/').at(-1) ?? ''
        const disk = this.disks.find((d) => d.box === box)
        const rows = disk?.rows ?? []
        this.atDone.set(box, {
          deferred: rows.filter((r) => r.code === 'awake_grace').length,
          held: rows.filter((r) => r.held).length,
        })
      }
    }
  }

  #onStarted(e: ModelEvent): void {
    const [id = '', wave = '', box = ''] = e.key.split('/').slice(-3)
    const key = `${id}/${box}`
    if (e.version !== 1 || this.started.has(key)) this.violate('box-started-twice', `${box} in rollout ${id}`)
    this.started.set(key, Number(wave))
    this.movingDue = true
    const r = this.records.get(id)
    const place = r === undefined ? undefined : placeOf(r, box)
    if (r === undefined || r.state !== 'running' || place === undefined || place.wave > r.wave || place.wave !== +wave)
      this.violate('started-outside-open-wave', `${box} started in wave ${Number(wave) + 1} of ${id} (${r?.state})`)
  }

  #onRecord(value: unknown, txn: readonly ModelEvent[], since: number): void {
    if (!Value.Check(RolloutRecord, value)) return
    const r = value
    const prev = this.records.get(r.id)
    this.records.set(r.id, r)
    if (prev === undefined) {
      this.rolloutId = r.id
      return
    }
    // The event written with this change: a promote opens the next wave whatever the one before did.
    const event = txn.find((e) => e.type === 'PUT' && e.key.startsWith(`/carlos/layout/rollouts/events/${r.id}/`))
    const promoted = event !== undefined && (JSON.parse(event.value) as RolloutEvent).kind === 'promoted'
    if (r.state === 'waiting' && prev.state !== 'waiting' && !this.fixed)
      this.at(this.s.now - SIM_EPOCH + this.rng.int(1, 10) * 1000, () => this.operator('promote'), 'operator promotes')
    for (let w = prev.wave; w < r.wave && !(promoted && w === r.wave - 1); w++) {
      // A skipped box is out of the verdict; a box asked to retry is done once its progress answers it.
      const notDone = (prev.waves[w] ?? []).filter((b) => !isSkipped(prev, b) && !this.#done(prev, w, b))
      if (notDone.length > 0)
        this.violate('wave-opened-early', `wave ${w + 2} of ${r.id} opened; ${notDone.join(', ')} not done`)
    }
    // A wave failed by an agent (its cause says so); an operator's pause or a deadline is no verdict.
    if (prev.state === 'running' && (r.cause === 'failed_rows' || r.cause === 'box_gone'))
      this.#judgeFailure(prev, since)
  }

  #done(r: RolloutRecord, wave: number, box: string): boolean {
    const kept = this.model.get(this.#doneKey(r.id, wave, box))
    if (kept === undefined) return false
    const asked = r.retries?.[box] ?? 0
    return asked <= ((JSON.parse(kept.value) as { retried?: number }).retried ?? 0)
  }

  #doneKey(id: string, wave: number, box: string): string {
    return `/carlos/layout/rollouts/done/${id}/${wave}/${box}`
  }

  /**
   * A wave was failed by an agent: it must have a real fault (a box that left
   * before it was done, or more held rows now than the threshold); else the
   * verdict came from awake tenants, or from a record that no longer says
   * what the box has.
   */
  #judgeFailure(r: RolloutRecord, since: number): void {
    const boxes = (r.waves[r.wave] ?? []).filter((b) => !isSkipped(r, b))
    // Gone as the agents judge it: not done (a retry asked and unanswered is not done, design §7.6), and no
    // live summary (dead, or its lease lapsed), or one put since the record the verdict was judged on (the box
    // came back after the agent read the live set).
    const gone = boxes.filter((b) => {
      const live = this.model.get(`/carlos/layout/boxes/${b}`)
      return (
        !this.#done(r, r.wave, b) && (this.agents.get(b)?.dead !== false || live === undefined || live.create > since)
      )
    })
    // Rows not where the rollout wants them, deferred ones aside: a hold cleared counts until the box's leg
    // has moved its row (the fix clears the marker; the box's next run moves it).
    const done = boxes.filter((b) => this.model.get(this.#doneKey(r.id, r.wave, b)) !== undefined)
    const heldNow = done.reduce(
      (n, b) =>
        n +
        (this.disks.find((d) => d.box === b)?.rows ?? []).filter(
          (x) => x.held || (x.layout !== r.mode && x.code !== 'awake_grace'),
        ).length,
      0,
    )
    if (gone.length > 0 || heldNow > r.maxFailedRows) return
    const deferredAtDone = boxes.filter((b) => (this.atDone.get(b)?.deferred ?? 0) > 0)
    if (!this.fixed && deferredAtDone.length > 0)
      this.violate(
        'awake-fails-wave',
        `wave ${r.wave + 1} of ${r.id} failed; deferred rows on ${deferredAtDone.join(', ')}`,
      )
    else
      this.violate(
        'stale-verdict',
        `wave ${r.wave + 1} of ${r.id} failed${this.resumedAfterFix ? ' again after its resume' : ''}; ` +
          `${heldNow} held rows now, threshold ${r.maxFailedRows}`,
      )
  }

  /** After each step: every change of a record has its event; never more than maxParallel live boxes moving. */
  afterStep(): void {
    this.#checkEvents()
    const r = this.records.get(this.rolloutId ?? '')
    if (r === undefined || !this.movingDue) return
    this.movingDue = false
    for (const [w, boxes] of r.waves.entries()) {
      // A skipped box frees its lane: it may still move (it stays on the rollout's intent), uncounted.
      const moving = boxes.filter(
        (b) =>
          this.started.has(`${r.id}/${b}`) &&
          !isSkipped(r, b) &&
          !this.firstPassEnded.has(b) &&
          this.agents.get(b)?.dead === false,
      )
      if (moving.length > r.maxParallel)
        this.violate('over-max-parallel', `wave ${w + 1} of ${r.id}: ${moving.join(', ')} moving, max ${r.maxParallel}`)
    }
  }

  /** The changes of records since the last step, each with its event, put in its own transaction. */
  #checkEvents(): void {
    if (this.#eventsDue === 0) return
    for (const c of this.recordChanges.slice(-this.#eventsDue))
      if (this.model.get(c.eventKey)?.mod !== c.rev)
        this.violate('event-not-in-history', `the change of ${c.id} at revision ${c.rev} has no event`)
    this.#eventsDue = 0
  }

  /** At the end: `fleet rollout history --json` lists one event per change of the record, and each promote. */
  async checkHistory(): Promise<void> {
    const id = this.rolloutId
    if (id === undefined) return
    let out = ''
    const io = {
      ...this.#io(),
      store: this.observer,
      stdout: { write: (s: string) => ((out += s), true) } as unknown as NodeJS.WritableStream,
    }
    if ((await fleetCommand(['rollout', 'history', id, '--json'], io)) !== 0) {
      this.violate('event-not-in-history', `fleet rollout history ${id} failed`)
      return
    }
    const { events } = JSON.parse(out) as { events: RolloutEvent[] }
    const changes = this.recordChanges.filter((c) => c.id === id).length
    if (events.length !== changes)
      this.violate('event-not-in-history', `fleet rollout history lists ${events.length} events for ${changes} changes`)
  }

  /** The fleet view as `fleet status` reads it: every box that ever published is in it. */
  async checkView(): Promise<void> {
    this.viewDue = false
    const view = await readFleet(this.observer)
    const shown = new Set(view.view.rows.map((row) => row.summary.box))
    for (const box of this.published)
      if (!shown.has(box)) this.violate('box-dropped-from-view', `${box} is not in fleet status`)
  }

  finished(): boolean {
    const r = this.records.get(this.rolloutId ?? '')
    const end = this.fixAt + SETTLE_MS + DONE_BOUND_MS
    const over = this.s.now - SIM_EPOCH > end
    if (r === undefined) return over
    if (!this.fixed) return over
    // Resumed once after the fix and stopped again: nobody resumes it a second time, so it is decided.
    const stuck = this.resumedAfterFix && this.operatorActs === 0 && r.state !== 'running' && r.state !== 'waiting'
    return r.state === 'done' || r.state === 'aborted' || stuck || over
  }
}

type OperatorAct = 'pause' | 'resume' | 'abort' | 'promote' | 'retry' | 'skip'

/** Whether an operator's act that failed landed anyway (its answer was lost), or is not tried again. */
function landed(action: OperatorAct, r: RolloutRecord): boolean {
  if (action === 'pause') return r.state !== 'running'
  if (action === 'resume') return r.state !== 'paused'
  return true
}

/** What a put says, briefly, for the trace: a box's summary, a box's end, a record's state. */
function said(e: ModelEvent): string {
  try {
    const v = JSON.parse(e.value) as Record<string, unknown>
    if (e.key.includes('/boxes/')) {
      const leg = v.leg as { running: boolean; pending: boolean }
      return `intent=${String(v.intent)} running=${leg.running} pending=${leg.pending} counts=${JSON.stringify(v.counts)}`
    }
    if (e.key.includes('/rollouts/done/')) return e.value
    if (e.key.includes('/rollouts/record/')) return `wave=${Number(v.wave) + 1} ${String(v.state)} ${String(v.reason)}`
  } catch {
    // Not JSON (the active pointer, a label): nothing to say.
  }
  return ''
}

/** Runs one seed to its end and says what broke. */
export async function runSeed(o: SimOptions): Promise<SimResult> {
  const w = new World(o)
  const undo = virtualTimeouts(w.s)
  try {
    w.draw()
    let n = 0
    while (!w.finished() && w.s.steps < MAX_STEPS) {
      if (!(await w.s.step())) break
      w.afterStep()
      if (w.viewDue || ++n % 200 === 0) await w.checkView()
    }
    await w.checkView()
    w.afterStep()
    await w.checkHistory()
    const r = w.records.get(w.rolloutId ?? '')
    // An operator's abort that landed ends it; one that never landed leaves the rollout held to the bound.
    if (r !== undefined && r.state !== 'done' && r.state !== 'aborted')
      w.violate('fixed-rollout-not-done', `${r.id} is ${r.state}: ${r.reason}`)
    for (const a of w.everyAgent) a.release()
    return {
      seed: o.seed,
      boxes: o.boxes,
      steps: w.s.steps,
      virtualMs: w.s.now - SIM_EPOCH,
      outcome: r?.state ?? 'not-recorded',
      violations: w.violations,
      drawn: w.drawn,
    }
  } finally {
    undo()
  }
}

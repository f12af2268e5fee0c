// bench:fleet's staged rollout with a real fleet's faults (design §7.6), on
// the in-process boxes of fleet-sim.ts: 5 % of the boxes have an awake
// tenant when it is recorded (its row deferred, as in its grace; the tenant
// falls asleep at a random moment 10 to 60 s after the record, which runs
// the box's leg again as a released claim does), 1 % have a row held until
// the operator fixes it, and 1 % are killed (kill -9: the lease left to
// expire) once the second wave opens or the rollout first pauses. What the
// bench does is what an operator would: a killed agent is started again by
// its supervisor, here only once its lease has expired (the fleet sees the
// box gone first, the harder case); when the rollout pauses, the operator
// clears every held row in the fleet and converges those boxes (or does so
// when the last wave opens, had nothing paused), waits for the killed boxes
// to be back and the held ones converged, and resumes ONCE. A second pause
// is the bench's failure: it says so and stops. Which boxes get which fault
// is drawn from one seed, printed.
import { PassThrough } from 'node:stream'
import { fleetCommand } from '../src/cli/commands/fleet.js'
import type { loadConfig } from '../src/config.js'
import type { RolloutRecord } from '../src/domain/rollout.js'
import { rolloutPrefixFor, type EtcdRollouts } from '../src/infra/deploy-etcd/rollout.js'
import type { EtcdDeployStore } from '../src/infra/deploy-etcd/store.js'
import { BOX_TTL_MS } from '../src/infra/deploy-etcd/boxes.js'
import type { EtcdServer } from '../test/helpers/etcd.js'
import { movesBroken, type SimFleet } from '../test/helpers/sim-fleet.js'

/** The share of the fleet with each fault: at least one box each. */
const AWAKE_SHARE = 0.05
const HELD_SHARE = 0.01
const KILLED_SHARE = 0.01
/** When the awake tenants fall asleep, after the record. */
const SLEEP_WINDOW_MS: readonly [number, number] = [10_000, 60_000]
/** A killed box comes back this long after its lease expired at the latest. */
const RESTART_AFTER_MS = BOX_TTL_MS + 5_000
const LOOK_MS = 250
const ROLLOUT_BOUND_MS = 600_000
/** After done: the deferred rows of tenants still awake move when they sleep. */
const SETTLE_BOUND_MS = 120_000

/** A small seeded generator (mulberry32): the faults' boxes and times are the seed's. */
export function seeded(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

export interface Faults {
  awake: Map<string, number>
  held: string[]
  killed: string[]
}

/** Draws the boxes of each fault (disjoint) and each awake tenant's sleep, in ms after the record. */
export function drawFaults(labels: readonly string[], random: () => number): Faults {
  const order = [...labels]
  for (let i = order.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1))
    ;[order[i], order[j]] = [order[j] as string, order[i] as string]
  }
  const n = (share: number) => Math.max(1, Math.round(share * labels.length))
  const awake = order.splice(0, n(AWAKE_SHARE))
  const held = order.splice(0, n(HELD_SHARE))
  const killed = order.splice(0, n(KILLED_SHARE))
  const [from, to] = SLEEP_WINDOW_MS
  return { awake: new Map(awake.map((b) => [b, Math.round(from + random() * (to - from))])), held, killed }
}

function pct(xs: readonly number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b)
  return s.length === 0 ? NaN : (s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] ?? NaN)
}

const stats = (xs: readonly number[]) => ({ p50: pct(xs, 50), p99: pct(xs, 99), max: pct(xs, 100), n: xs.length })

function quiet(): PassThrough {
  const s = new PassThrough()
  s.resume()
  return s
}

export interface FaultedRolloutContext {
  fleet: SimFleet
  members: readonly EtcdServer[]
  ops: EtcdDeployStore
  config: ReturnType<typeof loadConfig>
  prefix: string
  seed: number
  /** Record to converged, per box, for the rollout's intent: filled by the fleet's onConverged. */
  converged: Map<string, Map<string, number>>
  log: (line: string) => void
}

/** What the operator did, in seconds after the record. */
interface Step {
  atS: number
  what: string
}

class Operator {
  readonly steps: Step[] = []
  readonly waveOpenedAt: number[] = []
  resumes = 0
  killedAt: number | undefined
  back = false
  fixed = false
  pauses: string[] = []
  #restarting = false

  constructor(
    private readonly c: FaultedRolloutContext,
    private readonly faults: Faults,
    private readonly recordAt: number,
  ) {
    this.waveOpenedAt[0] = recordAt
  }

  note(what: string): void {
    const atS = Math.round((Date.now() - this.recordAt) / 100) / 10
    this.steps.push({ atS, what })
    this.c.log(`fleet-faults: +${atS} s ${what}`)
  }

  /** One look at the rollout: the operator's move, if any. Answers the record once there is nothing more to do. */
  async look(r: RolloutRecord): Promise<RolloutRecord | undefined> {
    const now = Date.now()
    for (let w = this.waveOpenedAt.length; w <= r.wave; w++) this.waveOpenedAt[w] = now
    if (this.killedAt === undefined && (r.wave >= 1 || r.state !== 'running')) await this.#kill(r)
    if (this.killedAt !== undefined && !this.#restarting && now >= this.killedAt + RESTART_AFTER_MS) {
      this.#restarting = true
      void this.#restart().catch((err: unknown) => this.note(`the killed boxes could not start again: ${String(err)}`))
    }
    const lastWave = r.wave === r.waves.length - 1
    if (!this.fixed && (r.state === 'paused' || lastWave)) this.#fix()
    // Done, once the killed boxes are back: their rows are the fleet's too.
    if (r.state === 'done') return this.killedAt === undefined || this.back ? r : undefined
    if (r.state !== 'paused' && r.state !== 'running') {
      this.note(`rollout ${r.state}: ${r.reason}`)
      return r
    }
    if (r.state !== 'paused') return undefined
    if (this.pauses.at(-1) !== r.reason || this.pauses.length <= this.resumes) {
      this.pauses.push(r.reason)
      this.note(`paused: ${r.reason}`)
    }
    if (this.resumes > 0) {
      this.note('paused again after its one resume: the bench stops here')
      return r
    }
    if (this.back && this.#holdsGone()) await this.#resume()
    return undefined
  }

  async #kill(r: RolloutRecord): Promise<void> {
    this.killedAt = Date.now()
    await Promise.all(this.faults.killed.map((b) => this.c.fleet.kill(b)))
    const waves = this.faults.killed.map((b) => 1 + r.waves.findIndex((w) => w.includes(b)))
    this.note(
      `killed ${this.faults.killed.length} boxes (kill -9; in waves ${waves.join(',')}) with wave ${r.wave + 1} open`,
    )
  }

  async #restart(): Promise<void> {
    await Promise.all(this.faults.killed.map((b) => this.c.fleet.restart(b)))
    this.back = true
    this.note(`started the ${this.faults.killed.length} killed boxes again (their leases had expired)`)
  }

  #fix(): void {
    for (const b of this.faults.held) this.c.fleet.box(b).clearHolds()
    this.fixed = true
    this.note(`cleared the held rows of ${this.faults.held.length} boxes and converged them`)
  }

  #holdsGone(): boolean {
    return this.faults.held.every((b) => {
      const s = this.c.fleet.box(b).state
      return s.holds === 0 && s.behind.held === 0
    })
  }

  async #resume(): Promise<void> {
    this.resumes++
    const argv = ['rollout', 'resume', '-m', 'bench: holds cleared, killed boxes back']
    const code = await fleetCommand(argv, {
      config: this.c.config,
      store: this.c.ops,
      stdout: quiet(),
      stderr: quiet(),
    })
    this.note(`resumed (exit ${code})`)
  }
}

/** Every key in etcd (its keys only), asked of the first member that answers. */
async function allKeys(members: readonly EtcdServer[]): Promise<string[]> {
  const body = JSON.stringify({
    key: Buffer.from([0]).toString('base64'),
    range_end: Buffer.from([0]).toString('base64'),
    keys_only: true,
  })
  for (const m of members) {
    try {
      const res = await fetch(`${m.url}/v3/kv/range`, { method: 'POST', body, signal: AbortSignal.timeout(30_000) })
      if (!res.ok) continue
      const { kvs = [] } = (await res.json()) as { kvs?: Array<{ key: string }> }
      return kvs.map((kv) => Buffer.from(kv.key, 'base64').toString('utf8'))
    } catch {
      // The next member.
    }
  }
  throw new Error('no etcd member listed its keys')
}

/** etcd's keys, by the segment after the deployment's root (`intents`, `boxes`, `rollouts`, …), and in all. */
function etcdKeys(keys: readonly string[], prefix: string): { total: number; by: Record<string, number> } {
  const root = prefix.replace(/intents\/$/, '')
  const by: Record<string, number> = {}
  for (const k of keys) {
    const group = k.startsWith(root) ? (k.slice(root.length).split('/')[0] ?? '') : '(other)'
    by[group] = (by[group] ?? 0) + 1
  }
  return { total: keys.length, by }
}

/** The rollout's events: the store's history when this build keeps one, else the keys that hold them. */
async function eventsWritten(port: EtcdRollouts, id: string, keys: readonly string[]): Promise<number | string> {
  const history = (port as unknown as { events?: (id: string, s: AbortSignal) => Promise<unknown[]> }).events
  if (typeof history === 'function') return (await history.call(port, id, AbortSignal.timeout(30_000))).length
  const n = keys.filter((k) => k.includes('/events/')).length
  return n > 0 ? n : 'none: this build writes no rollout events'
}

/** Runs the faulted rollout, writing its figures into out as they are known (a rollout cut short keeps them). */
export async function faultedRollout(c: FaultedRolloutContext, out: Record<string, unknown>): Promise<void> {
  const { fleet, ops } = c
  const faults = drawFaults(
    fleet.boxes.map((b) => b.box),
    seeded(c.seed),
  )
  for (const b of faults.awake.keys()) fleet.box(b).wake(1)
  for (const b of faults.held) fleet.box(b).hold(1)
  fleet.maxMoving = 0
  const argv = ['rollout', 'revert', '--waves', '1,10%,50%,100%', '-m', 'bench: faulted rollout']
  const recordAt = Date.now()
  if ((await fleetCommand(argv, { config: c.config, store: ops, stdout: quiet(), stderr: process.stderr })) !== 0)
    throw new Error('the rollout was not recorded')
  const port = ops.rollouts()
  const sleeps = [...faults.awake].map(([b, ms]) => setTimeout(() => fleet.box(b).sleep(), ms))
  const op = new Operator(c, faults, recordAt)
  Object.assign(out, {
    seed: c.seed,
    faults: {
      awakeBoxes: faults.awake.size,
      heldBoxes: faults.held.length,
      killedBoxes: faults.killed.length,
      awakeSleepAfterRecordS: SLEEP_WINDOW_MS.map((ms) => ms / 1000),
      killedBackAfterS: RESTART_AFTER_MS / 1000,
    },
  })
  let last: RolloutRecord
  try {
    last = await lookUntilEnd(port, op, c)
    out.state = last.state
    out.reason = last.reason
    out.waves = last.waves.map((w) => w.length)
    out.maxParallel = last.maxParallel
    out.endToEndSeconds = (Date.now() - recordAt) / 1000
    const opened = op.waveOpenedAt
    out.waveSeconds = opened.map((at, w) => ((opened[w + 1] ?? Date.now()) - at) / 1000)
    if (last.state === 'done') await settle(fleet, c.converged, last.id)
    const mine = c.converged.get(last.id) ?? new Map<string, number>()
    out.recordToConvergedMs = stats([...mine.values()].map((at) => at - recordAt))
    out.boxesConverged = `${mine.size}/${fleet.boxes.length}`
    out.brokenRules = movesBroken(last, fleet.moves, fleet.maxMoving, last.state !== 'done')
  } finally {
    for (const t of sleeps) clearTimeout(t)
    out.resumes = op.resumes
    out.pauses = op.pauses
    out.operator = op.steps
  }
  const keys = await allKeys(c.members)
  out.eventsWritten = await eventsWritten(port, last.id, keys)
  out.etcdKeys = etcdKeys(keys, c.prefix)
  out.rolloutKeys = keys.filter((k) => k.startsWith(rolloutPrefixFor(c.prefix))).length
}

async function lookUntilEnd(port: EtcdRollouts, op: Operator, c: FaultedRolloutContext): Promise<RolloutRecord> {
  const end = Date.now() + ROLLOUT_BOUND_MS
  let lastLog = 0
  let refused = 0
  let why = ''
  for (;;) {
    let r: RolloutRecord | undefined
    try {
      r = (await port.active(AbortSignal.timeout(30_000))).current?.record
    } catch (err) {
      // A read refused under load (a leader lost): asked again, and counted, so a stall says what it met.
      r = undefined
      refused++
      why = err instanceof Error ? err.message : String(err)
      if (Date.now() - lastLog > 10_000) {
        lastLog = Date.now()
        c.log(`fleet-faults: ${refused} reads of the rollout refused; the last: ${why}`)
      }
    }
    if (r !== undefined) {
      const ended = await op.look(r)
      if (ended !== undefined) return ended
      if (Date.now() - lastLog > 10_000) {
        lastLog = Date.now()
        c.log(`fleet-faults: wave ${r.wave + 1}/${r.waves.length} ${r.state}, ${c.fleet.moves.length} moves`)
      }
    }
    if (Date.now() > end)
      throw new Error(
        `bench: the faulted rollout did not end within ${ROLLOUT_BOUND_MS} ms` +
          (refused === 0 ? '' : ` (${refused} reads of it refused; the last: ${why})`),
      )
    await new Promise((resolve) => setTimeout(resolve, LOOK_MS))
  }
}

/** After done: every box converged on the rollout's intent (the last awake tenants sleep), within a bound. */
async function settle(fleet: SimFleet, converged: Map<string, Map<string, number>>, id: string): Promise<void> {
  const end = Date.now() + SETTLE_BOUND_MS
  while ((converged.get(id)?.size ?? 0) < fleet.boxes.length && Date.now() < end)
    await new Promise((resolve) => setTimeout(resolve, LOOK_MS))
}

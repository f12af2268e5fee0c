// A fleet of in-process boxes (sim-box.ts) on one etcd prefix, and what a
// rollout test checks of their moves: each box moved once, at most
// maxParallel at once, and no box of a wave moved before every box of the
// wave before it had ended its move. A box may be killed and started again
// in its place, where the kill left it (its moves keep counting as its own).
import type { Logger } from '../../src/domain/ports.js'
import type { RolloutRecord } from '../../src/domain/rollout.js'
import type { EtcdStoreOptions } from '../../src/infra/deploy-etcd/store.js'
import { SimBox, type SimBoxOptions, type SimMove } from './sim-box.js'

export interface SimFleetOptions {
  endpoints: readonly string[]
  prefix: string
  boxes: number
  rows?: number
  passMs: number | ((box: string) => number)
  failRows?: (box: string) => number
  onConverged?: (box: string, intent: string, at: number) => void
  store?: EtcdStoreOptions
  logger?: Logger
  onIntentSeen?: (box: string, id: string, at: number) => void
  onRolloutState?: (box: string, r: RolloutRecord | undefined) => void
  onWatchEvent?: (box: string, id: string, at: number) => void
}

export class SimFleet {
  readonly boxes: SimBox[]
  readonly moves: SimMove[] = []
  #moving = 0
  maxMoving = 0
  readonly #options = new Map<string, SimBoxOptions>()

  constructor(o: SimFleetOptions) {
    this.boxes = Array.from({ length: o.boxes }, (_, i) => {
      const box = `box-${String(i).padStart(4, '0')}`
      const options: SimBoxOptions = {
        endpoints: o.endpoints,
        prefix: o.prefix,
        box,
        rows: o.rows ?? 10,
        passMs: typeof o.passMs === 'number' ? o.passMs : o.passMs(box),
        failRows: o.failRows?.(box),
        store: o.store,
        logger: o.logger,
        onIntentSeen: o.onIntentSeen,
        onWatchEvent: o.onWatchEvent,
        onConverged: o.onConverged,
        onRolloutState: (r) => o.onRolloutState?.(box, r),
        onMove: (m) => {
          this.moves.push(m)
        },
        onMoveStart: () => {
          this.maxMoving = Math.max(this.maxMoving, ++this.#moving)
        },
        onMoveEnd: () => {
          this.#moving--
        },
      }
      this.#options.set(box, options)
      return new SimBox(options)
    })
  }

  /** Kills the box (kill -9: its summary stays until its lease expires). */
  async kill(label: string): Promise<void> {
    await this.box(label).kill()
  }

  /** Starts a box again in the place of the one killed: the same label, rows and tenants as the kill left them. */
  async restart(label: string): Promise<SimBox> {
    const i = this.boxes.findIndex((x) => x.box === label)
    const old = this.boxes[i]
    const options = this.#options.get(label)
    if (old === undefined || options === undefined) throw new Error(`no box ${label}`)
    const { mode, intent, awake, holds, behind } = old.state
    const box = new SimBox({
      ...options,
      startMode: mode,
      startIntent: intent,
      awakeRows: awake,
      heldRows: holds,
      startBehind: behind,
    })
    this.boxes[i] = box
    await box.start()
    return box
  }

  box(label: string): SimBox {
    const b = this.boxes.find((x) => x.box === label)
    if (b === undefined) throw new Error(`no box ${label}`)
    return b
  }

  async start(): Promise<void> {
    await Promise.all(this.boxes.map((b) => b.start()))
  }

  async stop(): Promise<void> {
    await Promise.all(this.boxes.map((b) => b.stop()))
  }

  errors(): string[] {
    return this.boxes.flatMap((b) => b.errors.map((e) => `${b.box}: ${e}`))
  }
}

/**
 * What is wrong with the moves made under rollout r (empty: nothing): a
 * box that moved twice, a wave's box that moved before the wave before it
 * was over, more than maxParallel moving at once (maxMoving, counted by the
 * fleet), a box of the rollout that never moved (unless allowed to).
 */
export function movesBroken(r: RolloutRecord, moves: readonly SimMove[], maxMoving: number, partial = false): string[] {
  const wrong: string[] = []
  const mine = moves.filter((m) => m.intent === r.id)
  const byBox = new Map<string, SimMove[]>()
  for (const m of mine) byBox.set(m.box, [...(byBox.get(m.box) ?? []), m])
  for (const [box, ms] of byBox) if (ms.length > 1) wrong.push(`${box} moved ${ms.length} times`)
  for (let w = 1; w < r.waves.length; w++) {
    const before = (r.waves[w - 1] ?? []).map((b) => byBox.get(b)?.[0]?.endedAt ?? Infinity)
    const lastEnd = Math.max(...before)
    for (const b of r.waves[w] ?? []) {
      const m = byBox.get(b)?.[0]
      if (m !== undefined && m.startedAt < lastEnd)
        wrong.push(`${b} of wave ${w + 1} started before wave ${w} was over`)
    }
  }
  if (maxMoving > r.maxParallel) wrong.push(`${maxMoving} boxes moved at once, over ${r.maxParallel}`)
  if (!partial) for (const b of r.waves.flat()) if (!byBox.has(b)) wrong.push(`${b} never moved`)
  return wrong
}

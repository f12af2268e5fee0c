// A fleet of in-process boxes (sim-box.ts) on one etcd prefix, and what a
// rollout test checks of their moves: each box moved once, at most
// maxParallel at once, and no box of a wave moved before every box of the
// wave before it had ended its move.
import type { Logger } from '../../src/domain/ports.js'
import type { RolloutRecord } from '../../src/domain/rollout.js'
import type { EtcdStoreOptions } from '../../src/infra/deploy-etcd/store.js'
import { SimBox, type SimMove } from './sim-box.js'

export interface SimFleetOptions {
  endpoints: readonly string[]
  prefix: string
  boxes: number
  rows?: number
  passMs: number | ((box: string) => number)
  failRows?: (box: string) => number
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

  constructor(o: SimFleetOptions) {
    this.boxes = Array.from({ length: o.boxes }, (_, i) => {
      const box = `box-${String(i).padStart(4, '0')}`
      return new SimBox({
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
      })
    })
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

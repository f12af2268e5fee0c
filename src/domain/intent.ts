// Which recorded intent addresses this box (design §1, §7): the newest
// record whose box is this box's label or absent (the whole fleet).
import type { DeployStore } from './ports.js'
import type { IntentRecord } from './schemas.js'

export const INTENT_TIMEOUT_MS = 30_000

export type IntentRead = { found: false } | { found: true; intent: IntentRecord }

/** records: sorted by id, newest last. */
export function selectIntent(records: readonly IntentRecord[], box: string): IntentRead {
  for (let i = records.length - 1; i >= 0; i--) {
    const r = records[i]
    if (r !== undefined && (r.box === undefined || r.box === box)) return { found: true, intent: r }
  }
  return { found: false }
}

/** Throws on a slow store or a malformed record: the caller's `unreadable`. */
export async function loadLayoutIntent(
  store: DeployStore,
  box: string,
  signal?: AbortSignal,
  timeoutMs = INTENT_TIMEOUT_MS,
): Promise<IntentRead> {
  const timeout = AbortSignal.timeout(timeoutMs)
  const s = signal ? AbortSignal.any([signal, timeout]) : timeout
  const records = await store.list(s)
  return selectIntent(records, box)
}

/** Sorts by time, and after every id recorded, even after a clock step. */
export function newIntentId(now: Date, existing: readonly string[], rand: () => string): string {
  const stamp = now.toISOString().replace(/[-:]/g, '') // 20261130T080102.123Z
  const id = `${stamp}-${rand()}`
  const newest = existing.reduce((a, b) => (b > a ? b : a), '')
  if (id > newest) return id
  // A string sorts after the string it extends; a same-width bump keeps the order.
  const m = /^(.*)\.([0-9]{6})$/.exec(newest)
  const bumped = m ? `${m[1]}.${String(Number(m[2]) + 1).padStart(6, '0')}` : ''
  return bumped > newest ? bumped : `${newest}.000001`
}

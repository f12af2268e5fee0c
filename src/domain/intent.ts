// Which recorded intent addresses this box, shared by every deploy store
// (design §1, §7): the newest record whose box is this
// box's label or absent (the whole fleet).
import type { DeployStore } from './ports.js'
import type { IntentRecord } from './schemas.js'

/** The intent read timeout (design §5). */
export const INTENT_TIMEOUT_MS = 30_000

export type IntentRead = { found: false } | { found: true; intent: IntentRecord }

/** The newest record addressing box; records must be sorted by id, newest last. */
export function selectIntent(records: readonly IntentRecord[], box: string): IntentRead {
  for (let i = records.length - 1; i >= 0; i--) {
    const r = records[i]
    if (r !== undefined && (r.box === undefined || r.box === box)) return { found: true, intent: r }
  }
  return { found: false }
}

/**
 * Reads the store and selects this box's intent, bounded by timeoutMs and by
 * the caller's signal. Throws when the store cannot be read in time or holds
 * a malformed record: the caller's answer to that is "unreadable".
 */
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

/**
 * A new intent id: a UTC stamp to the millisecond, so ids sort by time, and
 * greater than every id already recorded (two records in one millisecond,
 * or a clock that stepped back, still sort newest last).
 */
export function newIntentId(now: Date, existing: readonly string[], rand: () => string): string {
  const stamp = now.toISOString().replace(/[-:]/g, '') // 20261130T080102.123Z
  const id = `${stamp}-${rand()}`
  const newest = existing.reduce((a, b) => (b > a ? b : a), '')
  if (id > newest) return id
  // The newest id with a counter: `.000001` after it, then the counter
  // bumped. A string sorts after every string it extends, so the first is
  // later than the newest, and a same-width bump keeps the order after that.
  const m = /^(.*)\.([0-9]{6})$/.exec(newest)
  const bumped = m ? `${m[1]}.${String(Number(m[2]) + 1).padStart(6, '0')}` : ''
  return bumped > newest ? bumped : `${newest}.000001`
}

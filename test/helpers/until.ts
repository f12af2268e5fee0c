// The one bounded wait of the suite: polls an observable state until it
// holds, never a blind sleep. check answers a value (returned), or
// undefined / false for "not yet". The default bound is generous: it says
// when to give up on a state that never comes, not how fast one should, and
// a machine busy with other work may take many seconds for what is quick alone.
import { setTimeout as delay } from 'node:timers/promises'

export async function until<T>(
  what: string,
  check: () => T | undefined | false | Promise<T | undefined | false>,
  ms = 60_000,
): Promise<T> {
  const deadline = Date.now() + ms
  for (;;) {
    const v = await check()
    if (v !== undefined && v !== false) return v
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`)
    await delay(10)
  }
}

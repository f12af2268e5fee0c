// The one bounded wait of the suite: polls an observable state until it
// holds, never a blind sleep. check answers a value (returned), or
// undefined / false for "not yet".
import { setTimeout as delay } from 'node:timers/promises'

export async function until<T>(
  what: string,
  check: () => T | undefined | false | Promise<T | undefined | false>,
  ms = 10_000,
): Promise<T> {
  const deadline = Date.now() + ms
  for (;;) {
    const v = await check()
    if (v !== undefined && v !== false) return v
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`)
    await delay(10)
  }
}

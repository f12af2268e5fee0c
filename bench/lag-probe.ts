// The agent's event-loop lag over a stretch of time (issue: "event-loop lag
// p99 during the converge"), read from the agent's own
// nodejs_eventloop_lag_* gauges: prom-client samples the loop's delay with
// perf_hooks.monitorEventLoopDelay and starts its histogram afresh at
// every scrape, so a scrape at the start of the stretch clears it and one
// at its end reads the stretch alone. Both scrapes are GET /metrics on the
// real agent; nothing is estimated from outside.
//
//   import { LagProbe } from './lag-probe.js'
//   const probe = await LagProbe.start(url); ...; const lag = await probe.stop()
import { request } from 'undici'

export interface LoopLag {
  /** Milliseconds, from the agent's monitorEventLoopDelay histogram over the stretch. */
  p50Ms: number
  p90Ms: number
  p99Ms: number
  maxMs: number
  meanMs: number
  /** Seconds the stretch lasted. */
  seconds: number
}

const GAUGES = {
  p50Ms: 'nodejs_eventloop_lag_p50_seconds',
  p90Ms: 'nodejs_eventloop_lag_p90_seconds',
  p99Ms: 'nodejs_eventloop_lag_p99_seconds',
  maxMs: 'nodejs_eventloop_lag_max_seconds',
  meanMs: 'nodejs_eventloop_lag_mean_seconds',
} as const

/** Scrapes GET /metrics and answers the lag gauges, in milliseconds. */
export async function scrapeLag(url: string): Promise<Omit<LoopLag, 'seconds'>> {
  const res = await request(new URL('/metrics', url), { headersTimeout: 60_000, bodyTimeout: 60_000 })
  const text = await res.body.text()
  if (res.statusCode !== 200) throw new Error(`GET /metrics answered ${res.statusCode}`)
  const lines = text.split('\n')
  const read = (name: string): number => {
    const line = lines.find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`))
    if (line === undefined) throw new Error(`GET /metrics has no ${name}: the agent's default metrics are off`)
    return Number(line.slice(line.lastIndexOf(' ') + 1)) * 1000
  }
  return {
    p50Ms: read(GAUGES.p50Ms),
    p90Ms: read(GAUGES.p90Ms),
    p99Ms: read(GAUGES.p99Ms),
    maxMs: read(GAUGES.maxMs),
    meanMs: read(GAUGES.meanMs),
  }
}

/** A stretch of the agent's event-loop lag: started by one scrape (which clears the histogram), read by the next. */
export class LagProbe {
  readonly #url: string
  readonly #t0: number

  private constructor(url: string) {
    this.#url = url
    this.#t0 = performance.now()
  }

  static async start(url: string): Promise<LagProbe> {
    await scrapeLag(url)
    return new LagProbe(url)
  }

  async stop(): Promise<LoopLag> {
    const lag = await scrapeLag(this.#url)
    return { ...lag, seconds: (performance.now() - this.#t0) / 1000 }
  }
}

// A small closed-loop HTTP load generator on undici (what autocannon does,
// without the dependency): `connections` loops, each sending its next
// request when the last answer is read whole, for `seconds`. Answers the
// rate, the latency percentiles and the statuses seen.
import { Pool } from 'undici'

export interface LoadResult {
  path: string
  connections: number
  seconds: number
  requests: number
  perSecond: number
  /** Latency percentiles, in ms. */
  p50: number
  p99: number
  max: number
  /** Answers by status. */
  statuses: Record<string, number>
  /** Body bytes of the last answer: what one request carries. */
  bodyBytes: number
}

export interface LoadSpec {
  origin: string
  /** A path, or one made per request (request number n). */
  path: string | ((n: number) => string)
  method?: 'GET' | 'POST' | 'DELETE'
  headers?: Record<string, string>
  connections?: number
  seconds?: number
  /** Requests sent first and not counted: connections opened, code warmed. */
  warmup?: number
}

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return 0
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0
}

export async function load(spec: LoadSpec): Promise<LoadResult> {
  const connections = spec.connections ?? 10
  const seconds = spec.seconds ?? 3
  const pool = new Pool(spec.origin, { connections, pipelining: 1 })
  const pathOf = typeof spec.path === 'string' ? () => spec.path as string : spec.path
  let n = 0
  let bodyBytes = 0
  const one = async (): Promise<{ status: number; ms: number }> => {
    const t0 = performance.now()
    const res = await pool.request({
      origin: spec.origin,
      path: pathOf(n++),
      method: spec.method ?? 'GET',
      headers: spec.headers,
    })
    const body = Buffer.from(await res.body.arrayBuffer())
    bodyBytes = body.length
    return { status: res.statusCode, ms: performance.now() - t0 }
  }
  try {
    for (let i = 0; i < (spec.warmup ?? 200); i++) await one()
    const latencies: number[] = []
    const statuses: Record<string, number> = {}
    const end = performance.now() + seconds * 1000
    const t0 = performance.now()
    const loop = async (): Promise<void> => {
      while (performance.now() < end) {
        const r = await one()
        latencies.push(r.ms)
        statuses[r.status] = (statuses[r.status] ?? 0) + 1
      }
    }
    await Promise.all(Array.from({ length: connections }, loop))
    const took = (performance.now() - t0) / 1000
    const sorted = Float64Array.from(latencies).sort()
    const round = (x: number): number => Math.round(x * 100) / 100
    return {
      path: typeof spec.path === 'string' ? spec.path : pathOf(0),
      connections,
      seconds: round(took),
      requests: latencies.length,
      perSecond: Math.round(latencies.length / took),
      p50: round(percentile(sorted, 50)),
      p99: round(percentile(sorted, 99)),
      max: round(sorted[sorted.length - 1] ?? 0),
      statuses,
      bodyBytes,
    }
  } finally {
    await pool.close()
  }
}

// The HTTP request histogram (design §9), kept here rather than by
// prom-client's Histogram, which re-hashes its labels at every observation on
// the hot `/ready` path. The scrape writes prom-client's exposition.
import type { Registry } from 'prom-client'

interface Series {
  labels: Record<string, string>
  /** Per bucket, not cumulative. */
  counts: Float64Array
  sum: number
  count: number
}

/** A sample as prom-client's registry writes it. */
interface Sample {
  labels: Record<string, string | number>
  value: number
  metricName: string
}

export class HttpHistogram {
  readonly name: string
  readonly help: string
  readonly type = 'histogram'
  readonly aggregator = 'sum'
  readonly #bounds: readonly number[]
  readonly #labelNames: readonly string[]
  readonly #series = new Map<string, Series>()

  constructor(opts: {
    name: string
    help: string
    labelNames: readonly string[]
    buckets: readonly number[]
    registers: readonly Registry[]
  }) {
    this.name = opts.name
    this.help = opts.help
    this.#labelNames = opts.labelNames
    this.#bounds = [...opts.buckets].sort((a, b) => a - b)
    // The registry asks only name, get() and reset().
    for (const r of opts.registers) r.registerMetric(this as never)
  }

  /** Makes the series key names, unless it is there already. */
  open(key: string, labels: Record<string, string>): void {
    if (this.#series.has(key)) return
    for (const name of Object.keys(labels))
      if (!this.#labelNames.includes(name)) throw new Error(`${this.name}: no label ${name}`)
    this.#series.set(key, { labels, counts: new Float64Array(this.#bounds.length), sum: 0, count: 0 })
  }

  /** False, counting nothing, when open() has not made key's series. */
  observe(key: string, value: number): boolean {
    const series = this.#series.get(key)
    if (series === undefined) return false
    if (!Number.isFinite(value)) throw new TypeError(`${this.name}: not a finite number: ${value}`)
    series.sum += value
    series.count++
    const bounds = this.#bounds
    for (let i = 0; i < bounds.length; i++) {
      if (value <= (bounds[i] ?? Infinity)) {
        series.counts[i] = (series.counts[i] ?? 0) + 1
        break
      }
    }
    return true
  }

  /** Per series: cumulative buckets, +Inf, the sum and the count. */
  get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: Sample[] }> {
    const values: Sample[] = []
    for (const s of this.#series.values()) {
      let acc = 0
      for (const [i, le] of this.#bounds.entries()) {
        acc += s.counts[i] ?? 0
        values.push({ labels: { le, ...s.labels }, value: acc, metricName: `${this.name}_bucket` })
      }
      values.push({ labels: { le: '+Inf', ...s.labels }, value: s.count, metricName: `${this.name}_bucket` })
      values.push({ labels: { ...s.labels }, value: s.sum, metricName: `${this.name}_sum` })
      values.push({ labels: { ...s.labels }, value: s.count, metricName: `${this.name}_count` })
    }
    return Promise.resolve({ name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values })
  }

  reset(): void {
    this.#series.clear()
  }
}

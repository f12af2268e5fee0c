// The parts of prom-client the agent uses, each required from its own file: the package's index also
// loads its cluster aggregator and its Pushgateway (node:cluster, node:https), which a start would load
// for nothing. test/metrics/prom-client.test.ts holds them to the index's own exports.
import { createRequire } from 'node:module'
import type * as PromClient from 'prom-client'

const part = createRequire(import.meta.resolve('prom-client'))

export const Registry = part('./lib/registry') as typeof PromClient.Registry
export const Counter = part('./lib/counter') as typeof PromClient.Counter
export const Gauge = part('./lib/gauge') as typeof PromClient.Gauge
export const Histogram = part('./lib/histogram') as typeof PromClient.Histogram
export const collectDefaultMetrics = part('./lib/defaultMetrics') as typeof PromClient.collectDefaultMetrics
export type Registry = PromClient.Registry
export type Counter<T extends string = string> = PromClient.Counter<T>
export type Gauge<T extends string = string> = PromClient.Gauge<T>
export type Histogram<T extends string = string> = PromClient.Histogram<T>

// Every metric the agent exports (design §9), in one table: name, kind, help,
// labels, buckets. Metrics and OpsMetrics make their series from it alone;
// label values come from the domain's closed lists, so none is a hostname.
import type { Registry } from 'prom-client'
import { Counter, Gauge, Histogram } from './prom-client.js'

/** Every series name starts with this. */
export const PREFIX = 'carlos_layout_'

/** One metric; its name goes under PREFIX. */
export interface Definition {
  kind: 'gauge' | 'counter' | 'histogram'
  name: string
  help: string
  labelNames?: readonly string[]
  /** A histogram's bucket bounds, in seconds. */
  buckets?: readonly number[]
}

/** The label names of a definition, as prom-client's types take them. */
export type LabelsOf<D extends Definition> = D extends { labelNames: readonly (infer L extends string)[] } ? L : string

export const METRICS = {
  rows: {
    kind: 'gauge',
    name: 'rows',
    help: 'Instance-kind rows of the registry, by how they are classified.',
    labelNames: ['layout'],
  },
  intentMode: {
    kind: 'gauge',
    name: 'intent_mode',
    help: 'The mode the box works under: 1 for the current mode, 0 for the others.',
    labelNames: ['mode'],
  },
  defaultApplied: {
    kind: 'gauge',
    name: 'default_applied',
    help: '1 when the box is nested by the default rather than by a recorded intent.',
  },
  defaultBlocked: {
    kind: 'gauge',
    name: 'default_blocked',
    help:
      '1 while no intent is recorded and nested by default is not in force for a reason of this box, ' +
      'by what blocks it (gate: the isolation gate, floor: the release floor, no_activator, ' +
      'default_invalid: a bad CARLOS_LAYOUT_DEFAULT, starting: not asked yet); 0 otherwise.',
    labelNames: ['by'],
  },
  legRuns: { kind: 'counter', name: 'leg_runs_total', help: 'Runs of the layout pass the leg finished.' },
  legRunSeconds: {
    kind: 'histogram',
    name: 'leg_run_seconds',
    help: 'How long one run of the layout pass took.',
    // Stopping awake hosts waits up to a minute each.
    buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600],
  },
  readyWaiters: {
    kind: 'gauge',
    name: 'ready_waiters',
    help: 'Requests of GET /ready/:host?wait= waiting now for their host to be ready.',
  },
  legRunning: { kind: 'gauge', name: 'leg_running', help: '1 while a run of the layout pass is under way.' },
  legNextRetry: {
    kind: 'gauge',
    name: 'leg_next_retry_timestamp_seconds',
    help: 'When the retry timer runs the layout pass again, in seconds since the epoch; 0 when no retry is scheduled.',
  },
  moves: {
    kind: 'counter',
    name: 'moves_total',
    help: 'Hosts the pass reached, by the mode it moved them toward and the outcome.',
    labelNames: ['to', 'outcome'],
  },
  moveSeconds: {
    kind: 'histogram',
    name: 'move_seconds',
    help: 'How long one host took to move, from its fence to its outcome.',
    // 60: the wait for an awake host's claim to be released.
    buckets: [0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 120],
  },
  deferredHosts: {
    kind: 'gauge',
    name: 'deferred_hosts',
    help: 'Hosts deferred because they were awake, among the rows the registry holds now.',
  },
  heldHosts: { kind: 'gauge', name: 'held_hosts', help: 'Hosts held stopped and fenced by a hold marker.' },
  needingOperator: {
    kind: 'gauge',
    name: 'rows_needing_operator',
    help:
      'Rows a person must act on (held, refused, kept, missing, conflict, foreign; not a move under way, ' +
      'an awake tenant in its grace or a failed move the leg retries), by reason code, counted at the scrape. ' +
      'A code is exported from its first row on, at 0 once none is left.',
    labelNames: ['reason'],
  },
  intentReads: {
    kind: 'counter',
    name: 'intent_reads_total',
    help: "Reads of the deploy store for this box's layout intent, by result.",
    labelNames: ['result'],
  },
  wakeClaims: {
    kind: 'counter',
    name: 'wake_claims_total',
    help: 'Wake claims of the activator, by how they were answered.',
    labelNames: ['result'],
  },
  recoveredJournals: {
    kind: 'counter',
    name: 'recovered_journals_total',
    help: 'Journals start-up recovery finished or kept, by what it did.',
    labelNames: ['action'],
  },
  httpSeconds: {
    kind: 'histogram',
    name: 'http_request_duration_seconds',
    help: 'HTTP requests served, by method, route pattern and status.',
    labelNames: ['method', 'route', 'status'],
    // Up to the longest a `converge?wait=1` may hold a request.
    buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120, 600],
  },
  // ---- the operator's gauges (ops-metrics.ts) ----
  buildInfo: {
    kind: 'gauge',
    name: 'build_info',
    help:
      "Always 1: layoutd's version, " +
      "and the platform build it was told it runs beside (CARLOS_BUILD; 'unset' when not).",
    labelNames: ['version', 'build'],
  },
  gateCheck: {
    kind: 'gauge',
    name: 'gate_check',
    help:
      'Each check of the isolation gate: 1 passing, 0 failing or not yet run. ' +
      'Absent on a box with no activator armed.',
    labelNames: ['check'],
  },
  lastSuccess: {
    kind: 'gauge',
    name: 'leg_last_success_timestamp_seconds',
    help:
      'When the last run of the leg that read the intent and failed no host finished ' +
      '(seconds since the epoch); 0 before any.',
  },
  intentReadable: {
    kind: 'gauge',
    name: 'intent_readable',
    help: 'Whether the last read of the intent could be read (1), or failed closed as unreadable (0).',
  },
  // ---- the rollout in play, as last read (rollout-metrics.ts; etcd only) ----
  rolloutState: {
    kind: 'gauge',
    name: 'rollout_state',
    help:
      '1 for the state of the rollout in play (running, waiting, paused, frozen, reverted, aborted, done); ' +
      '0 for the rest.',
    labelNames: ['state'],
  },
  rolloutWave: {
    kind: 'gauge',
    name: 'rollout_wave',
    help: 'The open wave of the rollout in play, from 1; 0 when no rollout was ever recorded.',
  },
  rolloutDeferredRows: {
    kind: 'gauge',
    name: 'rollout_deferred_rows',
    help:
      "This box's rows left in the other layout for their tenant's wake grace, as its progress in the " +
      "rollout in play last said; 0 before it is done in it. Summed over the fleet: the rollout's deferred rows.",
  },
} as const satisfies Record<string, Definition>

/** A definition's full series name. */
export function nameOf(d: Definition): string {
  return `${PREFIX}${d.name}`
}

/** As prom-client's configuration takes them. */
function labels<D extends Definition>(d: D): Array<LabelsOf<D>> {
  return [...(d.labelNames ?? [])] as Array<LabelsOf<D>>
}

/** d's gauge on registry; collect, when given, runs at each scrape with the gauge as `this`. */
export function gauge<D extends Definition & { kind: 'gauge' }>(
  registry: Registry,
  d: D,
  collect?: (this: Gauge<LabelsOf<D>>) => void,
): Gauge<LabelsOf<D>> {
  const config = { name: nameOf(d), help: d.help, labelNames: labels(d), registers: [registry] }
  return new Gauge(collect === undefined ? config : { ...config, collect })
}

/** d's counter on registry. */
export function counter<D extends Definition & { kind: 'counter' }>(registry: Registry, d: D): Counter<LabelsOf<D>> {
  return new Counter({ name: nameOf(d), help: d.help, labelNames: labels(d), registers: [registry] })
}

/** d's histogram on registry, with its buckets. */
export function histogram<D extends Definition & { kind: 'histogram' }>(
  registry: Registry,
  d: D,
): Histogram<LabelsOf<D>> {
  const buckets = [...(d.buckets ?? [])]
  return new Histogram({ name: nameOf(d), help: d.help, labelNames: labels(d), buckets, registers: [registry] })
}

// What the hostile suite's files share: a real agent on a temp box from
// test/helpers/agent.ts `agentBox`, with a log the cases can read (a
// refusal is asserted by the line it logs too), tenants that already carry
// their instance key (so the start-up backfill changes nothing a case
// fingerprints), and the injected request every HTTP case makes.
import fs from 'node:fs/promises'
import path from 'node:path'
import type { DeployStore } from '../../src/domain/ports.js'
import type { IntentRecord, LayoutReport, LegRun } from '../../src/domain/schemas.js'
import { createLogger } from '../../src/logger.js'
import * as helpers from '../helpers/agent.js'
import { fingerprint, type Fingerprint, type FingerprintOptions } from '../helpers/fingerprint.js'
import { Sink } from '../helpers/sink.js'
import type { Scope } from '../helpers/tmp.js'

export interface LogLine {
  level: number
  msg: string
  [field: string]: unknown
}

export interface HostileBox extends helpers.AgentBox {
  /** Every line the agent logged, parsed. */
  lines: () => LogLine[]
  /** The data root and the registry now (plus `also`). */
  fp: (opts?: FingerprintOptions) => Fingerprint
}

export interface HostileBoxOptions {
  env?: Record<string, string>
  /** Used instead of the directory store (an etcd store). */
  store?: DeployStore
  /** Runs before the agent starts, with the box built (tenants, planted files, intents). */
  before?: (b: HostileBox) => Promise<void> | void
  /** Starts the agent and waits until it is ready and its first leg run is over; true by default. */
  start?: boolean
}

/**
 * A scope for a box a whole file shares: call at the top level of the file;
 * its ends run in node:test's top-level `after`. (An `after` called inside a
 * `before` hook would run at the end of that hook.)
 */
export function fileScope(after: (fn: () => Promise<void>) => void): Scope {
  const ends: Array<() => unknown> = []
  after(async () => {
    for (const end of ends) await end()
  })
  return { after: (fn) => ends.push(fn) }
}

export async function hostileBox(t: Scope, opts: HostileBoxOptions = {}): Promise<HostileBox> {
  const sink = new Sink()
  const { store } = opts
  const b = await helpers.agentBox(t, {
    env: opts.env,
    logger: createLogger('info', sink),
    wrapStore: store === undefined ? undefined : () => store,
    stopTimeoutMs: 2000,
  })
  const box: HostileBox = {
    ...b,
    lines: () =>
      sink.text
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l) as LogLine),
    fp: (o) => fingerprint(b.config.dataDir, o),
  }
  await opts.before?.(box)
  if (opts.start !== false) {
    await box.agent.start()
    await settle(box)
  }
  return box
}

/** Waits until the agent is ready and a run of the leg has finished after now: the box is quiet. */
export async function settle(b: HostileBox): Promise<LegRun> {
  return converge(b)
}

/** POST /layout/converge?wait=1: a run that starts after this call, and its results. */
export async function converge(b: HostileBox): Promise<LegRun> {
  const res = await b.app.inject({
    method: 'POST',
    url: '/layout/converge?wait=1&timeout=60',
    remoteAddress: '127.0.0.1',
  })
  if (res.statusCode !== 200) throw new Error(`converge answered ${res.statusCode}: ${res.body}`)
  return res.json<{ run: LegRun }>().run
}

export async function report(b: HostileBox): Promise<LayoutReport> {
  const res = await b.app.inject({ method: 'GET', url: '/layout/status' })
  if (res.statusCode !== 200) throw new Error(`status answered ${res.statusCode}: ${res.body}`)
  return res.json()
}

type Tenants = Parameters<typeof helpers.addFlat>[0]

/** A flat tenant (test/helpers/agent.ts addFlat) with its instance key already there. */
export async function addFlat(b: Tenants, host: string): Promise<void> {
  await helpers.addFlat(b, host)
  await plantKey(b, host)
}

/** A nested tenant (test/helpers/agent.ts addNested) with its instance key already there. */
export async function addNested(b: Tenants, host: string): Promise<void> {
  await helpers.addNested(b, host)
  await plantKey(b, host)
}

async function plantKey(b: Tenants, host: string): Promise<void> {
  const dir = b.registry.get(host)?.dir ?? ''
  await fs.writeFile(path.join(dir, 'instance.env'), 'CARLOS_INSTANCE_KEY=planted\n', { mode: 0o600 })
}

let ids = 0

/** A fresh intent id, sorting after every earlier one of this process. */
export function intentId(): string {
  return `${new Date().toISOString().replace(/[-:]/g, '')}-${process.pid.toString(16)}${String(++ids).padStart(4, '0')}`
}

export function intentRecord(mode: string, extra: Partial<IntentRecord> = {}): IntentRecord {
  return { id: intentId(), mode, force: false, recordedAt: new Date().toISOString(), by: 'hostile@test', ...extra }
}

/** Records an intent through the store (the way `layoutd intent` does). */
export async function recordIntent(
  b: { store: DeployStore },
  mode: 'flat' | 'nested',
  extra: Partial<IntentRecord> = {},
): Promise<IntentRecord> {
  const r = intentRecord(mode, extra)
  await b.store.record(r, AbortSignal.timeout(10_000))
  return r
}

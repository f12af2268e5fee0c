// What a record repair does, decided before anything is written (design
// §7.4): which record `intent quarantine` moves aside, whom its replacement
// addresses, and what `intent history` lists. Pure.
import { errors } from '../errors.js'
import { selectIntent } from './intent.js'
import type { Mode } from './modes.js'
import type { QuarantinedRecord, StoreContents } from './ports.js'
import type { IntentRecord } from './schemas.js'

/** The whole fleet: no box label can be `*`. */
export const FLEET = '*'

export interface RepairAsk {
  id: string
  /** undefined: no replacement. */
  mode: Mode | undefined
  /** A label, FLEET, or undefined: the record's own. */
  address: string | undefined
}

export interface RepairPlan {
  target: IntentRecord | undefined
  replacement: { mode: Mode; box: string | undefined } | undefined
  after: string
}

const whom = (box: string | undefined) => (box === undefined ? 'the whole fleet' : `box ${box}`)

/** Throws `repair_refused` saying why not. */
export function planRepair(contents: StoreContents, ask: RepairAsk): RepairPlan {
  const target = contents.records.find((r) => r.id === ask.id)
  const bad = contents.unreadable.find((u) => u.id === ask.id)
  if (target === undefined && bad === undefined)
    throw errors.repairRefused(`no record ${ask.id} in the store (\`layoutd intent history\` lists them)`)
  const others = contents.unreadable.filter((u) => u.id !== ask.id)
  if (ask.mode !== undefined && others.length > 0)
    throw errors.repairRefused(
      `${others.map((u) => `record ${u.id} (${u.where}: ${u.why})`).join('; ')} cannot be read either, ` +
        `so no box would read the new intent: quarantine ${others.length === 1 ? 'it' : 'them'} first`,
    )
  const remaining = contents.records.filter((r) => r.id !== ask.id)
  if (ask.mode === undefined) return { target, replacement: undefined, after: afterWords(target, remaining) }
  let box: string | undefined
  if (ask.address === FLEET) box = undefined
  else if (ask.address !== undefined) box = ask.address
  else if (target !== undefined) box = target.box
  else
    throw errors.usage(
      `record ${ask.id} cannot be read, so whom it addressed is unknown: give --box LABEL or --fleet for the new one`,
    )
  if (target !== undefined && target.box === undefined && box !== undefined)
    throw errors.repairRefused(
      `record ${ask.id} addresses the whole fleet; one for box ${box} alone would leave the other boxes ` +
        `reading the record before it: give --fleet`,
    )
  if (target?.box !== undefined && box !== undefined && box !== target.box)
    throw errors.repairRefused(
      `record ${ask.id} addresses box ${target.box}; one for box ${box} would leave box ${target.box} ` +
        `reading the record before it: give --box ${target.box} or --fleet`,
    )
  return { target, replacement: { mode: ask.mode, box }, after: '' }
}

function afterWords(target: IntentRecord | undefined, remaining: readonly IntentRecord[]): string {
  if (target === undefined) return 'each box reads the newest readable record addressing it'
  if (target.box !== undefined) {
    const read = selectIntent(remaining, target.box)
    return `box ${target.box} now reads ${read.found ? `record ${read.intent.id} (${read.intent.mode})` : 'none'}`
  }
  const fleet = [...remaining].reverse().find((r) => r.box === undefined)
  return (
    `boxes with no newer record of their own now read ` +
    `${fleet === undefined ? 'none (the deployment default)' : `record ${fleet.id} (${fleet.mode})`}`
  )
}

export function repairWords(id: string, plan: RepairPlan): string {
  const what =
    plan.target === undefined ? 'unreadable record' : `record (${plan.target.mode} for ${whom(plan.target.box)})`
  const r = plan.replacement
  return `${id}, the ${what}` + (r === undefined ? '' : `, with ${r.mode} for ${whom(r.box)} in its place`)
}

export interface HistoryRow {
  id: string
  state: 'recorded' | 'unreadable' | 'quarantined'
  mode: string
  box: string
  by: string
  at: string
  message: string
  note: string
}

function parseAside(text: string): Partial<IntentRecord> {
  try {
    const v = JSON.parse(text) as unknown
    return typeof v === 'object' && v !== null ? v : {}
  } catch {
    return {}
  }
}

const str = (v: unknown): string => (typeof v === 'string' ? v : '-')

/** Newest first, unreadable and quarantined ones too. */
export function historyRows(
  contents: StoreContents,
  aside: readonly QuarantinedRecord[],
  box: string | undefined,
): HistoryRow[] {
  const addresses = (b: unknown) => box === undefined || b === undefined || b === box
  const rows: HistoryRow[] = contents.records
    .filter((r) => addresses(r.box))
    .map((r) => ({
      id: r.id,
      state: 'recorded',
      mode: r.mode,
      box: r.box ?? '(fleet)',
      by: r.by,
      at: r.recordedAt,
      message: r.message ?? '',
      note: '',
    }))
  for (const u of contents.unreadable)
    rows.push({ id: u.id, state: 'unreadable', mode: '-', box: '-', by: '-', at: '-', message: '', note: u.why })
  for (const q of aside) {
    const r = parseAside(q.text)
    if (!addresses(r.box)) continue
    rows.push({
      id: q.id,
      state: 'quarantined',
      mode: str(r.mode),
      box: r.box === undefined ? (r.mode === undefined ? '-' : '(fleet)') : str(r.box),
      by: str(r.by),
      at: str(r.recordedAt),
      message: typeof r.message === 'string' ? r.message : '',
      note: q.where,
    })
  }
  return rows.sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0))
}

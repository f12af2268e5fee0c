// Every interface the domain needs from the outside; infra/ implements them.
import type { BoxSummary, KeptBox } from './box-summary.js'
import type { IntentMode, Mode, Result, RowLayout } from './modes.js'
import type { ReasonCode, Why } from './reason-codes.js'
import type { IntentRecord, Route, RowPaths } from './schemas.js'
import type { RolloutPort } from './rollout.js'

/** pino's shape; the fields say what msg says. */
export interface Logger {
  debug(fields: Record<string, unknown>, msg: string): void
  info(fields: Record<string, unknown>, msg: string): void
  warn(fields: Record<string, unknown>, msg: string): void
  error(fields: Record<string, unknown>, msg: string): void
  /** Absent: every level is written. */
  isLevelEnabled?(level: 'debug' | 'info'): boolean
}

export interface Clock {
  /** Epoch ms: for stamps, never for a duration. */
  now(): number
  /** A clock that never steps, for durations. Absent: now(). */
  monotonic?(): number
  setTimer(ms: number, fn: () => void): () => void
}

export const systemClock: Clock = {
  now: () => Date.now(),
  monotonic: () => performance.now(),
  setTimer(ms, fn) {
    const t = setTimeout(fn, ms)
    t.unref()
    return () => clearTimeout(t)
  },
}

export interface AddOptions {
  /** `path_claimed` for a dir or socket another row claims, checked in the transaction. */
  refuseClaimed?: boolean
}

/** The box's registry (SQLite): synchronous, a local file. */
export interface RouteStore {
  list(): Route[]
  /** Listed again only after another writer's commit. */
  snapshot(): RowsSnapshot
  get(host: string): Route | undefined
  add(route: Route, opts?: AddOptions): void
  /** All or none, in one transaction. */
  addMany(routes: readonly Route[]): void
  remove(host: string): boolean
  /** One transaction (the move's commit point); durable once sync() answers. */
  setPaths(rows: ReadonlyArray<{ host: string } & RowPaths>): void
  /** Strictly increasing across restarts once sync() answers. */
  nextGeneration(): number
  /** Every commit on disk, off the calling thread (design §3.5, §3.6). */
  sync(): Promise<void>
}

/** Where the fleet records layout intents (design §7). */
export interface DeployStore {
  /** Oldest first; throws when unreadable or a record is malformed. */
  list(signal: AbortSignal): Promise<IntentRecord[]>
  record(intent: IntentRecord, signal: AbortSignal): Promise<void>
  /** A hint to read sooner. Absent: poll only. */
  watch?(onChange: () => void, signal: AbortSignal): void
  describe(): string
  /** Which store, with no secret (design §7.7). Absent: describe(). */
  identity?(): string
  close(): Promise<void>
  /** Kept alive until close (design §7.3); publish only changes. */
  publishBox?(summary: BoxSummary, signal: AbortSignal): Promise<void>
  /** A box missing from listBoxes is dead or never ran. */
  readonly tracksBoxes?: boolean
  listBoxes?(signal: AbortSignal): Promise<BoxSummary[]>
  /** Live boxes, and gone ones with their last summary (design §7.3). */
  listKnownBoxes?(signal: AbortSignal): Promise<KeptBox[]>
  /** Throws `box_live` or `unknown_box`. */
  forgetBox?(box: string, signal: AbortSignal): Promise<KeptBox>
  /** An id already gone is no failure. */
  remove?(ids: readonly string[], signal: AbortSignal): Promise<void>
  inspect?(signal: AbortSignal): Promise<StoreContents>
  /** With its replacement, atomically to a reader (design §7.4). */
  quarantine?(id: string, replacement: IntentRecord | undefined, signal: AbortSignal): Promise<string>
  listQuarantined?(signal: AbortSignal): Promise<QuarantinedRecord[]>
  /** Until close (design §7.5); throws naming its holder. */
  claimLabel?(holder: LabelHolder, signal: AbortSignal): Promise<void>
  /** Staged rollouts (design §7.6); etcd only. */
  rollouts?(): RolloutPort
}

export interface UnreadableRecord {
  id: string
  where: string
  why: string
}

export interface StoreContents {
  /** By id, newest last. */
  records: IntentRecord[]
  unreadable: UnreadableRecord[]
}

export interface QuarantinedRecord {
  id: string
  where: string
  text: string
}

export interface LabelHolder {
  box: string
  dataRoot: string
  pid: number
  host: string
  since: string
}

/** null when nested may wake, else why not (design §5.4). */
export interface IsolationGate {
  /** The last verdict, without I/O. */
  check(): string | null
  /** Until every check ran once, a nested host is not judged yet, never refused. */
  judged?(): boolean
}

export interface Classification {
  layout: RowLayout
  code: ReasonCode | ''
  reason: string
}

/** design §3, §4; classify, held and note read memory only, so a wake never waits on disk. */
export interface LayoutPass {
  converge(mode: Mode, opts: { deferAwake: boolean; signal: AbortSignal }): Promise<Result[]>
  /** The soonest deferred host's grace end, or null (design §3 step 2). */
  graceEndsAt?(): number | null
  /** defaultOptedOut: under `none` the default is flat, so a half-done move to nested rolls back. */
  recover(intent: IntentMode, opts?: { defaultOptedOut?: boolean }): Promise<Result[]>
  /** Holds drop under `flat`, and under `none` with the default opted out. */
  restoreHolds(intent: IntentMode, defaultOptedOut?: boolean): Promise<Result[]>
  classify(route: Route, routes: readonly Route[]): Classification
  /** Builds what classify indexes a slice at a time, so no later classify builds it in one stretch. */
  warmClaims?(): Promise<void>
  held(host: string): Why | undefined
  note(host: string): string
  /** Moves with every journal, hold, fence or note change. */
  changes(): number
  /** What classify, held and note go by, for another thread (design §6.2). */
  facts(): PassFacts
}

export interface PassFacts {
  fenced: Array<[string, Why]>
  held: Array<[string, Why]>
  notes: Array<[string, string]>
}

export interface LayoutDirectory {
  /** Run before any read (design §2.1). */
  verifyRoots(): Promise<void>
  journalHosts(): Promise<string[]>
  holdHosts(): Promise<string[]>
}

export interface RowsSnapshot {
  routes: Route[]
  byHost: Pick<ReadonlyMap<string, Route>, 'get'>
}

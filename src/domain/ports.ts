// Every interface the domain needs from the outside. infra/ implements them;
// tests use real adapters, or fakes where the outside thing is the subject.
import type { BoxSummary, KeptBox } from './box-summary.js'
import type { IntentMode, Mode, Result, RowLayout } from './modes.js'
import type { ReasonCode, Why } from './reason-codes.js'
import type { IntentRecord, Route, RowPaths } from './schemas.js'
import type { RolloutPort } from './rollout.js'

/** A structured logger (pino's shape): `msg` is the human line (`layout: …`); fields say the same as data. */
export interface Logger {
  debug(fields: Record<string, unknown>, msg: string): void
  info(fields: Record<string, unknown>, msg: string): void
  warn(fields: Record<string, unknown>, msg: string): void
  error(fields: Record<string, unknown>, msg: string): void
  /** Whether a line at level would be written (pino's own); a logger without it writes every level. */
  isLevelEnabled?(level: 'debug' | 'info'): boolean
}

/** Wall time and timers, injectable so grace and retry can be tested on a fake clock. */
export interface Clock {
  /** The wall clock (ms since the epoch): for stamps shown and persisted, never for a duration. */
  now(): number
  /** A clock that never steps, for durations (a stepped wall clock would stretch them). Absent: the wall clock. */
  monotonic?(): number
  /** Runs fn after ms; the returned function cancels it. */
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

/** How a row is added. */
export interface AddOptions {
  /** Refuse (`path_claimed`) a row whose dir or socket another row claims, checked in the insert's transaction. */
  refuseClaimed?: boolean
}

/** The box's registry (SQLite). Synchronous: it is a local database file. */
export interface RouteStore {
  list(): Route[]
  /** The rows, listed again only when someone else has committed since the last look. */
  snapshot(): RowsSnapshot
  get(host: string): Route | undefined
  /** Inserts a row; throws a coded error when the host exists. */
  add(route: Route, opts?: AddOptions): void
  /** Inserts every row in one transaction, or none, each checked as add checks one. */
  addMany(routes: readonly Route[]): void
  /** Removes a row; false when there was none. */
  remove(host: string): boolean
  /** Rewrites many rows' paths in one transaction (the move's commit point); durable once sync() answers. */
  setPaths(rows: ReadonlyArray<{ host: string } & RowPaths>): void
  /** The next fence generation; strictly increasing across restarts once sync() answers. */
  nextGeneration(): number
  /** Every commit so far on disk, off the calling thread (design §3.5, §3.6). */
  sync(): Promise<void>
}

/** The deploy store where the fleet records layout intents (design §7). */
export interface DeployStore {
  /** Every record, oldest first. Throws when the store cannot be read or a record is malformed. */
  list(signal: AbortSignal): Promise<IntentRecord[]>
  /** Records an intent durably. */
  record(intent: IntentRecord, signal: AbortSignal): Promise<void>
  /** Calls onChange soon after a record lands, until signal aborts: a hint to read sooner. Absent: poll only. */
  watch?(onChange: () => void, signal: AbortSignal): void
  /** Where the store is, for logs and errors. */
  describe(): string
  /** Which store this is, with no secret in it (design §7.7). Absent: `describe()` stands in. */
  identity?(): string
  close(): Promise<void>
  /** Publishes this box's summary (design §7.3), kept alive until close; the caller publishes only changes. */
  publishBox?(summary: BoxSummary, signal: AbortSignal): Promise<void>
  /** Every live agent publishes here (etcd): a box missing from listBoxes has never run, or is dead. */
  readonly tracksBoxes?: boolean
  /** The summaries of the live boxes, sorted by label. */
  listBoxes?(signal: AbortSignal): Promise<BoxSummary[]>
  /** Every box the store knows, by label: live ones, and gone ones with their last summary (design §7.3). */
  listKnownBoxes?(signal: AbortSignal): Promise<KeptBox[]>
  /** Forgets a gone box's last summary; throws `box_live` or `unknown_box`. */
  forgetBox?(box: string, signal: AbortSignal): Promise<KeptBox>
  /** Removes the records of these ids (intent prune); an id already gone is no failure. */
  remove?(ids: readonly string[], signal: AbortSignal): Promise<void>
  /** Every readable record, and where and why each other is not (list throws on the first). */
  inspect?(signal: AbortSignal): Promise<StoreContents>
  /** Moves record `id` aside, recording any replacement with no moment a reader finds neither (design §7.4). */
  quarantine?(id: string, replacement: IntentRecord | undefined, signal: AbortSignal): Promise<string>
  /** The records moved aside, as their bytes say, with where each is. */
  listQuarantined?(signal: AbortSignal): Promise<QuarantinedRecord[]>
  /** Takes this box's label until close (design §7.5), or throws naming its holder. Absent: a one-box store. */
  claimLabel?(holder: LabelHolder, signal: AbortSignal): Promise<void>
  /** The staged rollouts (design §7.6): etcd keeps them; the directory store, serving one box, does not. */
  rollouts?(): RolloutPort
}

/** A record the store holds but cannot read. */
export interface UnreadableRecord {
  /** The id its name or key gives. */
  id: string
  /** The file or key, for the operator. */
  where: string
  why: string
}

export interface StoreContents {
  /** Sorted by id, newest last. */
  records: IntentRecord[]
  unreadable: UnreadableRecord[]
}

/** A record moved aside by `intent quarantine`: its id, where it is, and its bytes as text. */
export interface QuarantinedRecord {
  id: string
  where: string
  text: string
}

/** Who holds a box label: the agent's identity, said by whoever is refused it. */
export interface LabelHolder {
  box: string
  dataRoot: string
  pid: number
  host: string
  /** When the agent took the label (RFC 3339). */
  since: string
}

/** The isolation gate (`nestedOK`): null when nested instances may wake, else why not. */
export interface IsolationGate {
  /** The last verdict, without I/O: what a wake or the status report sees. */
  check(): string | null
  /** Whether every check has run once; before, a nested host is not yet judged, not refused (design §5.4). */
  judged?(): boolean
}

/** What the status report needs to know about one host from the pass. */
export interface Classification {
  layout: RowLayout
  /** The reason's code; empty when there is no reason. */
  code: ReasonCode | ''
  reason: string
}

/**
 * The layout pass (design §3, §4). Only the leg converges; recover and
 * restoreHolds run at start-up; classify, held and note read memory only,
 * so the report and a wake never wait on the disk.
 */
export interface LayoutPass {
  converge(mode: Mode, opts: { deferAwake: boolean; signal: AbortSignal }): Promise<Result[]>
  /** When the soonest deferred host's grace ends, or null: the leg comes back then (design §3 step 2). */
  graceEndsAt?(): number | null
  /** defaultOptedOut: under `none`, the default is flat, so a half-done move to nested is rolled back. */
  recover(intent: IntentMode, opts?: { defaultOptedOut?: boolean }): Promise<Result[]>
  /** Holds are dropped under `flat`, and under `none` when the default is opted out. */
  restoreHolds(intent: IntentMode, defaultOptedOut?: boolean): Promise<Result[]>
  classify(route: Route, routes: readonly Route[]): Classification
  /** The hold's reason when the host is held down after a refused move. */
  held(host: string): Why | undefined
  /** The row's note (what was set aside, and when), or ''. */
  note(host: string): string
  /** Moves whenever a journal, hold, fence or note changes: until then the report need not be rebuilt. */
  changes(): number
  /** What classify, held and note go by, at this tick, for a report built on another thread (design §6.2). */
  facts(): PassFacts
}

/** What the pass says of the hosts it keeps down or noted, in one tick: with that tick's rows, every row's word. */
export interface PassFacts {
  /** Every host the pass fences (a journal, one kept, a hold, the fence table), with why. */
  fenced: Array<[string, Why]>
  /** Every held host, with its hold's reason (what `held` answers). */
  held: Array<[string, Why]>
  /** Every row's note (what was set aside for it, and when). */
  notes: Array<[string, string]>
}

/** What `<data>/layout` holds, listed at start and by the unmanaged report. */
export interface LayoutDirectory {
  /** Refuses a D/layout, D/apps or D/nested that is not a real directory; run before any read (design §2.1). */
  verifyRoots(): Promise<void>
  journalHosts(): Promise<string[]>
  holdHosts(): Promise<string[]>
}

/** The registry's rows at one moment, listed once, and the same rows by host. */
export interface RowsSnapshot {
  routes: Route[]
  byHost: Pick<ReadonlyMap<string, Route>, 'get'>
}

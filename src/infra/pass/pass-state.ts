// What the pass keeps of `<data>/layout` in memory, in step with the disk:
// journals, holds, aside notes and the fences they imply (design §1, §3
// step 3). Each opens and closes here, on disk and in memory together.
import type { FenceTable } from '../../domain/fence.js'
import type { PassFacts } from '../../domain/ports.js'
import { journalPath, type Dirs } from '../../domain/paths.js'
import { why, type Why } from '../../domain/reason-codes.js'
import { errorMessage } from '../../errors.js'
import { loadAsideNotes, markerCode, readHold, removeHolds, writeHolds, type Hold, type HoldMarker } from './holds.js'
import { writeBatchJournal } from './batch-journal.js'
import { JournalFiles } from './journal-files.js'
import { batchJournalName, hostJournalName, removeJournalFiles, writeJournals, type Journal } from './journal.js'
import { defaultSlicer, type Slicer } from '../../domain/loop-turns.js'

/** Why a revert under an unreadable intent is held down rather than released flat (design §4). */
export const HOLD_AFTER_REVERT =
  'revert completed while the intent was unreadable: ' +
  'kept down rather than released flat, since the fleet may want it nested'

export type Unsettled = Array<{ host: string; why: string }>

export class PassState {
  readonly #dirs: Dirs
  readonly #fence: FenceTable
  readonly #inFlight = new Map<string, Journal>()
  /** Journals recovery could not finish: fenced, with why. */
  readonly #kept = new Map<string, Why>()
  readonly #holds = new Map<string, Hold>()
  readonly #notes = new Map<string, string>()
  readonly #files = new JournalFiles()
  /** Hosts whose move has ended while a file still names them. */
  readonly #closed = new Set<string>()
  readonly #liftWhenGone = new Set<string>()
  /** Moves whenever a journal, hold, fence or note changes: the report is built again only then. */
  #changes = 0

  readonly #slicer: Slicer

  constructor(dirs: Dirs, fence: FenceTable, slicer: Slicer = defaultSlicer) {
    this.#dirs = dirs
    this.#fence = fence
    this.#slicer = slicer
  }

  async load(holdHosts: readonly string[]): Promise<void> {
    for (const host of holdHosts) {
      const hold = await readHold(this.#dirs, host)
      if (hold !== undefined) this.#holds.set(host, hold)
    }
    for (const [host, note] of await loadAsideNotes(this.#dirs)) this.#notes.set(host, note)
    this.#changes++
  }

  get changes(): number {
    return this.#changes
  }

  // ---- what the report, a wake and the pass ask -------------------------

  fencedReason(host: string): Why | undefined {
    const kept = this.#kept.get(host)
    if (kept !== undefined) return kept
    const journal = this.#inFlight.get(host)
    if (journal !== undefined)
      return why('in_flight', `layout move to ${journal.to} in flight; see ${journalPath(this.#dirs, host)}`)
    const hold = this.#holds.get(host)
    if (hold !== undefined) {
      if (hold.corrupt) return why(hold.code, hold.reason)
      return why(
        hold.code,
        hold.code === 'revert_unreadable'
          ? `held down: ${hold.reason}`
          : `held down after a refused move to ${hold.to}: ${hold.reason}`,
      )
    }
    const generation = this.#fence.fenced(host)
    if (generation !== undefined) return why('fenced_for_move', `fenced for its move (generation ${generation})`)
    return undefined
  }

  hold(host: string): Hold | undefined {
    return this.#holds.get(host)
  }

  /** Every fence reason, hold and note this tick, for a report built on another thread (design §6.2). */
  facts(): PassFacts {
    const hosts = new Set([
      ...this.#kept.keys(),
      ...this.#inFlight.keys(),
      ...this.#holds.keys(),
      ...this.#fence.hosts(),
    ])
    const fenced: PassFacts['fenced'] = []
    for (const host of hosts) {
      const reason = this.fencedReason(host)
      if (reason !== undefined) fenced.push([host, reason])
    }
    return {
      fenced,
      held: [...this.#holds].map(([host, hold]) => [host, why(hold.code, hold.reason)]),
      notes: [...this.#notes],
    }
  }

  holds(): Hold[] {
    return [...this.#holds.values()].sort((a, b) => (a.host < b.host ? -1 : 1))
  }

  note(host: string): string | undefined {
    return this.#notes.get(host)
  }

  journaled(host: string): boolean {
    return this.#inFlight.has(host) || this.#kept.has(host)
  }

  inFlight(host: string): boolean {
    return this.#inFlight.has(host)
  }

  keptReason(host: string): Why | undefined {
    return this.#kept.get(host)
  }

  keptHosts(): string[] {
    return [...this.#kept.keys()]
  }

  fencedUnder(host: string): number | undefined {
    return this.#fence.fenced(host)
  }

  // ---- journals ---------------------------------------------------------

  /** Writes a batch's (or a lone host's) journal; in flight first, so settle cleans up after a failure. */
  async openJournals(journals: readonly Journal[]): Promise<void> {
    const first = journals[0]
    if (first === undefined) return
    const name = journals.length === 1 ? hostJournalName(first.host) : batchJournalName(first.generation)
    this.#addFile(name, new Map(journals.map((j) => [j.host, j])))
    for (const journal of journals) this.#inFlight.set(journal.host, journal)
    this.#changes++
    try {
      if (journals.length === 1) await writeJournals(this.#dirs, journals, this.#slicer)
      else await writeBatchJournal(this.#dirs, name, journals, this.#slicer)
    } catch (err) {
      // The file may have reached the disk: it goes at the next settle.
      await this.closeJournals(journals.map((j) => j.host))
      throw err
    }
  }

  knowFile(name: string, hosts: readonly string[], moves: readonly Journal[] | undefined): void {
    this.#addFile(name, moves === undefined ? undefined : new Map(moves.map((j) => [j.host, j])), hosts)
  }

  /** Forgets every file not in names: an operator removed it. */
  forgetFilesBut(names: ReadonlySet<string>): void {
    for (const name of this.#files.names()) if (!names.has(name)) this.#dropFile(name)
  }

  named(host: string): boolean {
    return this.#files.named(host)
  }

  filesNaming(host: string): string[] {
    return this.#files.naming(host)
  }

  resumeJournal(journal: Journal): void {
    this.#kept.delete(journal.host)
    this.#closed.delete(journal.host)
    this.#inFlight.set(journal.host, journal)
    this.#changes++
  }

  async closeJournals(hosts: readonly string[]): Promise<void> {
    for (const host of hosts) {
      this.#inFlight.delete(host)
      if (this.named(host)) this.#closed.add(host)
    }
    this.#changes++
    return Promise.resolve()
  }

  keepJournal(host: string, why: Why): void {
    this.#inFlight.delete(host)
    this.#closed.delete(host)
    // Fenced until recovery or an operator lets it go.
    this.#liftWhenGone.delete(host)
    this.#kept.set(host, why)
    this.#changes++
  }

  /** Removes each file whose hosts all ended (kept hosts' moves rewritten first); failures keep hosts fenced. */
  async settle(): Promise<Unsettled> {
    const { going, own, stuck } = this.#files.plan(
      (h) => this.#inFlight.has(h),
      (h) => this.#closed.has(h),
    )
    const unsettled: Unsettled = [...stuck]
    try {
      if (own.length > 0) {
        await writeJournals(this.#dirs, own, this.#slicer)
        for (const j of own) this.#addFile(hostJournalName(j.host), new Map([[j.host, j]]))
      }
      await removeJournalFiles(this.#dirs, going)
      for (const name of going) this.#dropFile(name)
    } catch (err) {
      for (const name of going)
        for (const h of this.#files.hostsOf(name))
          if (this.#closed.has(h))
            unsettled.push({ host: h, why: `its journal could not be removed (${errorMessage(err)})` })
    }
    for (const { host, why: reason } of unsettled) this.keepJournal(host, why('journal_kept', reason))
    this.#changes++
    return unsettled
  }

  /** Nothing is lifted: the file is there. */
  #addFile(name: string, moves: ReadonlyMap<string, Journal> | undefined, hosts?: Iterable<string>): void {
    this.#files.add(name, moves, hosts)
  }

  #dropFile(name: string): void {
    const freed = this.#files.drop(name)
    const lift: string[] = []
    for (const h of freed) {
      this.#closed.delete(h)
      if (this.#liftWhenGone.delete(h)) lift.push(h)
    }
    if (lift.length > 0) this.#fence.lift(lift)
  }

  /** An operator removed a kept journal: the host wakes as its row says, unless a hold keeps it down. */
  releaseKept(host: string): void {
    this.#kept.delete(host)
    if (!this.#holds.has(host)) this.#fence.lift([host])
    this.#changes++
  }

  // ---- holds ------------------------------------------------------------

  async writeHolds(markers: readonly HoldMarker[]): Promise<void> {
    await writeHolds(this.#dirs, markers)
    for (const marker of markers)
      this.#holds.set(marker.host, {
        host: marker.host,
        to: marker.to,
        code: markerCode(marker),
        reason: marker.reason,
        corrupt: false,
      })
    this.#changes++
  }

  /** Removes hosts' hold markers, then forgets them; their fences stay for the caller to lift. */
  async dropHolds(hosts: readonly string[]): Promise<void> {
    await removeHolds(this.#dirs, hosts)
    for (const host of hosts) this.#holds.delete(host)
    this.#changes++
  }

  async releaseHolds(hosts: readonly string[]): Promise<void> {
    await this.dropHolds(hosts)
    this.#fence.lift(hosts)
    this.#changes++
  }

  // ---- fences and notes -------------------------------------------------

  fence(hosts: readonly string[], generation: number): void {
    for (const h of hosts) this.#liftWhenGone.delete(h)
    this.#fence.fence(hosts, generation)
    this.#changes++
  }

  /** Lifts the fences of hosts; one a journal file still names is lifted when the file goes (settle). */
  lift(hosts: readonly string[]): void {
    const now: string[] = []
    for (const h of hosts) {
      if (this.named(h)) this.#liftWhenGone.add(h)
      else now.push(h)
    }
    this.#fence.lift(now)
    this.#changes++
  }

  setNote(host: string, note: string): void {
    this.#notes.set(host, note)
    this.#changes++
  }
}

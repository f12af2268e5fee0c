// What the pass keeps of `<data>/layout` in memory, kept in step with the
// disk: the journals a run is carrying out, the journals recovery had to
// keep (with why), the hold markers, the aside notes, and the fences that
// follow from them (design §1, §3 step 3). Every journal, hold and fence is
// opened and closed here, on disk and in memory together, so the two never
// drift apart; the rest of the pass only asks and tells.
import type { FenceTable } from '../../domain/fence.js'
import { journalPath, type Dirs } from '../../domain/paths.js'
import { loadAsideNotes, readHold, removeHolds, writeHolds, type Hold, type HoldMarker } from './holds.js'
import { removeJournals, writeJournals, type Journal } from './journal.js'
import { defaultSlicer, type Slicer } from './sliced-fs.js'

/** The reason of the hold a revert completed under an unreadable intent leaves (design §4). */
export const HOLD_AFTER_REVERT =
  'revert completed while the intent was unreadable: kept down rather than released flat, since the fleet may want it nested'

export class PassState {
  readonly #dirs: Dirs
  readonly #fence: FenceTable
  /** Journals on disk whose move this run is carrying out. */
  readonly #inFlight = new Map<string, Journal>()
  /** Hosts whose journal stays on disk because recovery could not finish it: fenced, with why. */
  readonly #kept = new Map<string, string>()
  readonly #holds = new Map<string, Hold>()
  readonly #notes = new Map<string, string>()
  /** Moves whenever a journal, hold, fence or note changes: the report is built again only then. */
  #changes = 0

  readonly #slicer: Slicer

  constructor(dirs: Dirs, fence: FenceTable, slicer: Slicer = defaultSlicer) {
    this.#dirs = dirs
    this.#fence = fence
    this.#slicer = slicer
  }

  /** Reads the hold markers of hosts, and every aside note, from disk (once, at start). */
  async load(holdHosts: readonly string[]): Promise<void> {
    for (const host of holdHosts) {
      const hold = await readHold(this.#dirs, host)
      if (hold !== undefined) this.#holds.set(host, hold)
    }
    for (const [host, note] of await loadAsideNotes(this.#dirs)) this.#notes.set(host, note)
    this.#changes++
  }

  /** A count that moves with every change below: what classify, held and note answer may differ once it has. */
  get changes(): number {
    return this.#changes
  }

  // ---- what the report, a wake and the pass ask -------------------------

  /** Why host must not wake, or undefined when nothing fences it. */
  fencedReason(host: string): string | undefined {
    const kept = this.#kept.get(host)
    if (kept !== undefined) return kept
    const journal = this.#inFlight.get(host)
    if (journal !== undefined) return `layout move to ${journal.to} in flight; see ${journalPath(this.#dirs, host)}`
    const hold = this.#holds.get(host)
    if (hold !== undefined) {
      if (hold.corrupt) return hold.reason
      return hold.reason === HOLD_AFTER_REVERT
        ? `held down: ${hold.reason}`
        : `held down after a refused move to ${hold.to}: ${hold.reason}`
    }
    const generation = this.#fence.fenced(host)
    if (generation !== undefined) return `fenced for its move (generation ${generation})`
    return undefined
  }

  hold(host: string): Hold | undefined {
    return this.#holds.get(host)
  }

  /** Every hold, by host. */
  holds(): Hold[] {
    return [...this.#holds.values()].sort((a, b) => (a.host < b.host ? -1 : 1))
  }

  note(host: string): string | undefined {
    return this.#notes.get(host)
  }

  /** Whether a journal on disk governs host: one a run is carrying out, or one recovery kept. */
  journaled(host: string): boolean {
    return this.#inFlight.has(host) || this.#kept.has(host)
  }

  inFlight(host: string): boolean {
    return this.#inFlight.has(host)
  }

  /** Why recovery keeps host's journal, or undefined. */
  keptReason(host: string): string | undefined {
    return this.#kept.get(host)
  }

  keptHosts(): string[] {
    return [...this.#kept.keys()]
  }

  /** The generation host is fenced under, or undefined. */
  fencedUnder(host: string): number | undefined {
    return this.#fence.fenced(host)
  }

  // ---- journals ---------------------------------------------------------

  /** Writes the journals (one directory fsync), then records their moves as in flight. */
  async openJournals(journals: readonly Journal[]): Promise<void> {
    await writeJournals(this.#dirs, journals, this.#slicer)
    for (const journal of journals) this.#inFlight.set(journal.host, journal)
    this.#changes++
  }

  /** Takes up a journal found on disk (recovery): its move is in flight again, and no longer kept. */
  resumeJournal(journal: Journal): void {
    this.#kept.delete(journal.host)
    this.#inFlight.set(journal.host, journal)
    this.#changes++
  }

  /** Removes the journals of hosts (one directory fsync), then forgets them. When the removal throws, they are still in flight. */
  async closeJournals(hosts: readonly string[]): Promise<void> {
    await removeJournals(this.#dirs, hosts, this.#slicer)
    for (const host of hosts) this.#inFlight.delete(host)
    this.#changes++
  }

  /** Host's journal stays on disk for recovery: its move is no longer in flight, and it is fenced with why. */
  keepJournal(host: string, why: string): void {
    this.#inFlight.delete(host)
    this.#kept.set(host, why)
    this.#changes++
  }

  /**
   * A kept journal an operator has removed: they decided, and the host
   * wakes as its row says, unless a hold marker still holds it down.
   */
  releaseKept(host: string): void {
    this.#kept.delete(host)
    if (!this.#holds.has(host)) this.#fence.lift([host])
    this.#changes++
  }

  // ---- holds ------------------------------------------------------------

  /** Writes the hold markers (one directory fsync), then records the holds. */
  async writeHolds(markers: readonly HoldMarker[]): Promise<void> {
    await writeHolds(this.#dirs, markers)
    for (const marker of markers) this.#holds.set(marker.host, { host: marker.host, to: marker.to, reason: marker.reason, corrupt: false })
    this.#changes++
  }

  /** Removes the hold markers of hosts, then forgets the holds. Their fences stay: the caller lifts them when it may. */
  async dropHolds(hosts: readonly string[]): Promise<void> {
    await removeHolds(this.#dirs, hosts)
    for (const host of hosts) this.#holds.delete(host)
    this.#changes++
  }

  /** Drops the holds of hosts and lifts their fences: they may wake. */
  async releaseHolds(hosts: readonly string[]): Promise<void> {
    await this.dropHolds(hosts)
    this.#fence.lift(hosts)
    this.#changes++
  }

  // ---- fences and notes -------------------------------------------------

  fence(hosts: readonly string[], generation: number): void {
    this.#fence.fence(hosts, generation)
    this.#changes++
  }

  lift(hosts: readonly string[]): void {
    this.#fence.lift(hosts)
    this.#changes++
  }

  /** The note a row carries after something was set aside for it. */
  setNote(host: string, note: string): void {
    this.#notes.set(host, note)
    this.#changes++
  }
}

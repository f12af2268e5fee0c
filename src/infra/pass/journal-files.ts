// The journal files of `<data>/layout` as the pass knows them (design §3.3):
// which hosts each file names, and which files name each host. A batch's file
// goes once every host it names has ended, a kept host first given its own.
import { samePaths } from '../../domain/pass-plan.js'
import { hostJournalName, type Journal } from './journal.js'

/** Same move, generation and time aside (a kept host's own copy of a batch's move). */
export function sameMove(a: Journal, b: Journal): boolean {
  return a.host === b.host && a.to === b.to && samePaths(a.from, b.from) && samePaths(a.dest, b.dest)
}

interface JournalFile {
  hosts: Set<string>
  /** Undefined when the file cannot be acted on: kept whole for an operator. */
  moves: Map<string, Journal> | undefined
}

/** The files that go, the own journals written first, the ended hosts a staying file names. */
export interface SettlePlan {
  going: string[]
  own: Journal[]
  stuck: Array<{ host: string; why: string }>
}

export class JournalFiles {
  readonly #files = new Map<string, JournalFile>()
  readonly #namedIn = new Map<string, Set<string>>()

  add(
    name: string,
    moves: ReadonlyMap<string, Journal> | undefined,
    hosts: Iterable<string> = moves?.keys() ?? [],
  ): void {
    this.drop(name)
    const file: JournalFile = { hosts: new Set(hosts), moves: moves === undefined ? undefined : new Map(moves) }
    this.#files.set(name, file)
    for (const h of file.hosts) {
      let set = this.#namedIn.get(h)
      if (set === undefined) this.#namedIn.set(h, (set = new Set()))
      set.add(name)
    }
  }

  /** Forgets a file; answers the hosts no file names any more. */
  drop(name: string): string[] {
    const file = this.#files.get(name)
    if (file === undefined) return []
    this.#files.delete(name)
    const freed: string[] = []
    for (const h of file.hosts) {
      const set = this.#namedIn.get(h)
      set?.delete(name)
      if (set !== undefined && set.size > 0) continue
      this.#namedIn.delete(h)
      freed.push(h)
    }
    return freed
  }

  hostsOf(name: string): string[] {
    return [...(this.#files.get(name)?.hosts ?? [])]
  }

  names(): string[] {
    return [...this.#files.keys()]
  }

  named(host: string): boolean {
    return (this.#namedIn.get(host)?.size ?? 0) > 0
  }

  naming(host: string): string[] {
    return [...(this.#namedIn.get(host) ?? [])]
  }

  /**
   * Files whose hosts all ended or are kept, with the own journals the kept hosts need first; a file that
   * cannot be so rewritten stays, its ended hosts with it.
   */
  plan(inFlight: (host: string) => boolean, ended: (host: string) => boolean): SettlePlan {
    const out: SettlePlan = { going: [], own: [], stuck: [] }
    for (const [name, file] of this.#files) {
      const hosts = [...file.hosts]
      if (hosts.some(inFlight) || !hosts.some(ended)) continue
      const copies =
        file.moves === undefined
          ? undefined
          : this.#ownCopies(
              name,
              file.moves,
              hosts.filter((h) => !ended(h)),
            )
      if (copies === undefined) {
        for (const h of hosts.filter(ended))
          out.stuck.push({ host: h, why: `${name} also names hosts it cannot be rewritten for, so it stays` })
        continue
      }
      out.own.push(...copies)
      out.going.push(name)
    }
    return out
  }

  #ownCopies(name: string, moves: ReadonlyMap<string, Journal>, kept: readonly string[]): Journal[] | undefined {
    const out: Journal[] = []
    for (const host of kept) {
      const move = moves.get(host)
      if (move === undefined || name === hostJournalName(host)) return undefined
      const others = this.naming(host).filter((n) => n !== name)
      if (others.length === 0) out.push(move)
      else if (!others.every((n) => this.#sameIn(n, move))) return undefined
    }
    return out
  }

  #sameIn(name: string, move: Journal): boolean {
    const m = this.#files.get(name)?.moves?.get(move.host)
    return m !== undefined && sameMove(m, move)
  }
}

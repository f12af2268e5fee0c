// The grant auditor: an activator (bench/soak-activator.ts) that claims
// random tenants of a box throughout a scenario, and checks every grant
// against the disk while its claim stands, as the tenant would find its
// files: the granted dir is a real directory holding the tree made at
// setup, the other shape's dir is absent, and no journal or hold marker
// names the host (design §6: a yes is a fact about the disk). It reads
// nothing of the agent's own state, so a registry restored from an old copy
// or a journal removed by hand cannot make it agree with a wrong answer.
import fs from 'node:fs'
import path from 'node:path'
import type { WakeGrant } from '../../src/agent-api.js'
import { pathsFor, type Dirs } from '../../src/domain/paths.js'
import { errorMessage } from '../../src/errors.js'
import { exists, layoutFiles, rng, treePrint } from '../../bench/crash.js'
import { SoakActivator } from '../../bench/soak-activator.js'

export interface AuditedTenant {
  host: string
  /** treePrint(dir).hash of its tree when it was made. */
  hash: string
}

export interface AuditCounts {
  claims: number
  grants: number
  /** Refusals by the reason's code. */
  refused: Record<string, number>
  /** Trees hashed at grant time. */
  treesChecked: number
  wrongGrants: string[]
  /** Answers outside the contract. */
  errors: string[]
}

/** Why a grant is wrong by the disk alone, or undefined when the files are where it says, and only there. */
export function placementProblem(dirs: Dirs, host: string, g: WakeGrant): string | undefined {
  const mode = (['flat', 'nested'] as const).find((m) => pathsFor(dirs, host, m).dir === g.dir)
  if (mode === undefined) return `granted ${g.dir}, neither of its layouts' directories`
  if (g.layout !== mode) return `granted as ${g.layout} at its ${mode} paths`
  const st = fs.lstatSync(g.dir, { throwIfNoEntry: false })
  if (st === undefined) return `granted ${g.dir}, which does not exist`
  if (!st.isDirectory()) return `granted ${g.dir}, which is not a directory`
  const other = pathsFor(dirs, host, mode === 'flat' ? 'nested' : 'flat').dir
  if (exists(other)) return `granted ${g.dir} while ${other} exists too`
  const layout = layoutFiles(dirs)
  if (layout.journals.has(host)) return 'granted while a journal names it'
  if (layout.holds.includes(host)) return 'granted while a hold marker names it'
  return undefined
}

/** The auditor: start it, hand its url to the agent as CARLOS_ACTIVATOR_URL, attach each life of the agent. */
export class GrantAuditor {
  readonly #act: SoakActivator
  readonly #treesChecked: { n: number }

  private constructor(act: SoakActivator, trees: { n: number }) {
    this.#act = act
    this.#treesChecked = trees
  }

  static async start(opts: {
    dirs: Dirs
    tenants: readonly AuditedTenant[]
    seed: number
    claimers?: number
    /** The agent's token, where mutations need one; read when a claim is sent. */
    token?: () => string | undefined
  }): Promise<GrantAuditor> {
    const hashes = new Map(opts.tenants.map((t) => [t.host, t.hash]))
    const trees = { n: 0 }
    const atGrant = (host: string, g: WakeGrant): string | undefined => {
      try {
        const problem = placementProblem(opts.dirs, host, g)
        if (problem !== undefined) return `${host}: ${problem} (grant ${JSON.stringify(g)})`
        trees.n++
        if (treePrint(g.dir).hash !== hashes.get(host)) return `${host}: the tree at ${g.dir} is not the tenant's`
        return undefined
      } catch (err) {
        return `${host}: checking the grant failed: ${errorMessage(err)}`
      }
    }
    const atRelease = (host: string, g: WakeGrant): string | undefined => {
      try {
        const problem = placementProblem(opts.dirs, host, g)
        return problem === undefined ? undefined : `${host}: before its release: ${problem}`
      } catch (err) {
        return `${host}: checking before the release failed: ${errorMessage(err)}`
      }
    }
    const act = await SoakActivator.start({
      hosts: opts.tenants.map((t) => t.host),
      random: rng(opts.seed),
      claimers: opts.claimers ?? 4,
      runMs: [50, 600],
      longRuns: 0.05,
      longRunMs: [2000, 4000],
      atGrant,
      atRelease,
      ...(opts.token === undefined ? {} : { token: opts.token }),
    })
    return new GrantAuditor(act, trees)
  }

  /** Where the agent asks for stops. */
  get url(): string {
    return this.#act.url
  }

  get counts(): AuditCounts {
    const c = this.#act.counts
    return {
      claims: c.claims,
      grants: c.grants,
      refused: { ...c.refused },
      treesChecked: this.#treesChecked.n,
      wrongGrants: [...c.wrongGrants],
      errors: [...c.errors],
    }
  }

  /** A new life of the agent is ready at url: its awake set, then claims. */
  attach(url: string): Promise<void> {
    return this.#act.attach(url)
  }

  /** The agent is about to be killed or stopped. */
  losing(): void {
    this.#act.losing()
  }

  detach(): Promise<void> {
    return this.#act.detach()
  }

  /** No more claims; every run ended and released; an empty awake set sent. */
  drain(): Promise<void> {
    return this.#act.drain()
  }

  close(): Promise<void> {
    return this.#act.close()
  }
}

/** The tenants of a world as the auditor knows them: each host and its tree's hash. */
export function audited(tenants: ReadonlyArray<{ host: string; hash: string }>): AuditedTenant[] {
  return tenants.map(({ host, hash }) => ({ host, hash }))
}

/** The layout directory's batch journals (`_batch-N.journal`), by path. */
export function batchJournals(dirs: Dirs): string[] {
  const dir = path.join(dirs.dataDir, 'layout')
  return fs
    .readdirSync(dir)
    .filter((n) => n.startsWith('_batch-') && n.endsWith('.journal'))
    .map((n) => path.join(dir, n))
}

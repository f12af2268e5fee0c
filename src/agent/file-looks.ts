// The agent's last look at each row's files (design §6.1): taken at start,
// after every run of the leg and by every wake that looks.
import type { Classification, LayoutPass, Logger, RowsSnapshot } from '../domain/ports.js'
import { activatorManaged, type Dirs } from '../domain/paths.js'
import type { Why } from '../domain/reason-codes.js'
import { filesTarget, filesWhy, lookFits, type FilesLook, type FilesTarget } from '../domain/row-files.js'
import type { Route } from '../domain/schemas.js'
import { errorMessage } from '../errors.js'
import { lookAtAll } from '../infra/row-files.js'
import type { ReportPass } from '../report/report-view.js'

export interface FileLooksDeps {
  dirs: Dirs
  registry: { snapshot(): RowsSnapshot }
  /** A look at a host mid-move says nothing of where its files rest. */
  fenced: (host: string) => boolean
  logger: Logger
  lookAll?: (targets: readonly FilesTarget[]) => Promise<FilesLook[]>
}

interface Wrong {
  look: FilesLook
  why: Why
}

export class FileLooks {
  readonly #deps: FileLooksDeps
  /** Hosts whose last look found their files elsewhere: few, none on a healthy box. */
  readonly #wrong = new Map<string, Wrong>()
  #version = 0
  /** A call while one runs makes one more after it. */
  #every: Promise<void> | null = null
  #again = false

  constructor(deps: FileLooksDeps) {
    this.#deps = deps
  }

  /** Moves whenever wrong() may have: the report's version follows it. */
  get version(): number {
    return this.#version
  }

  note(host: string, look: FilesLook): void {
    if (this.#deps.fenced(host)) return
    const why = filesWhy(look)
    if (why === null) {
      if (this.#wrong.delete(host)) this.#version++
      return
    }
    const was = this.#wrong.get(host)
    if (was !== undefined && was.why.code === why.code && lookFits(was.look, look)) return
    this.#wrong.set(host, { look, why })
    this.#version++
  }

  last(host: string): FilesLook | undefined {
    return this.#wrong.get(host)?.look
  }

  /** By the last look at route's paths. */
  wrong(route: Route): Why | undefined {
    const w = this.#wrong.get(route.host)
    if (w === undefined) return undefined
    const target = filesTarget(this.#deps.dirs, route)
    return target !== null && lookFits(w.look, target) ? w.why : undefined
  }

  /** Never rejects: a failure is logged and the last looks stand. */
  lookAtEvery(): Promise<void> {
    if (this.#every !== null) {
      this.#again = true
      return this.#every
    }
    const run = async (): Promise<void> => {
      do {
        this.#again = false
        await this.#lookOnce().catch((err: unknown) => {
          this.#deps.logger.error({ err }, `layout: looking at the rows' files failed: ${errorMessage(err)}`)
        })
      } while (this.#again)
    }
    const every = (this.#every = run().finally(() => {
      this.#every = null
    }))
    return every
  }

  async #lookOnce(): Promise<void> {
    const { dirs, registry } = this.#deps
    const { routes } = registry.snapshot()
    const hosts: string[] = []
    const targets: FilesTarget[] = []
    for (const route of routes) {
      if (!activatorManaged(route)) continue
      const target = filesTarget(dirs, route)
      if (target === null) continue
      hosts.push(route.host)
      targets.push(target)
    }
    const looks = await (this.#deps.lookAll ?? lookAtAll)(targets)
    const looked = new Set(hosts)
    for (const [i, host] of hosts.entries()) {
      const look = looks[i]
      if (look !== undefined) this.note(host, look)
    }
    // A host no longer a flat or nested row has nothing to say.
    for (const host of [...this.#wrong.keys()])
      if (!looked.has(host)) {
        this.#wrong.delete(host)
        this.#version++
      }
    if (this.#wrong.size > 0) {
      const codes: Record<string, number> = {}
      for (const { why } of this.#wrong.values()) codes[why.code] = (codes[why.code] ?? 0) + 1
      this.#deps.logger.warn(
        { rows: this.#wrong.size, codes },
        `layout: ${this.#wrong.size} rows' files are not where the row says: they do not wake (docs/runbook.md)`,
      )
    }
  }

  /** A row whose files the last look found elsewhere reads `fenced`. */
  reportPass(pass: LayoutPass): ReportPass {
    const classify = (route: Route, routes: readonly Route[]): Classification => {
      const c = pass.classify(route, routes)
      if (c.layout !== 'flat' && c.layout !== 'nested') return c
      const why = this.wrong(route)
      return why === undefined ? c : { layout: 'fenced', ...why }
    }
    return {
      classify,
      held: (host) => pass.held(host),
      note: (host) => pass.note(host),
      facts: () => {
        const facts = pass.facts()
        if (this.#wrong.size === 0) return facts
        const { routes, byHost } = this.#deps.registry.snapshot()
        const passFenced = new Set(facts.fenced.map(([host]) => host))
        const fenced = [...facts.fenced]
        for (const host of this.#wrong.keys()) {
          const route = byHost.get(host)
          if (route === undefined || passFenced.has(host)) continue
          const c = classify(route, routes)
          if (c.layout === 'fenced' && c.code !== '') fenced.push([host, { code: c.code, reason: c.reason }])
        }
        return { ...facts, fenced }
      },
      // Both counts only grow: their sum moves whenever either does.
      changes: () => pass.changes() + this.#version,
    }
  }
}

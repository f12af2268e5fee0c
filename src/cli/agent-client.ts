// The CLI's side of the agent's HTTP API, to the agent that holds this data
// root: it checks `GET /agent` first and refuses another root's (design §8
// "Which agent"). node:http, not undici: undici would dominate a command's start.
import fs from 'node:fs'
import http from 'node:http'
import path from 'node:path'
import type { Config } from '../config.js'
import { AgentUnreachable, errorMessage, errors } from '../errors.js'
import { seeHolder } from '../infra/agent-holder.js'
import { clientToken, type ClientToken } from '../infra/agent-token.js'
import type { Mode } from '../domain/modes.js'
import type { LayoutReport, LegRun, LegState } from '../domain/schemas.js'

/** --url as given, or the address the agent listens on. */
export function agentUrl(config: Config, flag: string | undefined): string {
  if (flag !== undefined) return flag.replace(/\/+$/, '')
  const host = config.listen.host.includes(':') ? `[${config.listen.host}]` : config.listen.host
  return `http://${host}:${config.listen.port}`
}

export interface AgentTarget {
  url: string
  via: string
  /** Absent with --url: the operator named the agent, maybe another box's. */
  dataDir?: string
  /** The start that wrote `D/agent.json`: its agent is ours by any path (a container's mount). */
  startId?: string
}

/** Which agent a command talks to (design §8 "Which agent"). */
export function findAgent(config: Config, flag: string | undefined): AgentTarget {
  if (flag !== undefined) return { url: agentUrl(config, flag), via: '--url' }
  const seen = seeHolder(config.dataDir)
  const mine = { dataDir: config.dataDir, ...(seen?.startId === undefined ? {} : { startId: seen.startId }) }
  if (seen?.listen !== undefined) return { url: `http://${seen.listen}`, via: `named by ${seen.file}`, ...mine }
  return { url: agentUrl(config, undefined), via: 'CARLOS_AGENT_LISTEN or its default', ...mine }
}

export function agentClient(config: Config, flag: string | undefined): AgentClient {
  return new AgentClient(findAgent(config, flag), clientToken(config))
}

/** Symlinks resolved, or the path as given where that fails. */
function realOrSelf(p: string): string {
  try {
    return fs.realpathSync(p)
  } catch {
    return path.resolve(p)
  }
}

const IDENTITY_MS = 30_000

/** Said after the reason when no agent answers. */
export const START_HINT =
  'is the agent running? start it with `layoutd serve` (or `npm start`), or give --url / CARLOS_AGENT_LISTEN'

export interface TaggedReport {
  report: LayoutReport
  etag: string
}

export interface ReadyAnswer {
  ready: boolean
  phase: string
}

export type WakeCheck = { granted: true; dir: string; socket: string; db: string } | { granted: false; reason: string }

interface Answer {
  status: number
  headers: http.IncomingHttpHeaders
  text: string
}

export class AgentClient {
  private readonly base: string
  readonly #target: AgentTarget
  /** Passed or under way; cleared when the agent could not be reached. */
  #checked: Promise<void> | undefined
  readonly #token: string
  /** Why no token is sent, said beside a 401. */
  readonly #missing: string | undefined

  constructor(target: string | AgentTarget, token: string | ClientToken) {
    this.#target = typeof target === 'string' ? { url: target, via: '--url' } : target
    this.base = this.#target.url
    this.#token = typeof token === 'string' ? token : token.token
    this.#missing = typeof token === 'string' || !('missing' in token) ? undefined : token.missing
  }

  get url(): string {
    return this.base
  }

  async status(): Promise<LayoutReport> {
    return (await this.call('GET', '/layout/status')) as LayoutReport
  }

  /** The report, or null (304) while it still has this ETag. */
  async statusIfChanged(etag: string | undefined): Promise<TaggedReport | null> {
    const headers: Record<string, string> = etag === undefined ? {} : { 'if-none-match': etag }
    const res = await this.send('GET', '/layout/status', 30_000, headers)
    if (res.status === 304) return null
    const report = this.decode('GET', '/layout/status', res) as LayoutReport
    return { report, etag: typeof res.headers.etag === 'string' ? res.headers.etag : '' }
  }

  async ready(timeoutMs: number): Promise<ReadyAnswer> {
    const res = await this.send('GET', '/ready', timeoutMs, {})
    if (res.status === 503) return this.parse('GET', '/ready', res) as ReadyAnswer
    return this.decode('GET', '/ready', res) as ReadyAnswer
  }

  /** GET /ready/:host, which records nothing. */
  async wake(host: string): Promise<WakeCheck> {
    const path = `/ready/${encodeURIComponent(host)}`
    const res = await this.send('GET', path, 30_000, {})
    // 409: refused; 503: starting or stopping, said in the same body.
    if (res.status === 409 || res.status === 503)
      return { granted: false, ...(this.parse('GET', path, res) as { reason: string }) }
    return { granted: true, ...(this.decode('GET', path, res) as { dir: string; socket: string; db: string }) }
  }

  async kick(): Promise<LegState> {
    return ((await this.call('POST', '/layout/converge')) as { leg: LegState }).leg
  }

  /** Kicks the leg and waits; underWay is the run under way at the kick, if one finished. */
  async waitRun(): Promise<{ run: LegRun; underWay: LegRun | null }> {
    const answer = (await this.call('POST', '/layout/converge?wait=1', 0)) as { run: LegRun; underWay?: LegRun | null }
    return { run: answer.run, underWay: answer.underWay ?? null }
  }

  /** A new row's mode, by the gate's real answer. */
  async mint(timeoutMs: number): Promise<Mode> {
    return ((await this.call('GET', '/layout/mint', timeoutMs)) as { mode: Mode }).mode
  }

  async leg(): Promise<LegState> {
    return (await this.status()).leg
  }

  private async call(method: 'GET' | 'POST', path: string, timeoutMs = 30_000): Promise<unknown> {
    return this.decode(method, path, await this.send(method, path, timeoutMs, {}))
  }

  /** After the identity check; timeoutMs bounds the agent's silence (0: none). */
  private async send(
    method: 'GET' | 'POST',
    path: string,
    timeoutMs: number,
    extra: Record<string, string>,
  ): Promise<Answer> {
    const dataDir = this.#target.dataDir
    if (dataDir !== undefined) {
      const timeout = timeoutMs === 0 ? IDENTITY_MS : Math.min(timeoutMs, IDENTITY_MS)
      this.#checked ??= this.#check(dataDir, timeout).catch((err: unknown) => {
        // An agent not up yet may be up at the next ask (`status --wait-ready`).
        if (err instanceof AgentUnreachable) this.#checked = undefined
        throw err
      })
      await this.#checked
    }
    return this.request(method, path, timeoutMs, extra)
  }

  /** Throws unless the answering agent holds dataDir, realpaths compared. */
  async #check(dataDir: string, timeoutMs: number): Promise<void> {
    const res = await this.request('GET', '/agent', timeoutMs, {})
    const { url, via } = this.#target
    if (res.status === 404) throw errors.agentUnidentified(url, via, 'GET /agent answered 404')
    let body: unknown
    try {
      body = JSON.parse(res.text)
    } catch {
      throw errors.agentUnidentified(url, via, `GET /agent answered ${res.status} with a body that is not JSON`)
    }
    if (res.status >= 400) this.decode('GET', '/agent', res)
    const { dataDir: theirs, startId } = (body ?? {}) as { dataDir?: unknown; startId?: unknown }
    // The start that wrote our agent.json: ours, by whatever path.
    if (this.#target.startId !== undefined && startId === this.#target.startId) return
    if (typeof theirs !== 'string' || theirs === '')
      throw errors.agentUnidentified(url, via, 'GET /agent named no dataDir')
    const ours = realOrSelf(dataDir)
    if (theirs !== ours && realOrSelf(theirs) !== ours) throw errors.agentOtherDataRoot(url, theirs, dataDir, via)
  }

  private request(
    method: 'GET' | 'POST',
    path: string,
    timeoutMs: number,
    extra: Record<string, string>,
  ): Promise<Answer> {
    const headers: Record<string, string> = { accept: 'application/json', ...extra }
    if (this.#token !== '') headers.authorization = `Bearer ${this.#token}`
    const unreachable = (err: unknown) => {
      // Refused: nothing listens; any other failure is said as it is.
      const hint = (err as NodeJS.ErrnoException).code === 'ECONNREFUSED' ? `; ${START_HINT}` : ''
      return errors.agentUnreachable(`cannot reach layoutd at ${this.base}: ${errorMessage(err)}${hint}`, {
        cause: err,
      })
    }
    return new Promise((resolve, reject) => {
      let req: http.ClientRequest
      try {
        // No keep-alive: an idle pooled socket would hold the process open.
        req = http.request(this.base + path, { method, headers, agent: false, timeout: timeoutMs })
      } catch (err) {
        reject(unreachable(err))
        return
      }
      req.on('timeout', () => {
        // ETIMEDOUT, so a caller tells running out of time from a refusal or reset.
        const late: NodeJS.ErrnoException = new Error(`no answer within ${timeoutMs / 1000}s`)
        late.code = 'ETIMEDOUT'
        req.destroy(late)
      })
      req.on('error', (err) => reject(unreachable(err)))
      req.on('response', (res) => {
        const chunks: Buffer[] = []
        res.on('data', (c: Buffer) => chunks.push(c))
        res.on('error', (err) => reject(unreachable(err)))
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }),
        )
      })
      req.end()
    })
  }

  private parse(method: string, path: string, res: Answer): unknown {
    try {
      return JSON.parse(res.text)
    } catch {
      throw errors.agentUnreachable(
        `${method} ${this.base}${path}: answered ${res.status} with a body that is not JSON`,
      )
    }
  }

  private decode(method: string, path: string, res: Answer): unknown {
    const body = this.parse(method, path, res)
    if (res.status >= 400) {
      const e = (body as { error?: { code?: string; message?: string } }).error
      const message = e?.message ?? res.text
      // A 401 says why this command had no token.
      const why = res.status === 401 && this.#missing !== undefined ? `; no token was sent: ${this.#missing}` : ''
      throw errors.agentAnswered(`${method} ${path}`, res.status, e?.code, message + why)
    }
    return body
  }
}

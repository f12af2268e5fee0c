// The CLI's side of the agent's HTTP API (`layoutd status`, `layoutd
// converge`, the mint of `routes add`): undici requests with the token the
// agent reads. An agent that does not answer is the catalogue's
// AgentUnreachable, naming which agent; an error the agent answers (design
// §6) becomes the same coded error here, with the agent's status.
import { request } from 'undici'
import type { Config } from '../config.js'
import { errorMessage, errors } from '../errors.js'
import type { Mode } from '../domain/modes.js'
import type { LayoutReport, LegRun, LegState } from '../domain/schemas.js'

/** The agent a command talks to: --url as given, or the address the agent listens on. */
export function agentUrl(config: Config, flag: string | undefined): string {
  if (flag !== undefined) return flag.replace(/\/+$/, '')
  const host = config.listen.host.includes(':') ? `[${config.listen.host}]` : config.listen.host
  return `http://${host}:${config.listen.port}`
}

export class AgentClient {
  constructor(
    private readonly base: string,
    private readonly token: string,
  ) {}

  async status(): Promise<LayoutReport> {
    return (await this.call('GET', '/layout/status')) as LayoutReport
  }

  async kick(): Promise<LegState> {
    return ((await this.call('POST', '/layout/converge')) as { leg: LegState }).leg
  }

  /** Kicks the leg and waits for the run that kick asked for. */
  async waitRun(): Promise<LegRun> {
    return ((await this.call('POST', '/layout/converge?wait=1', 0)) as { run: LegRun }).run
  }

  /** The mode the agent mints a new row in (its gate's real answer). */
  async mint(timeoutMs: number): Promise<Mode> {
    return ((await this.call('GET', '/layout/mint', timeoutMs)) as { mode: Mode }).mode
  }

  async leg(): Promise<LegState> {
    return (await this.status()).leg
  }

  private async call(method: 'GET' | 'POST', path: string, timeoutMs = 30_000): Promise<unknown> {
    const headers: Record<string, string> = {}
    if (this.token !== '') headers.authorization = `Bearer ${this.token}`
    let res
    try {
      res = await request(this.base + path, { method, headers, headersTimeout: timeoutMs, bodyTimeout: timeoutMs })
    } catch (err) {
      throw errors.agentUnreachable(`cannot reach layoutd at ${this.base}: ${errorMessage(err)}`, { cause: err })
    }
    const text = await res.body.text()
    let body: unknown
    try {
      body = JSON.parse(text)
    } catch {
      throw errors.agentUnreachable(`${method} ${this.base}${path}: answered ${res.statusCode} with a body that is not JSON`)
    }
    if (res.statusCode >= 400) {
      const e = (body as { error?: { code?: string; message?: string } }).error
      throw errors.agentAnswered(`${method} ${path}`, res.statusCode, e?.code, e?.message ?? text)
    }
    return body
  }
}

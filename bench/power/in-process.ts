// The agent of one crash state, started inside the checker's own process
// (design §3.5): composed exactly as `layoutd serve` composes it
// (src/server.ts: the data root's lock, the registry, the deploy store, the
// agent, the HTTP app on a loopback port, then start-up), with the
// environment a process of the sandbox would get, so no module is loaded
// again for each state. A node start costs the explorer over a second of
// CPU a state; this, a tenth of it. Stopped as `serve` stops on a signal,
// which also shows that nothing of one state's agent is left running when
// the next one starts on the same path.
import type { AddressInfo } from 'node:net'
import { composeAgent } from '../../src/agent/compose.js'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import type { LayoutReport } from '../../src/domain/schemas.js'
import { AgentLock } from '../../src/infra/agent-lock.js'
import { agentToken } from '../../src/infra/agent-token.js'
import { openDeployStore } from '../../src/infra/deploy-store.js'
import { edgeReloader } from '../../src/infra/edge.js'
import { Registry } from '../../src/infra/registry.js'
import { createLogger } from '../../src/logger.js'
import { Metrics } from '../../src/metrics/metrics.js'
import { freePort, sandboxEnv, type Sandbox } from '../../test/helpers/agent-process.js'

/** What a check asks of the agent it started, in a process of its own or in this one. */
export interface StartedAgent {
  readonly url: string
  readonly pid: number
  /** performance.now() when the start began. */
  readonly startedAt: number
  /** Set when it stopped (or crashed) by itself, with why. */
  readonly exit: unknown
  status(): Promise<LayoutReport>
  ready(): Promise<boolean>
  tail(): string
  /** The header a change (POST, PUT, DELETE) carries: the agent's bearer token (design §6). */
  authorization(): { authorization: string }
  /** Ends it: kill -9 for a process; here, the signal path of `serve` (the app closed, the agent stopped). */
  kill(): Promise<unknown>
}

/** Starts the agent on sb in this process, in src/server.ts's order, and answers once it listens (start-up recovery under way). */
export async function startInProcess(sb: Sandbox): Promise<StartedAgent> {
  const startedAt = performance.now()
  const config = loadConfig(
    sandboxEnv(sb, { CARLOS_AGENT_LISTEN: `127.0.0.1:${await freePort()}`, CARLOS_LOG_LEVEL: 'error' }),
  )
  const lines: string[] = []
  const sink = {
    write: (s: string) => (lines.push(s), lines.length > 40 && lines.shift(), true),
  } as unknown as NodeJS.WritableStream
  const logger = createLogger(config.logLevel, sink)
  const lock = AgentLock.acquire(config.dataDir)
  const metrics = new Metrics()
  let token: string
  let registry: Registry
  let store: Awaited<ReturnType<typeof openDeployStore>>
  try {
    // As serve reads it under the lock: D/agent.token, made when the state has none.
    token = agentToken(config).token
    registry = Registry.open(config.dataDir)
    store = await openDeployStore(config, logger)
  } catch (err) {
    lock.release()
    throw err
  }
  const agent = composeAgent({
    config,
    logger,
    metrics,
    registry,
    store,
    reload: edgeReloader(config.edgeReloadUrl, logger),
  })
  const app = await buildApp({ api: agent, metrics, logger, token, identity: lock.identity })
  app.addHook('onClose', async () => {
    await agent.stop()
    await store.close()
    registry.close()
    lock.release()
  })
  try {
    await app.listen({ host: config.listen.host, port: config.listen.port })
  } catch (err) {
    await app.close()
    throw err
  }
  const port = (app.server.address() as AddressInfo).port
  lock.listening(`127.0.0.1:${port}`)
  let exit: unknown
  agent.start().catch((err: unknown) => {
    exit = err
  })
  const url = `http://127.0.0.1:${port}`
  let closed: Promise<unknown> | undefined
  return {
    url,
    pid: process.pid,
    startedAt,
    get exit() {
      return exit
    },
    async status() {
      const res = await app.inject({ method: 'GET', url: '/layout/status' })
      if (res.statusCode !== 200) throw new Error(`GET /layout/status answered ${res.statusCode}: ${res.body}`)
      return res.json<LayoutReport>()
    },
    async ready() {
      return (await app.inject({ method: 'GET', url: '/ready' })).statusCode === 200
    },
    tail: () =>
      `${exit === undefined ? '' : `start-up failed: ${exit instanceof Error ? exit.message : JSON.stringify(exit)}\n`}${lines.join('')}`,
    authorization: () => ({ authorization: `Bearer ${token}` }),
    kill: () => (closed ??= app.close()),
  }
}
